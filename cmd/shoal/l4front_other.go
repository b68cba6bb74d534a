//go:build !linux

package main

import "errors"

// benchL4Front: the L4 front's passfd and repair paths are Linux-only, and
// so is the command.
func benchL4Front([]string) error { return errors.New("bench l4front needs Linux") }
