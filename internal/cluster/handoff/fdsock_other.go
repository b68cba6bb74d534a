//go:build !linux

package handoff

import (
	"errors"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fdSock is an FDClient's connected SOCK_SEQPACKET socket. Outside Linux it
// is the net.UnixConn itself, in Go's poller (the Linux one keeps write
// space from waking the front: fdsock_linux.go).
type fdSock struct{ uc *net.UnixConn }

func newFDSock(uc *net.UnixConn) (*fdSock, error) { return &fdSock{uc: uc}, nil }

// send writes one record; wait 0 never waits (ErrWouldBlock on a full
// socket), otherwise it waits up to wait for room.
func (s *fdSock) send(msg, oob []byte, wait time.Duration) error {
	if wait > 0 {
		s.uc.SetWriteDeadline(time.Now().Add(wait))
		_, _, err := s.uc.WriteMsgUnix(msg, oob, nil)
		return err
	}
	rc, err := s.uc.SyscallConn()
	if err != nil {
		return err
	}
	iov := unix.Iovec{Base: &msg[0]}
	iov.SetLen(len(msg))
	mh := unix.Msghdr{Iov: &iov}
	mh.SetIovlen(1)
	if len(oob) > 0 {
		mh.Control = &oob[0]
		mh.SetControllen(len(oob))
	}
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		_, _, e := unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&mh)), unix.MSG_DONTWAIT)
		if e != 0 {
			serr = e
		}
	})
	if cerr != nil {
		return cerr
	}
	if errors.Is(serr, unix.EAGAIN) {
		return ErrWouldBlock
	}
	return serr
}

// recv reads one record into buf and its control data into oob.
func (s *fdSock) recv(buf, oob []byte) (n, oobn, flags int, err error) {
	n, oobn, flags, _, err = s.uc.ReadMsgUnix(buf, oob)
	return n, oobn, flags, err
}

func (s *fdSock) close() error { return s.uc.Close() }
