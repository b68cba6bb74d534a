package handoff

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SockConn is a client TCP socket received over a handoff socket and
// adopted as it came: the received descriptor becomes the connection's own,
// registered once with Go's poller through os.NewFile. net.FileConn, which
// WrapFD uses, costs a node about ten system calls per received connection
// (a dup, the os.File's registration and unregistration, SO_TYPE,
// getsockname, getpeername, a second registration, closing the original):
// under tbccrd in tag mode almost every request moves its connection, so
// that was paid per request. The addresses are read only if asked for
// (access log, trusted fronts). Reads, writes, deadlines and sendfile work as
// on a *net.TCPConn (SyscallConn's RawConn waits in the poller); the RawConn
// is made once, so the node's raw I/O, its sendfile and a later move do not
// each allocate one.
type SockConn struct {
	f  *os.File
	rc syscall.RawConn
	fd int
}

// adoptFD wraps fd, a received socket, without duplicating it. On error fd
// is closed.
func adoptFD(fd int) (*SockConn, error) {
	// os.NewFile registers a descriptor with the poller when it is
	// non-blocking, which a sender's Go socket always is (the flag lives in
	// the file description the descriptor shares). SetDeadline fails on a
	// file the poller does not hold: a blocking socket (a test's, another
	// program's) is then duplicated, made non-blocking and wrapped again.
	f := os.NewFile(uintptr(fd), "handoff")
	if f.SetDeadline(time.Time{}) != nil {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		f.Close()
		if err == nil {
			if err = unix.SetNonblock(dup, true); err != nil {
				unix.Close(dup)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: received socket: %v", ErrFDMessage, err)
		}
		fd, f = dup, os.NewFile(uintptr(dup), "handoff")
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: received socket: %v", ErrFDMessage, err)
	}
	return &SockConn{f: f, rc: rc, fd: fd}, nil
}

// Read implements net.Conn.
func (c *SockConn) Read(b []byte) (int, error) { return c.f.Read(b) }

// Write implements net.Conn.
func (c *SockConn) Write(b []byte) (int, error) { return c.f.Write(b) }

// Close implements net.Conn: it unregisters and closes the descriptor.
func (c *SockConn) Close() error { return c.f.Close() }

// CloseWrite shuts down the sending side, as *net.TCPConn's does.
func (c *SockConn) CloseWrite() error {
	var err error
	if cerr := c.rc.Control(func(fd uintptr) { err = unix.Shutdown(int(fd), unix.SHUT_WR) }); cerr != nil {
		return cerr
	}
	return err
}

// SyscallConn implements syscall.Conn with the RawConn made at adoption.
func (c *SockConn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

// SetDeadline implements net.Conn.
func (c *SockConn) SetDeadline(t time.Time) error { return c.f.SetDeadline(t) }

// SetReadDeadline implements net.Conn.
func (c *SockConn) SetReadDeadline(t time.Time) error { return c.f.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn.
func (c *SockConn) SetWriteDeadline(t time.Time) error { return c.f.SetWriteDeadline(t) }

// LocalAddr implements net.Conn; it asks the kernel (getsockname) each time.
func (c *SockConn) LocalAddr() net.Addr { return c.addr(false) }

// RemoteAddr implements net.Conn; it asks the kernel (getpeername) each
// time.
func (c *SockConn) RemoteAddr() net.Addr { return c.addr(true) }

func (c *SockConn) addr(peer bool) net.Addr {
	var sa unix.Sockaddr
	var err error
	if cerr := c.rc.Control(func(fd uintptr) {
		if peer {
			sa, err = unix.Getpeername(int(fd))
		} else {
			sa, err = unix.Getsockname(int(fd))
		}
	}); cerr != nil || err != nil {
		return &net.TCPAddr{}
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)))
	case *unix.SockaddrInet6:
		return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port)))
	}
	return &net.TCPAddr{}
}

// String names the connection in errors.
func (c *SockConn) String() string { return fmt.Sprintf("handoff socket %d", c.fd) }
