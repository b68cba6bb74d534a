package front

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The relay's reads and writes are raw system calls (internal/base/rawio):
// a node connection's inside its RawConn callbacks (sendAwait, the
// batcher), a plain TCP client connection's through cc.io.

// rawQuiet reports whether fd has nothing to read: a MSG_PEEK that does
// not wait answers EAGAIN (data or end of stream answer otherwise). Raw for
// the reason rawio gives.
func rawQuiet(fd int, b []byte) bool {
	_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	return e == unix.EAGAIN || e == unix.EWOULDBLOCK
}

// fill reads once into cc.in's free space, as inbuf.fill does.
func (cc *clientConn) fill() (int, error) {
	ib := &cc.in
	if !cc.io.Active() {
		return ib.fill(cc.c)
	}
	if ib.w == len(ib.b) {
		if ib.r == 0 {
			return 0, errBufFull
		}
		ib.w = copy(ib.b, ib.b[ib.r:ib.w])
		ib.r = 0
	}
	n, err := cc.io.Read(ib.b[ib.w:])
	ib.w += n
	return n, err
}
