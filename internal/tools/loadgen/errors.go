package loadgen

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// ErrorKind classifies a failed request so that a report says *why* a server
// misbehaved, not only how often (SPEC §7: honest numbers).
type ErrorKind int

// The error kinds, in report order.
const (
	// ErrConnect: the TCP connection could not be established.
	ErrConnect ErrorKind = iota
	// ErrTimeout: no complete response within Config.Timeout.
	ErrTimeout
	// ErrReset: the peer reset the connection, or closed it before
	// sending any byte of the response.
	ErrReset
	// ErrStatus4xx: a complete response with a 4xx status.
	ErrStatus4xx
	// ErrStatus5xx: a complete response with a 5xx status.
	ErrStatus5xx
	// ErrShortBody: the connection ended inside the body (fewer bytes than
	// Content-Length, or an unfinished chunked body).
	ErrShortBody
	// ErrProtocol: the response was not valid HTTP/1.x.
	ErrProtocol
	// ErrOther: any other I/O error.
	ErrOther
	// NumErrorKinds is the number of kinds (for arrays indexed by kind).
	NumErrorKinds
)

var kindNames = [NumErrorKinds]string{"connect", "timeout", "reset", "status_4xx", "status_5xx", "short_body", "protocol", "other"}

// String is the kind's name as used in reports and JSON ("status_5xx", …).
func (k ErrorKind) String() string {
	if k < 0 || k >= NumErrorKinds {
		return "unknown"
	}
	return kindNames[k]
}

// classify maps a request's I/O or parse error to its kind. Dial errors are
// classified by the caller (always ErrConnect).
func classify(err error) ErrorKind {
	var ne net.Error
	switch {
	case errors.Is(err, errProtocol):
		return ErrProtocol
	case errors.Is(err, errShortBody):
		return ErrShortBody
	case errors.Is(err, errPeerClosed),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return ErrReset
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ErrTimeout
	}
	return ErrOther
}
