//go:build !linux

package handoff

import (
	"fmt"
	"net"
	"syscall"
	"time"
)

// ucSock is an FDClient's connected socket outside Linux: the net.UnixConn
// itself, in Go's poller (the Linux one keeps write space from waking the
// front: fdsock_linux.go).
type ucSock struct {
	uc *net.UnixConn
	rc syscall.RawConn
}

// newClientSock wraps uc; it closes uc on error.
func newClientSock(uc *net.UnixConn) (clientSock, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("handoff: socket: %w", err)
	}
	return &ucSock{uc: uc, rc: rc}, nil
}

func (s *ucSock) Control(f func(fd uintptr)) error    { return s.rc.Control(f) }
func (s *ucSock) Read(f func(fd uintptr) bool) error  { return s.rc.Read(f) }
func (s *ucSock) Write(f func(fd uintptr) bool) error { return s.rc.Write(f) }
func (s *ucSock) SetWriteDeadline(t time.Time) error  { return s.uc.SetWriteDeadline(t) }
func (s *ucSock) Close() error                        { return s.uc.Close() }
