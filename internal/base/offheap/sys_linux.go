//go:build linux

package offheap

import "golang.org/x/sys/unix"

// mapAnon maps n bytes of zeroed anonymous memory outside the Go heap.
// MAP_NORESERVE: untouched pages cost nothing, not even overcommit.
func mapAnon(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
}

// unmapAnon returns a mapping of mapAnon's.
func unmapAnon(b []byte) { _ = unix.Munmap(b) }
