//go:build linux

package handoff

import (
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fdSock is an FDClient's connected SOCK_SEQPACKET socket, kept out of Go's
// network poller. The poller registers every socket for writability too
// (edge-triggered EPOLLOUT), and a unix socket signals write space each time
// its peer dequeues a record: every connection the node took off the socket
// woke the front's idle scheduler once, about one wake-up per passed
// connection, for nothing (nobody waits to write; sends never wait). Here
// the socket is a bare descriptor that only its own epoll instance watches,
// for EPOLLIN alone, and that epoll descriptor is what the poller waits on
// (an epoll descriptor is readable while it has events): the reader still
// parks in the poller, and write space wakes nobody. Reading costs no extra
// system call: the inner epoll is never waited on, only polled by the
// kernel through the outer one.
//
// Sends never wait in the poller either: sendmsg with MSG_DONTWAIT, and a
// send allowed to wait for a full socket (Send's timeout) waits in poll(2),
// which happens only when the node has stopped taking connections.
type fdSock struct {
	// mu: senders hold it shared while they use fd, close exclusively
	// before closing it, so fd is never reused under a send.
	mu     sync.RWMutex
	fd     int
	closed bool
	ep     *os.File // the inner epoll, registered with the poller
	rc     syscall.RawConn

	// State of the one reader's recv; rstep is recvStep bound once, so a
	// read does not allocate a closure.
	rstep             func(uintptr) bool
	rbuf, roob        []byte
	rn, roobn, rflags int
	rerr              error
	closeOnce         sync.Once
}

// newFDSock takes over uc's socket: it duplicates the descriptor, closes uc
// (which takes it out of the poller) and watches the duplicate for input
// with an epoll instance of its own.
func newFDSock(uc *net.UnixConn) (*fdSock, error) {
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
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("handoff: epoll: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		unix.Close(epfd)
		return nil, fmt.Errorf("handoff: epoll add: %w", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(fd)
		unix.Close(epfd)
		return nil, fmt.Errorf("handoff: epoll: %w", err)
	}
	ep := os.NewFile(uintptr(epfd), "handoff-epoll") // non-blocking: the poller watches it
	erc, err := ep.SyscallConn()
	if err != nil {
		unix.Close(fd)
		ep.Close()
		return nil, fmt.Errorf("handoff: epoll: %w", err)
	}
	s := &fdSock{fd: fd, ep: ep, rc: erc}
	s.rstep = s.recvStep
	return s, nil
}

// send writes one record, msg with the control data oob (nil for none).
// wait 0 never waits: a full socket gives ErrWouldBlock. Otherwise it waits
// up to wait for room, then fails with os.ErrDeadlineExceeded (a net.Error
// whose Timeout is true).
func (s *fdSock) send(msg, oob []byte, wait time.Duration) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return net.ErrClosed
	}
	iov := unix.Iovec{Base: &msg[0]}
	iov.SetLen(len(msg))
	mh := unix.Msghdr{Iov: &iov, Iovlen: 1}
	if len(oob) > 0 {
		mh.Control = &oob[0]
		mh.SetControllen(len(oob))
	}
	var deadline time.Time
	for {
		// A raw system call: it cannot block (MSG_DONTWAIT), so the
		// runtime's syscall bookkeeping would be pure cost.
		_, _, e := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&mh)), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		switch {
		case e == 0:
			return nil
		case e == unix.EINTR:
			continue
		case e != unix.EAGAIN:
			return e
		case wait <= 0:
			return ErrWouldBlock
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(wait)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLOUT}}
		if _, err := unix.Poll(pfd, int(left/time.Millisecond)+1); err != nil && err != unix.EINTR {
			return err
		}
	}
}

// recv reads one record into buf and its control data into oob, waiting
// for it in the poller. Only one goroutine reads.
func (s *fdSock) recv(buf, oob []byte) (n, oobn, flags int, err error) {
	s.rbuf, s.roob, s.rerr = buf, oob, nil
	err = s.rc.Read(s.rstep)
	s.rbuf, s.roob = nil, nil
	if err == nil {
		err = s.rerr
	}
	return s.rn, s.roobn, s.rflags, err
}

// recvStep is recv's RawConn.Read callback on the inner epoll: it reads the
// socket itself, and asks to wait only when it is empty.
func (s *fdSock) recvStep(uintptr) bool {
	for {
		n, oobn, flags, _, err := unix.Recvmsg(s.fd, s.rbuf, s.roob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		s.rn, s.roobn, s.rflags, s.rerr = n, oobn, flags, err
		return true
	}
}

// close closes the socket: the reader wakes with an error, a sender waiting
// for room wakes (the shutdown) and the descriptor is closed once no send
// uses it. It may be called more than once.
func (s *fdSock) close() error {
	s.closeOnce.Do(func() {
		s.ep.Close() // waits for a reader inside recvStep to leave
		unix.Shutdown(s.fd, unix.SHUT_RDWR)
		s.mu.Lock()
		s.closed = true
		unix.Close(s.fd)
		s.mu.Unlock()
	})
	return nil
}
