package front

import (
	"net"

	"shoal/internal/base/httpwire"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/policy"
)

// DataPath moves one request to the node the policy chose (SPEC §4): Relay,
// Redirect, PassFD and Repair. The dispatch core (dispatch.go) routes the
// request, calls Serve on the client connection's goroutine and finishes the
// request; a path that can also move a bare descriptor (rawMover) serves the
// raw accept loop and returned connections too. A handoff path moves the
// socket with Exchange.Conn, Head and Buffered.
type DataPath interface {
	// Name is the path's short name for counters ("relay", "redirect").
	Name() string
	// Serve carries x to x.Backend and reports what happened. It runs on
	// the client connection's goroutine and owns the connection until it
	// returns.
	Serve(x *Exchange) Result
}

// Exchange is one request being moved: what the front read and what the
// policy decided. It is reused for the next request on the connection, so a
// DataPath must not keep it after Serve returns.
type Exchange struct {
	// Req is the parsed head; its slices alias the connection's buffer.
	Req *httpwire.Request
	// Head is the request head exactly as received.
	Head []byte
	// Decision is the policy's answer; Backend the chosen node.
	Decision policy.Decision
	Backend  *control.Backend
	// Policy is the request as the policy saw it.
	Policy *policy.Request
	// Attempt is 0 for the first node and 1 for the one retry.
	Attempt int

	cc *clientConn
}

// Conn returns the client connection.
func (x *Exchange) Conn() net.Conn { return x.cc.c }

// Buffered returns the client bytes read past the head and not yet
// consumed: the start of the body or pipelined requests. A handoff path
// sends Head followed by Buffered to the node.
func (x *Exchange) Buffered() []byte { return x.cc.in.bytes() }

// ConnID is the client connection's id (policy.Request.Conn).
func (x *Exchange) ConnID() uint64 { return x.cc.id }

// Result is a DataPath's report on one Exchange.
type Result struct {
	// Status is the status sent to the client (0 if nothing was sent).
	Status int
	// Close asks the front to close the client connection afterwards.
	Close bool
	// Detached means the path took the client connection over (a handoff):
	// the front forgets it without writing to or closing it.
	Detached bool
	// Retry means the node failed before sending any response byte, nothing
	// reached the client and the request was not consumed, so the front may
	// send it to another node (idempotent requests without a body only).
	Retry bool
	// NodeFailed marks a connect error or reset that says the node is
	// unhealthy (passive health check: control.Failed).
	NodeFailed bool
	// Err is the error behind a failure, for logs.
	Err error

	// fallback, set by a handoff path instead of an answer, says why it
	// could not move the request without loss; the dispatch core counts it
	// and relays (clientConn.dispatch).
	fallback fallbackReason
}

// Relay returns the relay data path: the front forwards the request over a
// pooled keep-alive connection and streams the response back.
func Relay() DataPath { return relayPath{} }

type relayPath struct{}

func (relayPath) Name() string             { return "relay" }
func (relayPath) Serve(x *Exchange) Result { return x.cc.relay(x) }

// Redirect returns the redirect data path: a 302 to the node's own URL with
// the request's path and query, the classic baseline the seeds criticise
// (the client pays a second round trip) and useful across CDN PoPs.
func Redirect() DataPath { return redirectPath{} }

type redirectPath struct{}

func (redirectPath) Name() string             { return "redirect" }
func (redirectPath) Serve(x *Exchange) Result { return x.cc.redirect(x) }
