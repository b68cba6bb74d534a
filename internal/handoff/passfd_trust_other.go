//go:build !linux

package handoff

import (
	"errors"
	"fmt"
	"net"
)

// SocketTrust: see passfd_trust.go. Outside Linux no socket is trusted
// (there is no SO_PEERCRED), so a front configured with one relays.
type SocketTrust struct {
	Dir string
	UID int
}

// ErrUntrusted is wrapped by every refusal of SocketTrust.
var ErrUntrusted = errors.New("handoff: untrusted handoff socket")

// Reasons a socket is refused; each wraps ErrUntrusted.
var (
	ErrSocketOutsideDir = fmt.Errorf("%w: not a socket inside the handoff directory", ErrUntrusted)
	ErrSocketPeer       = fmt.Errorf("%w: listener runs as another user", ErrUntrusted)
)

func dialTrusted(path string, t SocketTrust) (*net.UnixConn, error) {
	return nil, fmt.Errorf("%w: %s: peer credentials are only checked on Linux", ErrSocketPeer, path)
}
