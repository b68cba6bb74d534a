package node

import (
	"errors"
	"net"
	"strings"

	"shoal/internal/base/content"
)

// Handed is a client connection that the front-end handed off to this node
// (SPEC §4 "handoff, same host"): handoff.FDConn implements it. A Server
// serving a listener that yields Handed connections (handoff.ListenFD)
// unwraps them, so responses go out on the client's own *net.TCPConn
// (sendfile and writev included), and starts from the bytes the front had
// already read.
type Handed interface {
	net.Conn
	// NetConn is the client connection itself.
	NetConn() net.Conn
	// Preread is what the front read before handing off: the request head
	// and any pipelined bytes after it.
	Preread() []byte
	// OneRequest asks the node to serve only the first request and then
	// hand the connection back for re-dispatch (content-aware policies).
	OneRequest() bool
	// HandBack returns the connection to the front with the client bytes
	// read since; on success the node closes its copy and forgets it.
	HandBack(rest []byte) error
	// Ended tells the front that a OneRequest connection ended here.
	Ended()
}

// TagRouted is a Handed connection in tag mode (handoff.FDConn with
// handoff.FDFlagTag): the node routes each later request on it by the
// table the front shares (seed 000 §2.2.2, done by the nodes): it serves
// the request, moves the connection to the node the table names, or, when
// the table cannot tell, hands it back to the front.
type TagRouted interface {
	// TagMode reports whether the connection is in tag mode.
	TagMode() bool
	// Self is this node's index in the front's cluster.
	Self() int
	// Route is the node the table names for a content key, Self() for
	// this one, -1 when the front must be asked.
	Route(key string) int
	// Served tells the front this node served a request for key by the
	// table.
	Served(key string)
	// MoveTo moves the connection, with rest, to node; on success the
	// node closes its copy and forgets it. key is kept until node
	// acknowledges the move (the front's note names it), so it must not
	// alias the connection's buffers.
	MoveTo(node int, key string, rest []byte) error
}

// releaser is a Handed connection the node gives back for reuse when it is
// done with it (handoff.FDConn.Release), so a received connection's wrapper
// is not garbage after one request.
type releaser interface{ Release() }

// handback is the handoff state of one connection.
type handback struct {
	h        Handed
	oneShot  bool // serve one request, then hand back
	served   bool // that request has been answered
	returned bool // handed back or moved: someone else owns it now
	// tag is the connection's tag routing (nil outside tag mode); fresh:
	// its next request was routed here by the front or another node, so it
	// is served without looking it up.
	tag   TagRouted
	fresh bool
}

// errHandedBack ends a connection's serve loop after a successful hand-back.
var errHandedBack = errors.New("node: connection handed back to the front")

// ServeConn serves a connection this server did not accept — one handed
// over by another process — starting with preread, the bytes already read
// from it. It blocks until the connection ends and returns ErrServerClosed
// if the server is shutting down (the connection is then closed).
func (s *Server) ServeConn(nc net.Conn, preread []byte) error {
	c := newConn(s, nc)
	c.operator, c.front = false, false // a public client's connection, whatever its type
	c.setPreread(preread)
	if err := s.track(c); err != nil {
		c.nc.Close()
		return err
	}
	c.serve()
	return nil
}

// setPreread places b at the start of the read buffer, to be returned by
// the first read.
func (c *conn) setPreread(b []byte) {
	if need := len(b) + 1024; need > len(c.buf) {
		if need <= c.fullIn() {
			c.growIn()
		} else {
			c.buf = make([]byte, len(b)+4096)
		}
	}
	c.pre = copy(c.buf[c.w:], b)
}

// adoptHandoff unwraps a Handed connection: the conn serves the client
// socket itself and starts with the front's bytes.
func (c *conn) adoptHandoff() {
	h, ok := c.nc.(Handed)
	if !ok {
		return
	}
	c.nc = h.NetConn()
	c.rio.Bind(c.nc)
	c.setPreread(h.Preread())
	c.hbv = handback{h: h, oneShot: h.OneRequest()}
	c.hb = &c.hbv
	if t, ok := h.(TagRouted); ok && t.TagMode() {
		c.hb.tag, c.hb.fresh = t, true
	}
}

// tagAway routes the request just parsed (c.req, whose bytes start at c.r)
// on a tag-mode connection and reports whether the connection left this
// node: moved to the node the table names, or handed back to the front when
// the table cannot tell. The answers to earlier requests of a pipelined
// batch are written first, so the next node's answer follows them on the
// socket. Requests with a body and methods other than GET and HEAD stay
// (the node answers them itself); so does a request whose move and hand-back
// both fail.
func (c *conn) tagAway() bool {
	hb := c.hb
	if hb == nil || hb.tag == nil || hb.returned {
		return false
	}
	if hb.fresh {
		hb.fresh = false
		return false
	}
	req := &c.req
	if req.HasBody() || !req.IsMethod("GET") && !req.IsMethod("HEAD") {
		return false
	}
	key := bstr(req.Path())
	if k, ok := content.ObjectKey(key); ok {
		key = k
	}
	if key == "/.shoal" || strings.HasPrefix(key, "/.shoal/") {
		return false
	}
	to := hb.tag.Route(key)
	if to == hb.tag.Self() {
		hb.tag.Served(key)
		return false
	}
	if c.flush() != nil {
		return false // the client is gone; handle finds out
	}
	rest := c.buf[c.r:c.w]
	// key views c.buf (bstr), which goes back to the pool when the
	// connection leaves, while the move keeps key until it is acknowledged:
	// it gets its own copy, or the front's note names whatever URL the
	// buffer's next connection parsed there.
	if to >= 0 && hb.tag.MoveTo(to, strings.Clone(key), rest) == nil {
		hb.returned = true
		return true
	}
	if hb.h.HandBack(rest) == nil {
		hb.returned = true
		return true
	}
	hb.tag.Served(key)
	return false
}

// read is the serve loop's read: preread bytes first; then, for a
// connection to hand back after its one request, the next request's first
// bytes are read and the connection goes back to the front with everything
// unprocessed (errHandedBack). If the hand-back fails the node keeps the
// connection and serves it itself.
func (c *conn) read() (int, error) {
	if c.pre > 0 {
		n := c.pre
		c.pre = 0
		return n, nil
	}
	c.fitIn()
	hb := c.hb
	if hb == nil || !hb.oneShot || !hb.served {
		return c.readIn()
	}
	if c.r == c.w {
		n, err := c.readIn()
		if n <= 0 {
			return n, err
		}
		c.w += n
	}
	if hb.h.HandBack(c.buf[c.r:c.w]) == nil {
		hb.returned = true
		return 0, errHandedBack
	}
	hb.oneShot = false
	n := c.w - c.r
	c.w = c.r
	return n, nil
}

// readIn reads into the free part of the read buffer once and notes
// whether it filled it (a burst: the next read gets a full-size buffer).
func (c *conn) readIn() (int, error) {
	p := c.buf[c.w:]
	n, err := c.readNC(p)
	c.burst = n == len(p)
	return n, err
}

// readNC reads from the client once: raw when nc is a plain TCP
// connection (internal/base/rawio), through net.Conn otherwise.
func (c *conn) readNC(p []byte) (int, error) {
	if c.rio.Active() {
		return c.rio.Read(p)
	}
	return c.nc.Read(p)
}

// oneServed records an answered request and reports whether the batch
// must stop here because the connection goes back to the front.
func (c *conn) oneServed() bool {
	if c.hb == nil || !c.hb.oneShot {
		return false
	}
	c.hb.served = true
	return true
}

// endHandoff tells the front that a connection it expects back ended here.
func (c *conn) endHandoff() {
	if c.hb != nil && !c.hb.returned {
		c.hb.h.Ended()
	}
}

// releaseHandoff recycles the Handed wrapper once the connection is closed
// (or gone to another owner).
func (c *conn) releaseHandoff() {
	if c.hb == nil {
		return
	}
	if r, ok := c.hb.h.(releaser); ok {
		c.hb.h = nil
		r.Release()
	}
}
