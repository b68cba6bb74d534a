//go:build !linux

package main

import "errors"

func runUpPopsWAN(popsRun) error {
	return errors.New("the WAN lab needs Linux; use --loopback")
}
