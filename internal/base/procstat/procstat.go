// Package procstat reads what the process itself has used: its CPU time
// (getrusage(2)) and its resident memory (/proc/self/statm). A node's
// status, the front's hybrid rule, the load generator's report and the
// simulator's benchmark all read these figures; one reader keeps them the
// same figure everywhere.
package procstat

import (
	"os"
	"syscall"
	"time"
)

// CPU is the process's user and system CPU time so far, every thread
// included; 0 when getrusage fails.
func CPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RSS is the process's resident set size in bytes, from the second field
// of /proc/self/statm (pages); 0 where there is no /proc.
func RSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	i := 0
	for i < len(b) && b[i] != ' ' {
		i++
	}
	var pages int64
	for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		pages = pages*10 + int64(b[i]-'0')
	}
	return pages * int64(os.Getpagesize())
}
