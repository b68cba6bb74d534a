package handoff

import (
	"errors"
	"fmt"
)

// SocketTrust says which handoff sockets a front may pass live client
// connections to. A node reports its socket's path in its status, and nodes
// can be added at run time, so the path alone proves nothing: a front
// running as root would otherwise hand client sockets (and the bytes already
// read from them) to whatever process listens there. A socket is trusted
// when its path lies inside Dir without any symbolic link or ".." on the way,
// and the process that listens on it runs as UID (SO_PEERCRED, unix(7)).
type SocketTrust struct {
	// Dir is the folder handoff sockets must be in (at any depth). It is
	// taken as configured, symbolic links in it included; below it no
	// component may be a symbolic link.
	Dir string
	// UID is the user the listening process must run as.
	UID int
}

// ErrUntrusted is wrapped by every refusal of SocketTrust; the errors
// below say why (use errors.Is).
var ErrUntrusted = errors.New("handoff: untrusted handoff socket")

// Reasons a socket is refused; each wraps ErrUntrusted.
var (
	// ErrSocketOutsideDir: the path is relative, holds "..", lies outside
	// Dir, goes through a symbolic link below Dir, or does not name a
	// socket.
	ErrSocketOutsideDir = fmt.Errorf("%w: not a socket inside the handoff directory", ErrUntrusted)
	// ErrSocketPeer: the process listening on the socket runs as another
	// user than SocketTrust.UID.
	ErrSocketPeer = fmt.Errorf("%w: listener runs as another user", ErrUntrusted)
)
