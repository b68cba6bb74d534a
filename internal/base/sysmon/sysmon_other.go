//go:build !linux

package sysmon

import "errors"

// Idle is only implemented on Linux.
func Idle() (int, error) { return 0, errors.New("sysmon: SCHED_IDLE is Linux-only") }

// Policy is only implemented on Linux.
func Policy(tid int) (uint32, error) { return 0, errors.New("sysmon: Linux-only") }
