//go:build linux

package handoff

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fdSock is an FDClient's connected SOCK_SEQPACKET socket, kept out of Go's
// network poller. The poller registers every socket for writability too
// (edge-triggered EPOLLOUT), and a unix socket signals write space each
// time its peer dequeues a record (unix_write_space has no "was full" test,
// as TCP has): every connection a node took off the socket woke the idle
// front once, for nothing, since nobody waits to write there. Here the
// socket is a bare descriptor that only an epoll instance of its own
// watches, for input alone, and that epoll descriptor is what the poller
// waits on (an epoll descriptor is readable while it has events): the
// reader still parks in the poller, write space wakes nobody, and reading
// costs no extra system call (the kernel polls the inner epoll through the
// outer one; nobody waits on the inner one).
//
// fdSock is a syscall.RawConn over the socket's descriptor. Read waits in
// the poller; Write, which only a send that found the socket full reaches
// (the node stopped taking connections), waits in poll(2) up to the
// deadline SetWriteDeadline set.
type fdSock struct {
	// mu: Control and Write hold it shared while they use fd, close
	// exclusively before closing it, so fd is never reused under a send.
	mu     sync.RWMutex
	fd     int
	closed bool
	ep     *os.File        // the inner epoll, in the poller
	erc    syscall.RawConn // ep's
	wdl    atomic.Int64    // write deadline, Unix ns; 0: none

	// rf is the current Read's step and rstep the step given to erc,
	// bound once so a read does not allocate; one reader at a time.
	rf        func(fd uintptr) bool
	rstep     func(uintptr) bool
	closeOnce sync.Once
}

// newClientSock takes over uc's socket: it duplicates the descriptor,
// closes uc (which takes it out of the poller) and watches the duplicate
// for input with an epoll instance of its own. uc is closed also on error.
func newClientSock(uc *net.UnixConn) (clientSock, error) {
	defer uc.Close()
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("handoff: socket: %w", err)
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("handoff: socket: %w", err)
	}
	if derr != nil {
		return nil, fmt.Errorf("handoff: dup socket: %w", derr)
	}
	s, err := watchSock(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

// watchSock makes the fdSock of the non-blocking socket fd.
func watchSock(fd int) (*fdSock, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("handoff: epoll: %w", err)
	}
	// Level-triggered: the outer, edge-triggered registration is told of
	// every new event, and a stale entry is dropped when polled.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("handoff: epoll add: %w", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("handoff: epoll: %w", err)
	}
	ep := os.NewFile(uintptr(epfd), "handoff-epoll") // non-blocking: the poller watches it
	erc, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		return nil, fmt.Errorf("handoff: epoll: %w", err)
	}
	s := &fdSock{fd: fd, ep: ep, erc: erc}
	s.rstep = func(uintptr) bool { return s.rf(uintptr(s.fd)) }
	return s, nil
}

// Control calls f with the socket's descriptor, which stays open meanwhile.
func (s *fdSock) Control(f func(fd uintptr)) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return net.ErrClosed
	}
	f(uintptr(s.fd))
	return nil
}

// Read calls f with the socket's descriptor until it returns true, waiting
// in the poller for input between calls. One reader at a time; the
// descriptor stays open until Read returns (close waits for it).
func (s *fdSock) Read(f func(fd uintptr) bool) error {
	s.rf = f
	err := s.erc.Read(s.rstep)
	s.rf = nil
	return err
}

// Write calls f with the socket's descriptor until it returns true,
// waiting in poll(2) for room between calls, up to the write deadline
// (then os.ErrDeadlineExceeded, a net.Error whose Timeout is true).
func (s *fdSock) Write(f func(fd uintptr) bool) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for {
		if s.closed {
			return net.ErrClosed
		}
		if f(uintptr(s.fd)) {
			return nil
		}
		ms := -1
		if dl := s.wdl.Load(); dl != 0 {
			left := time.Until(time.Unix(0, dl))
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			ms = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		// close shuts the socket down before it waits for mu, which
		// ends this wait (POLLHUP); the next send then fails.
		pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLOUT}}
		if _, err := unix.Poll(pfd, ms); err != nil && err != unix.EINTR {
			return fmt.Errorf("handoff: poll: %w", err)
		}
	}
}

// SetWriteDeadline sets the deadline of Write's waits; the zero time: none.
func (s *fdSock) SetWriteDeadline(t time.Time) error {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	s.wdl.Store(ns)
	return nil
}

// Close closes the socket: the reader wakes with an error, a sender waiting
// for room wakes (the shutdown) and the descriptor is closed once no send
// uses it. Later calls do nothing.
func (s *fdSock) Close() error {
	s.closeOnce.Do(func() {
		s.ep.Close() // waits for a reader inside its step to leave
		unix.Shutdown(s.fd, unix.SHUT_RDWR)
		s.mu.Lock()
		s.closed = true
		unix.Close(s.fd)
		s.mu.Unlock()
	})
	return nil
}
