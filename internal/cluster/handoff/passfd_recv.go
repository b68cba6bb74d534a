package handoff

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fdReader reads messages from one handoff socket with recvmsg(2) called
// directly in the socket's RawConn. net.UnixConn.ReadMsgUnix allocates the
// sender's address, and x/sys/unix's control-message parsing allocates the
// messages and the descriptor list, about seven allocations per message;
// a node in tag mode reads a move, an acknowledgement and notes per moved
// request. The RawConn, its read step and the control buffer are made once
// per socket, so a read allocates nothing. One goroutine reads at a time.
type fdReader struct {
	rc   syscall.RawConn
	step func(fd uintptr) bool
	buf  []byte
	oob  [64]byte
	n    int
	oobn int
	flag int
	err  error
	// nowait makes the step answer errNoMessage instead of waiting.
	nowait bool
}

// errNoMessage is tryRecv's answer when the socket is empty.
var errNoMessage = errors.New("handoff: no message queued")

// newFDReader binds a reader to uc.
func newFDReader(uc *net.UnixConn) (*fdReader, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("handoff: handoff socket: %w", err)
	}
	return newSockReader(rc), nil
}

// newSockReader binds a reader to a socket's RawConn.
func newSockReader(rc syscall.RawConn) *fdReader {
	r := &fdReader{rc: rc}
	r.step = r.recvStep
	return r
}

// recvStep is the RawConn read step: one recvmsg, false while the socket
// is empty (the runtime waits in the poller and calls again).
func (r *fdReader) recvStep(fd uintptr) bool {
	var iov unix.Iovec
	iov.Base = unsafe.SliceData(r.buf)
	iov.SetLen(len(r.buf))
	oob := r.oob[:fdOOBSize]
	var msg unix.Msghdr
	msg.Iov, msg.Iovlen = &iov, 1
	msg.Control = &oob[0]
	msg.SetControllen(len(oob))
	for {
		n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&msg)), recvFlags)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if r.nowait {
				r.n, r.oobn, r.flag, r.err = 0, 0, 0, errNoMessage
				return true
			}
			return false
		case 0:
			r.n, r.oobn, r.flag, r.err = int(n), int(msg.Controllen), int(msg.Flags), nil
		default:
			r.n, r.oobn, r.flag, r.err = 0, 0, 0, e
		}
		return true
	}
}

// recv reads one message into buf, as RecvRawFD does.
func (r *fdReader) recv(buf []byte) (FDMessage, error) {
	r.buf = buf
	err := r.rc.Read(r.step)
	r.buf = nil
	if err == nil {
		err = r.err
	}
	var fdArr [4]int
	fds := fdArr[:0]
	if err == nil && r.oobn > 0 {
		fds = appendRightsFDs(fds, r.oob[:r.oobn])
	}
	return parseRecv(buf, r.n, r.oobn, r.flag, fds, err)
}

// tryRecv is recv that does not wait: errNoMessage when nothing is queued.
func (r *fdReader) tryRecv(buf []byte) (FDMessage, error) {
	r.nowait = true
	m, err := r.recv(buf)
	r.nowait = false
	return m, err
}

// appendRightsFDs appends every descriptor of oob's SCM_RIGHTS messages to
// fds (the kernel's layout: cmsghdr, then data, each aligned as
// unix.CmsgSpace aligns them).
func appendRightsFDs(fds []int, oob []byte) []int {
	hl := unix.CmsgLen(0)
	for len(oob) >= hl {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hl || l > len(oob) {
			break
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_RIGHTS {
			for d := oob[hl:l]; len(d) >= 4; d = d[4:] {
				fds = append(fds, int(int32(binary.NativeEndian.Uint32(d))))
			}
		}
		sp := unix.CmsgSpace(l - hl)
		if sp >= len(oob) {
			break
		}
		oob = oob[sp:]
	}
	return fds
}
