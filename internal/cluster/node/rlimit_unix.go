//go:build unix

package node

import "syscall"

// nofile returns the soft RLIMIT_NOFILE (raised to the hard limit by the Go
// runtime at start), or 1024 when it cannot be read.
func nofile() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == 0 {
		return 1024
	}
	return int(min(r.Cur, 1<<30))
}
