package front

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errEOF is io.EOF, which a raw read returns at the end of the stream.
var errEOF = io.EOF

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

// rawWritev writes a then b to the non-blocking descriptor fd once.
func rawWritev(fd int, a, b []byte) (int, error) {
	iov := [2]unix.Iovec{{Base: unsafe.SliceData(a)}, {Base: unsafe.SliceData(b)}}
	iov[0].SetLen(len(a))
	iov[1].SetLen(len(b))
	r, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), 2)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// clientIO is a plain TCP client connection's reads and writes made with
// raw system calls inside its RawConn (so the poller still parks the
// goroutine, and deadlines still apply), for the same reason as the node
// connections'. TLS and wrapped connections keep net.Conn's calls.
type clientIO struct {
	raw syscall.RawConn // nil: use net.Conn
	// rstep and wstep are readStep and writeStep bound once per pooled
	// clientConn, so a call allocates nothing.
	rstep, wstep func(fd uintptr) bool
	rb           []byte
	rn           int
	wv           [2][]byte
	wn           int
	err          error
}

// bindIO sets up cc's raw I/O for c when it is a plain TCP connection.
func (cc *clientConn) bindIO(c net.Conn) {
	cc.io.raw = nil
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	if cc.io.rstep == nil {
		cc.io.rstep, cc.io.wstep = cc.io.readStep, cc.io.writeStep
	}
	cc.io.raw = raw
}

// fill reads once into cc.in's free space, as inbuf.fill does.
func (cc *clientConn) fill() (int, error) {
	ib := &cc.in
	if cc.io.raw == nil {
		return ib.fill(cc.c)
	}
	if ib.w == len(ib.b) {
		if ib.r == 0 {
			return 0, errBufFull
		}
		ib.w = copy(ib.b, ib.b[ib.r:ib.w])
		ib.r = 0
	}
	ci := &cc.io
	ci.rb, ci.rn, ci.err = ib.b[ib.w:], 0, nil
	err := ci.raw.Read(ci.rstep)
	ci.rb = nil
	if err == nil {
		err = ci.err
	}
	ib.w += ci.rn
	return ci.rn, err
}

// readStep is fill's RawConn.Read callback.
func (ci *clientIO) readStep(fd uintptr) bool {
	for {
		n, err := rawRead(int(fd), ci.rb)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false
		case err != nil:
			ci.err = err
		case n == 0:
			ci.err = errEOF
		}
		ci.rn = n
		return true
	}
}

// writeRaw writes a then b (either may be empty) to the client whole,
// waiting in the poller while the socket is full; it returns the bytes
// written.
func (cc *clientConn) writeRaw(a, b []byte) (int, error) {
	ci := &cc.io
	ci.wv[0], ci.wv[1], ci.wn, ci.err = a, b, 0, nil
	err := ci.raw.Write(ci.wstep)
	ci.wv[0], ci.wv[1] = nil, nil
	if err == nil {
		err = ci.err
	}
	return ci.wn, err
}

// writeStep is writeRaw's RawConn.Write callback.
func (ci *clientIO) writeStep(fd uintptr) bool {
	for len(ci.wv[0])+len(ci.wv[1]) > 0 {
		var n int
		var err error
		if len(ci.wv[0]) == 0 {
			ci.wv[0], ci.wv[1] = ci.wv[1], nil
		}
		if len(ci.wv[1]) == 0 {
			n, err = rawWrite(int(fd), ci.wv[0])
		} else {
			n, err = rawWritev(int(fd), ci.wv[0], ci.wv[1])
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false
		case err != nil:
			ci.err = err
			return true
		}
		ci.wn += n
		if n < len(ci.wv[0]) {
			ci.wv[0] = ci.wv[0][n:]
			continue
		}
		n -= len(ci.wv[0])
		ci.wv[0], ci.wv[1] = ci.wv[1][n:], nil
	}
	return true
}
