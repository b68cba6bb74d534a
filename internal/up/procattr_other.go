//go:build !linux

package up

import "syscall"

// childAttr puts a child in its own process group; without Linux's
// Pdeathsig a child outlives a killed parent, so stop `up` with SIGTERM.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
