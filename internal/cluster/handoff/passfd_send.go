package handoff

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fdSender writes one record at a time with sendmsg(2) called in the
// socket's RawConn, a bare descriptor attached or none. SendFD's path costs
// three allocations a message (a closure for the descriptor, UnixRights'
// control buffer, the RawConn) and arms the socket's write deadline (a
// poller timer) for every message; a node in tag mode sends a move or an
// acknowledgement per moved request. Here the record buffer, the message
// header and the steps are made once, and the deadline is armed only when
// the socket is full and the send must wait. Not safe for concurrent use:
// FDClient pools them, fdPeer holds one under its send lock.
type fdSender struct {
	msg  []byte
	iov  unix.Iovec
	mh   unix.Msghdr
	oob  [32]byte
	ctl  func(fd uintptr)      // control bound once
	wait func(fd uintptr) bool // step bound once
	err  error
}

func newFDSender() *fdSender {
	s := &fdSender{msg: make([]byte, 0, 4<<10)}
	s.ctl, s.wait = s.control, s.step
	return s
}

// deadliner is a socket whose waiting writes can be given a deadline.
type deadliner interface {
	SetWriteDeadline(t time.Time) error
}

// send writes h and data with fd attached (fd < 0: none) on uc, whose
// RawConn is rc; a send that finds the socket full waits up to timeout (0:
// no limit). A nil error means the record (and the descriptor) is queued
// for the peer.
func (s *fdSender) send(uc deadliner, rc syscall.RawConn, h FDHeader, fd int, timeout time.Duration, data [][]byte) error {
	if err := s.prepare(h, fd, data); err != nil {
		return err
	}
	// First try without waiting, under Control: Write would refuse at once
	// if a deadline armed by an earlier wait has expired.
	s.err = nil
	if err := rc.Control(s.ctl); err != nil {
		return fmt.Errorf("handoff: sendmsg: %w", err)
	}
	if s.err == unix.EAGAIN {
		var dl time.Time
		if timeout > 0 {
			dl = time.Now().Add(timeout)
		}
		uc.SetWriteDeadline(dl)
		s.err = nil
		if err := rc.Write(s.wait); err != nil {
			return fmt.Errorf("handoff: sendmsg: %w", err)
		}
	}
	if s.err != nil {
		return fmt.Errorf("handoff: sendmsg: %w", s.err)
	}
	return nil
}

// prepare builds the record of h and data in s.msg and the message header
// that sends it, with fd attached (fd < 0: none).
func (s *fdSender) prepare(h FDHeader, fd int, data [][]byte) error {
	msg, err := record(nil, h, 0, s.msg, data)
	s.msg = msg
	if err != nil {
		return err
	}
	s.iov.Base = unsafe.SliceData(msg)
	s.iov.SetLen(len(msg))
	s.mh = unix.Msghdr{Iov: &s.iov}
	s.mh.Iovlen = 1
	if fd >= 0 {
		rights := appendRights(s.oob[:0], fd)
		s.mh.Control = &rights[0]
		s.mh.SetControllen(len(rights))
	}
	return nil
}

// trySend writes the prepared record on rc without ever waiting: a full
// socket gives unix.EAGAIN. It allocates nothing.
func (s *fdSender) trySend(rc syscall.RawConn) error {
	s.err = nil
	if err := rc.Control(s.ctl); err != nil {
		return err
	}
	return s.err
}

// sendConn is send with conn's descriptor attached; conn's descriptor stays
// open meanwhile.
func (s *fdSender) sendConn(uc clientSock, h FDHeader, conn syscall.Conn, timeout time.Duration, data [][]byte) error {
	crc, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("handoff: client socket: %w", err)
	}
	var serr error
	if err := crc.Control(func(fd uintptr) { serr = s.send(uc, uc, h, int(fd), timeout, data) }); err != nil {
		return fmt.Errorf("handoff: client socket: %w", err)
	}
	return serr
}

func (s *fdSender) control(fd uintptr) { s.step(fd) }

// step is one sendmsg; false on EAGAIN (under Write: wait in the poller
// and call again; under Control: s.err is EAGAIN).
func (s *fdSender) step(fd uintptr) bool {
	for {
		_, _, e := unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&s.mh)), unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			s.err = e
			return false
		case 0:
			s.err = nil
		default:
			s.err = e
		}
		return true
	}
}
