//go:build !linux

package handoff

import (
	"fmt"
	"net"
)

// dialTrusted trusts no socket outside Linux (there is no SO_PEERCRED), so
// a front configured with a SocketTrust relays.
func dialTrusted(path string, t SocketTrust) (*net.UnixConn, error) {
	return nil, fmt.Errorf("%w: %s: peer credentials are only checked on Linux", ErrSocketPeer, path)
}

// sameUser cannot check peer credentials outside Linux: it trusts the
// socket file's mode (0600).
func sameUser(*net.UnixConn) bool { return true }
