//go:build unix

package front

import "syscall"

// DescriptorLimit returns the process's descriptor limit (see nofile), from
// which the connection limits' defaults derive.
func DescriptorLimit() int { return nofile() }

// nofile returns the soft RLIMIT_NOFILE (raised to the hard limit by the Go
// runtime at start), or 1024 when it cannot be read.
func nofile() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == 0 {
		return 1024
	}
	if r.Cur > 1<<30 {
		return 1 << 30
	}
	return int(r.Cur)
}
