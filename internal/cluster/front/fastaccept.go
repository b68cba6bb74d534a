//go:build linux

package front

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"shoal/internal/base/accept"
	"shoal/internal/base/rawio"
)

// The raw accept path: under passfd alone (Config.Path is PassFD, no
// Choose), a connection whose whole request arrived with it costs the
// front four system calls and no allocation — accept4, read, sendmsg,
// close — instead of a net.Conn, a netpoller registration (two epoll_ctl),
// getsockname, TCP_NODELAY, a read deadline timer and a goroutine. With one
// request per connection that fixed cost is most of what a handoff front
// does (README "Data paths"; bench/handoff-cpu.sh), the same reason nginx
// and HAProxy accept in their event loop without a thread per connection.
//
// One goroutine per listener accepts (the listener stays in the netpoller,
// so Shutdown's Close wakes it), reads the head non-blocking into one reused
// buffer (TCP_DEFER_ACCEPT, listen.go, makes it normally already there),
// parses it, asks the policy and passes the bare descriptor to the node
// with a send that never waits. Anything else — a partial head, a parse
// error, CONNECT, no node, a node without a handoff socket, a full node
// socket, a failed send, EOF — wraps the descriptor into a net.Conn with
// the bytes read and serves it on the normal path (its own goroutine), so
// refusals, the header timeout (slowloris), relay fallbacks and retries
// behave exactly as they did; nothing blocks the accept loop.

// The repair path (Config.Path is a *RepairPath, no Choose) takes the same
// loop: it freezes the accepted descriptor, steers its flow and sends its
// state to the node without waiting for the answer; the node's control
// channel reader finishes the connection when the answer comes (repairfast.go).

// rawAccept is one listener's raw accept loop and the state it reuses.
type rawAccept struct {
	s   *Server
	mv  rawMover // the server's path: passfd or repair
	buf []byte
	rr  rawRoute
}

// fastAccept returns the raw accept loop's state when ln can be served by
// it: under a path that moves bare descriptors (passfd, repair) alone, on a
// TCP listener.
func (s *Server) fastAccept(ln net.Listener) (*net.TCPListener, *rawAccept) {
	if s.cfg.noFastAccept || s.cfg.Choose != nil || len(s.cfg.ProxyFrom) > 0 {
		return nil, nil // with PROXY headers to read, every connection takes the normal path
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil, nil
	}
	if mv, ok := s.cfg.Path.(rawMover); ok {
		return tl, &rawAccept{s: s, mv: mv}
	}
	return nil, nil
}

// rawListener is what Serve registers for a listener served by the raw
// accept loop: closing it (Shutdown, Close) closes the loop's duplicate of
// the listening descriptor too, which wakes the loop and stops listening.
type rawListener struct {
	*net.TCPListener
	f *os.File
}

func (l rawListener) Close() error {
	l.f.Close()
	return l.TCPListener.Close()
}

// serveRaw is Serve's loop for the raw accept path. A listener's own
// RawConn cannot wait for readiness (its Read is not supported), so the
// loop waits on a duplicate of the descriptor (TCPListener.File, which
// stays non-blocking and in the netpoller). Stop it with Shutdown or Close:
// closing only ln leaves the duplicate listening.
func (s *Server) serveRaw(tl *net.TCPListener, ra *rawAccept) error {
	f, err := tl.File()
	if err != nil {
		return fmt.Errorf("front: accept: %w", err)
	}
	rl := rawListener{tl, f}
	s.mu.Lock()
	delete(s.listeners, tl)
	closing := s.closing.Load()
	if !closing {
		s.listeners[rl] = struct{}{}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, rl)
		s.mu.Unlock()
		f.Close()
	}()
	if closing {
		return ErrServerClosed
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("front: accept: %w", err)
	}
	ra.buf = make([]byte, s.inSize())
	var b accept.Backoff
	for {
		var fd int
		var aerr error
		err := rc.Read(func(lfd uintptr) bool {
			for {
				// No peer address: the handoff does not need it, and
				// the fallback's net.FileConn asks the kernel itself.
				// Raw system calls throughout: none of them can block (the
				// descriptors are non-blocking), and the runtime's syscall
				// bookkeeping costs a sysmon wakeup per call when idle.
				r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, lfd, 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
				switch e {
				case 0:
					fd, aerr = int(r), nil
					return true
				case unix.EINTR, unix.ECONNABORTED:
					continue // the client gave up while queued; take the next
				case unix.EAGAIN:
					return false // wait in the netpoller
				}
				fd, aerr = -1, e
				return true
			}
		})
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			return fmt.Errorf("front: accept: %w", err)
		}
		if aerr != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			// EMFILE and the like: the port stays (internal/base/accept).
			b.Wait(aerr, s.acceptRetry)
			continue
		}
		b.Reset()
		ra.conn(fd)
	}
}

// conn serves one accepted descriptor: moved to a node here, or handed to
// the normal path.
func (ra *rawAccept) conn(fd int) {
	s := ra.s
	if s.closing.Load() {
		rawClose(fd)
		return
	}
	n, err := rawio.Read(fd, ra.buf)
	switch {
	case n > 0:
		s.ctr.bytesIn.Add(uint64(n))
	case err == unix.EAGAIN || err == unix.EINTR:
		n = 0 // nothing yet (the deferred accept timed out): normal path
	default:
		// EOF or a reset before any byte: what the normal path would have
		// done after accepting it.
		s.ctr.connsAccepted.Add(1)
		rawClose(fd)
		return
	}
	ra.rr.m = rawMove{fd: fd, data: ra.buf[:n], holder: -1}
	s.dispatchRaw(ra.mv, &ra.rr)
}
