//go:build !linux

package main

import "errors"

func runUpPopsWAN(int, string, string, int, int) error {
	return errors.New("the WAN lab needs Linux; use --loopback")
}
