package front

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Raw system calls for the relay's node connections. Each is made on a
// non-blocking socket and cannot block, so the runtime's syscall bookkeeping
// (entersyscall/exitsyscall) buys nothing; worse, on a front that idles
// between bursts the first bookkept call of each burst wakes the runtime's
// sysmon thread (a futex wake, then sysmon's polling until the process idles
// again): at 1 KB most of the relay's futex and nanosleep calls were that.

// rawRead reads from the non-blocking descriptor fd once.
func rawRead(fd int, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// rawWrite writes b to the non-blocking descriptor fd once.
func rawWrite(fd int, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// rawQuiet reports whether fd has nothing to read: a MSG_PEEK that does
// not wait answers EAGAIN (data or end of stream answer otherwise).
func rawQuiet(fd int, b []byte) bool {
	_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	return e == unix.EAGAIN || e == unix.EWOULDBLOCK
}
