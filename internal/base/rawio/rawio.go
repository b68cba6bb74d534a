//go:build unix

// Package rawio reads and writes non-blocking sockets with raw system calls.
//
// Each call here is made on a non-blocking descriptor and cannot block, so
// the runtime's syscall bookkeeping (entersyscall/exitsyscall) buys nothing.
// Worse, on a server that idles between bursts, the first bookkept call of
// each burst wakes the runtime's sysmon thread (a futex wake, then sysmon's
// nanosleep polling until the process idles again). Conn makes a plain TCP
// connection's reads and writes raw while keeping Go's poller for the waits:
// they run inside the connection's syscall.RawConn, so the goroutine still
// parks when the socket is empty or full and read and write deadlines still
// apply. Measured in docs/benchmarks.md ("Wake-ups nobody asked for").
package rawio

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read reads from the non-blocking descriptor fd once.
func Read(fd int, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// Write writes b to the non-blocking descriptor fd once.
func Write(fd int, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// TryRead reads once into b from the non-blocking descriptor fd, calling
// again when a signal interrupted it. again reports an empty socket
// (EAGAIN): the caller waits for readiness, then tries again. The end of
// the stream is io.EOF (when b has room). It is the read of Conn.Read, for
// callers that read inside RawConn callbacks of their own.
func TryRead(fd int, b []byte) (n int, again bool, err error) {
	for {
		n, err = Read(fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, true, nil
		case err != nil:
			return 0, false, err
		case n == 0 && len(b) > 0:
			return 0, false, io.EOF
		}
		return n, false, nil
	}
}

// TryDiscard drops up to n bytes the TCP socket fd has received, without
// copying them anywhere (recv(2) with MSG_TRUNC, which TCP sockets take as
// "consume"), calling again when a signal interrupted it; again and the
// end of the stream are as for TryRead. For a reader that counts a body
// and has no use for its bytes: a load generator's copy of every body is
// CPU taken from the server it shares a core with.
func TryDiscard(fd int, n int) (m int, again bool, err error) {
	for {
		r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), 0, uintptr(n), unix.MSG_TRUNC, 0, 0)
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			return 0, true, nil
		case e != 0:
			return 0, false, e
		case r == 0 && n > 0:
			return 0, false, io.EOF
		}
		return int(r), false, nil
	}
}

// TryWrite writes b to the non-blocking descriptor fd until all of it is
// written, the socket is full (again: EAGAIN, n bytes were taken) or a
// write fails, for callers that write inside RawConn callbacks of their
// own.
func TryWrite(fd int, b []byte) (n int, again bool, err error) {
	for n < len(b) {
		m, err := Write(fd, b[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return n, true, nil
		case err != nil:
			return n, false, err
		}
		n += m
	}
	return n, false, nil
}

// Writev writes a then b to the non-blocking descriptor fd once.
func Writev(fd int, a, b []byte) (int, error) {
	iov := [2]unix.Iovec{{Base: unsafe.SliceData(a)}, {Base: unsafe.SliceData(b)}}
	iov[0].SetLen(len(a))
	iov[1].SetLen(len(b))
	r, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), 2)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// Conn is the raw reads and writes of one plain TCP connection. The zero
// value is unbound (Active false); a Conn is reused across connections
// (Bind, Unbind) and its callbacks are bound once, so a call allocates
// nothing. One goroutine reads and one writes at a time.
type Conn struct {
	raw syscall.RawConn
	// rstep and wstep are readStep and writeStep bound once.
	rstep, wstep, dstep func(fd uintptr) bool
	tstep               func(fd uintptr) // tryStep bound once
	rb                  []byte
	dn                  int // Discard's bound
	rn                  int
	rerr                error
	wv                  [2][]byte
	wn                  int
	werr                error
	// vstep is writevStep bound once; vb the buffers it writes, iov its
	// iovec scratch.
	vstep func(fd uintptr) bool
	vb    [][]byte
	vn    int64
	iov   []unix.Iovec
}

// Bind makes c serve nc when it is a socket of its own (a *net.TCPConn, or
// any connection with a descriptor: syscall.Conn, such as a socket received
// from another process) and reports whether it does; other connections
// (TLS, wrappers) keep net.Conn's own calls.
func (c *Conn) Bind(nc net.Conn) bool {
	c.raw = nil
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	if c.rstep == nil {
		c.rstep, c.wstep, c.vstep, c.tstep, c.dstep = c.readStep, c.writeStep, c.writevStep, c.tryStep, c.discardStep
	}
	c.raw = raw
	return true
}

// Unbind forgets the connection.
func (c *Conn) Unbind() { c.raw = nil }

// Active reports whether c is bound to a connection.
func (c *Conn) Active() bool { return c.raw != nil }

// Read reads once into p, waiting in the poller while the socket is empty,
// as net.Conn's Read does (io.EOF at the end of the stream).
func (c *Conn) Read(p []byte) (int, error) {
	c.rb, c.rn, c.rerr = p, 0, nil
	err := c.raw.Read(c.rstep)
	c.rb = nil
	if err == nil {
		err = c.rerr
	}
	return c.rn, err
}

// Discard drops up to n received bytes (TryDiscard), waiting in the
// poller while the socket is empty; it returns how many it dropped (io.EOF
// at the end of the stream).
func (c *Conn) Discard(n int) (int, error) {
	c.dn, c.rn, c.rerr = n, 0, nil
	err := c.raw.Read(c.dstep)
	if err == nil {
		err = c.rerr
	}
	return c.rn, err
}

func (c *Conn) discardStep(fd uintptr) bool {
	n, again, err := TryDiscard(int(fd), c.dn)
	if again {
		return false
	}
	c.rn, c.rerr = n, err
	return true
}

func (c *Conn) readStep(fd uintptr) bool {
	n, again, err := TryRead(int(fd), c.rb)
	if again {
		return false
	}
	c.rn, c.rerr = n, err
	return true
}

// Loop runs f inside one syscall.RawConn.Read: f is called at once, then
// again each time the poller reports the socket readable, until it reports
// true. Go's poller forgets the socket's readiness at the start of every
// Read (a reader must then try the socket before it may wait), not between
// the calls of one: a caller that reads inside f and lets f return false
// only after a read came back short (the socket drained) or with EAGAIN
// waits without the read that would answer EAGAIN, and loses no bytes
// that arrive meanwhile. f must not read the connection through it (its
// read lock is held: that would deadlock) nor close it (Close waits for f
// to return); Shutdown ends it from another goroutine.
func (c *Conn) Loop(f func(fd uintptr) bool) error { return c.raw.Read(f) }

// Shutdown shuts both directions of the connection down (shutdown(2)),
// which wakes a Loop waiting on it (its read answers the end of the
// stream) and fails its writes, without waiting for it as Close would.
// The descriptor stays open until its owner closes the connection.
func (c *Conn) Shutdown() error {
	var err error
	if cerr := c.raw.Control(func(fd uintptr) { err = unix.Shutdown(int(fd), unix.SHUT_RDWR) }); cerr != nil {
		return cerr
	}
	return err
}

// Write writes a then b (either may be empty) whole, in one writev when
// both have bytes, waiting in the poller while the socket is full; it
// returns the bytes written.
func (c *Conn) Write(a, b []byte) (int, error) {
	c.wv[0], c.wv[1], c.wn, c.werr = a, b, 0, nil
	err := c.raw.Write(c.wstep)
	c.wv[0], c.wv[1] = nil, nil
	if err == nil {
		err = c.werr
	}
	return c.wn, err
}

// TryWrite writes what the socket takes now of a then b, without waiting,
// and returns the bytes written: for a caller that must not wait for a
// slow peer while it holds what others wait for, and writes the rest with
// Write afterwards.
func (c *Conn) TryWrite(a, b []byte) (int, error) {
	c.wv[0], c.wv[1], c.wn, c.werr = a, b, 0, nil
	err := c.raw.Control(c.tstep)
	c.wv[0], c.wv[1] = nil, nil
	if err == nil {
		err = c.werr
	}
	return c.wn, err
}

func (c *Conn) tryStep(fd uintptr) { c.writeStep(fd) }

func (c *Conn) writeStep(fd uintptr) bool {
	for len(c.wv[0])+len(c.wv[1]) > 0 {
		if len(c.wv[0]) == 0 {
			c.wv[0], c.wv[1] = c.wv[1], nil
		}
		var n int
		var err error
		if len(c.wv[1]) == 0 {
			n, err = Write(int(fd), c.wv[0])
		} else {
			n, err = Writev(int(fd), c.wv[0], c.wv[1])
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false
		case err != nil:
			c.werr = err
			return true
		}
		c.wn += n
		if n < len(c.wv[0]) {
			c.wv[0] = c.wv[0][n:]
			continue
		}
		n -= len(c.wv[0])
		c.wv[0], c.wv[1] = c.wv[1][n:], nil
	}
	return true
}

// maxIov bounds the buffers of one writev(2) (the kernel's UIO_MAXIOV is
// 1024).
const maxIov = 1024

// WriteBuffers writes every buffer of bufs whole with writev(2), as
// net.Buffers.WriteTo does for a *net.TCPConn (which a socket of another
// type does not get from the standard library: it writes buffer by
// buffer), waiting in the poller while the socket is full. bufs is
// consumed; it returns the bytes written.
func (c *Conn) WriteBuffers(bufs *net.Buffers) (int64, error) {
	c.vb, c.vn, c.werr = *bufs, 0, nil
	err := c.raw.Write(c.vstep)
	*bufs = c.vb
	c.vb = nil
	clear(c.iov) // the iovecs point into the caller's buffers
	if err == nil {
		err = c.werr
	}
	return c.vn, err
}

func (c *Conn) writevStep(fd uintptr) bool {
	for {
		for len(c.vb) > 0 && len(c.vb[0]) == 0 {
			c.vb = c.vb[1:]
		}
		if len(c.vb) == 0 {
			return true
		}
		c.iov = c.iov[:0]
		for _, b := range c.vb[:min(len(c.vb), maxIov)] {
			if len(b) > 0 {
				v := unix.Iovec{Base: unsafe.SliceData(b)}
				v.SetLen(len(b))
				c.iov = append(c.iov, v)
			}
		}
		r, _, e := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&c.iov[0])), uintptr(len(c.iov)))
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			return false
		case e != 0:
			c.werr = e
			return true
		}
		n := int64(r)
		c.vn += n
		for n > 0 && len(c.vb) > 0 {
			if k := int64(len(c.vb[0])); k <= n {
				n -= k
				c.vb = c.vb[1:]
			} else {
				c.vb[0] = c.vb[0][n:]
				n = 0
			}
		}
	}
}
