package node

import (
	"net"
	"time"

	"shoal/internal/base/httpcache"
	"shoal/internal/base/httpwire"
)

// LocalResult is what ServeLocal did. Handled false: nothing was written.
// Otherwise Status is the status sent, Size the stored body's size, Body
// the body bytes and Sent all bytes written, Keep whether the connection
// may carry another request, and Err a write error.
type LocalResult struct {
	Handled bool
	Status  int
	Size    int64
	Body    int64
	Sent    int64
	Keep    bool
	Err     error
}

// ServeLocal answers a request that a front in this process read from nc
// and parsed (req), on nc itself, when this node can do so at once: a
// fresh hit in cache mode, plain enough for edgeFastHit (GET or HEAD
// without a body, no caching fields) and hit before. This is seed 003
// §3.3's gateway handing a request to the device that holds the content,
// which answers the client: the front writes nothing to the node's socket
// and reads nothing back, and the request is parsed once.
//
// Anything else (a miss, a stale response, a site-mode node) is declined
// with nothing written and nothing counted, and the front sends the
// request over the node's socket as before. The decision is made on the
// decoded entry before the store is asked, so a declined request does not
// count a store hit twice. now is when the head was read; closeAfter says
// the connection closes after the answer; writeTimeout is renewed while a
// large body is sent. req's slices are only read during the call.
func (s *Server) ServeLocal(nc net.Conn, req *httpwire.Request, now time.Time, closeAfter bool, writeTimeout time.Duration) LocalResult {
	e := s.edge
	if e == nil {
		return LocalResult{}
	}
	c, _ := e.local.Get().(*conn)
	if c == nil {
		c = &conn{connFields: connFields{s: s, out: make([]byte, 0, 4096), handHint: -1, hint: -1}}
	}
	c.nc, c.req, c.wto = nc, *req, writeTimeout
	res := c.serveLocal(now, closeAfter || s.draining.Load())
	c.nc, c.req, c.wto, c.host, c.trusted = nil, httpwire.Request{}, 0, "", false
	c.out, c.logLine = c.out[:0], c.logLine[:0]
	if cap(c.out) <= 64<<10 {
		e.local.Put(c)
	}
	return res
}

func (c *conn) serveLocal(now time.Time, closeAfter bool) LocalResult {
	s, e := c.s, c.s.edge
	if p := bstr(c.req.Path()); len(p) >= len(internalPrefix) && p[:len(internalPrefix)] == internalPrefix {
		return LocalResult{}
	}
	rq, de, ok := c.edgeFastFind()
	if !ok {
		return LocalResult{}
	}
	d := httpcache.Decide(rq, de.cr.Stored, now)
	if d.Action != httpcache.Serve {
		return LocalResult{}
	}
	hd, ok := e.store.Get(de.key)
	if !ok {
		return LocalResult{}
	}
	if !sameMeta(hd.Meta(), de.meta) {
		hd.Release() // changed since it was decoded: the socket path decodes it
		return LocalResult{}
	}
	if s.logBuf != nil {
		if a, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
			c.host = a.IP.String()
		}
	}
	size := hd.Size()
	body := size
	if rq == &e.plainHead || noBody(de.cr.Status) {
		body = 0
	}
	keep := c.edgeWriteHit(rq, de.key, de.cr, &hd, d, now, closeAfter)
	err := c.flush()
	res := LocalResult{Handled: true, Status: de.cr.Status, Size: size, Body: body, Sent: c.nbytes, Keep: keep && err == nil, Err: err}
	s.requests.Add(1)
	s.bytesSent.Add(c.nbytes)
	c.nbytes = 0
	if len(c.logLine) > 0 {
		s.writeLog(c.logLine)
	}
	return res
}
