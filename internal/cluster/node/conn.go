package node

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"shoal/internal/base/cache"
	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/rawio"
	"shoal/internal/base/store"
	"shoal/internal/base/trace"
	"shoal/internal/cluster/peer"
)

// Connection states, for the sweeper and Shutdown.
const (
	stIdle    int32 = iota // waiting for a request, nothing buffered
	stReading              // part of a request head is buffered
	stActive               // handling requests or writing responses
	stClosed               // closed by the sweeper or Shutdown
)

const (
	// inlineBody is the largest cached body copied into the output buffer;
	// larger bodies go out by writev without a copy.
	inlineBody = 16 << 10
	// flushAt bounds the output buffered for a pipelined batch.
	flushAt = 64 << 10
	// statusPath answers with the node's status JSON, on operator
	// connections only (conn.operator). Dot-names are never in the content
	// table, so it cannot shadow a file, and elsewhere it is a 404.
	statusPath = "/.shoal/status"
)

var (
	crlf                = []byte("\r\n")
	connectionClose     = []byte("Connection: close\r\n")
	connectionKeepAlive = []byte("Connection: keep-alive\r\n")
)

// freeList is a bounded stack of things kept for reuse (ended conns, grown
// output buffers, full-size read buffers). A plain list rather than a
// sync.Pool: the collector empties a pool at every cycle, which made a node
// under tbccrd in passfd tag mode, where nearly every request arrives on a
// connection another node just moved here, allocate a read buffer and grow
// an output buffer per moved connection (docs/benchmarks.md, "Receiving a
// handed connection"). The bound keeps what an idle node holds small.
type freeList[T any] struct {
	mu   sync.Mutex
	list []T
}

// get takes a kept item, or the zero T when there is none.
func (f *freeList[T]) get() T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	n := len(f.list)
	if n == 0 {
		return zero
	}
	x := f.list[n-1]
	f.list[n-1] = zero
	f.list = f.list[:n-1]
	return x
}

// put keeps x, unless max are kept already.
func (f *freeList[T]) put(x T, max int) {
	f.mu.Lock()
	if len(f.list) < max {
		f.list = append(f.list, x)
	}
	f.mu.Unlock()
}

const (
	// maxFreeConns bounds Server.freeConns, the ended conns kept with
	// their buffers (ownIn of read buffer and ownOut of output each):
	// about the connections one node serves at once under a front's usual
	// concurrency.
	maxFreeConns = 32
	// ownOut is the output buffer a conn keeps for itself (a response
	// head, a small body). A batch that needs more (pipelined answers grow
	// their buffer to flushAt and past it) borrows one from
	// Server.outBufs and gives it back once out: kept by every open
	// connection, such buffers were a third of a node's live heap under
	// the NASA trace (0.8–1.3 MiB of 2.5–3.3; docs/benchmarks.md), memory
	// its store could hold bodies in; lent, they number about the conns
	// being answered at once.
	ownOut = 4 << 10
	// maxOutBufs bounds the grown output buffers kept for lending, and
	// maxLentOut the size of one kept (larger ones go to the collector).
	maxOutBufs = 4
	maxLentOut = 256 << 10
	// ownIn is the read buffer a conn keeps for itself: a request head or
	// a few pipelined ones. A head that does not fit, or a burst that
	// filled it (a front's pipelined batch), gets a full-size buffer
	// (Config.MaxHead and 4 KiB) lent by Server.inBufs until every byte in
	// it is parsed, so the 20–28 connections a node holds open under a
	// front keep 4 KiB each instead of 13 (docs/benchmarks.md).
	ownIn = 4 << 10
	// maxInBufs bounds the full-size read buffers kept for lending.
	maxInBufs = 4
)

// conn is one client connection, served by one goroutine. A conn is
// recycled through Server.freeConns when its connection ends (newConn,
// release): under tbccrd in passfd tag mode nearly every request arrives on
// a connection another node just moved here, so a conn, its buffers,
// header slice and raw I/O steps would otherwise be garbage after one
// request (freeConns). The
// sweeper's atomics stay outside connFields, so newConn can reset the
// rest in one assignment.
type conn struct {
	connFields
	state atomic.Int32
	since atomic.Int64 // unix ns when the current state began
}

// connFields is a conn's state but the sweeper's atomics.
type connFields struct {
	s    *Server
	nc   net.Conn
	host string // client address for the access log
	// trusted: the peer is a front in Config.TrustedFronts, whose
	// X-Forwarded-For names the client for the access log.
	trusted bool

	buf   []byte // read buffer, own or lent by Server.inBufs; requests are parsed in place
	r, w  int    // unparsed bytes are buf[r:w]
	ownIn []byte // the conn's own small read buffer (ownIn)
	burst bool   // the last read filled the space it had: more is likely waiting
	req   httpwire.Request
	cond  condFields // preconditions and Accept-Encoding of req (precond.go)

	site    *vsite          // the site of the current request (vhosts.go)
	hostBuf []byte          // its normalized host name
	spans   []httpwire.Span // ranges of the current request (ranges.go)
	scratch []byte          // names and keys built per request without allocating
	lastMod [29]byte        // Last-Modified of a response no prebuilt object carries

	out      []byte        // response bytes for the current batch: own, or lent by Server.outBufs
	own      []byte        // the conn's own small output buffer (ownOut)
	rio      rawio.Conn    // raw reads and writes when nc is a plain TCP connection
	bufs     net.Buffers   // segments for writev when large bodies are not copied
	wbufs    net.Buffers   // scratch that WriteTo consumes
	segStart int           // start of out not yet referenced by bufs
	rep      reply         // the file response being put together (serve.go)
	spare    *object       // a miss's object the store did not keep, rebuilt by the next miss
	snd      *store.Sender // sends store bodies to nc, made on first use
	logLine  []byte

	nreq, nbytes int64 // batch counters, added to the server's per batch
	served       cache.Served

	pre int       // bytes at buf[w:] handed over with the connection, read first
	hb  *handback // non-nil for a connection handed off by the front (handoff.go)
	hbv handback  // what hb points to, kept with the conn
	// operator: the connection was accepted on the node's own TCP port,
	// where the front's health checker and the operator come, so
	// /.shoal/status is answered. Connections handed over by a front
	// (passfd, repair, ServeConn) belong to public clients: never.
	operator bool
	// front: the peer is a front in Config.TrustedFronts (operator
	// connections only, peer fetch on), whose FetchHeader is believed;
	// hint is the current request's fetch decision from the handoff
	// message, handHint that field until the first request takes it
	// (peer.go). peerUp: the connection was upgraded to the peer protocol.
	front          bool
	hint, handHint int
	peerUp         bool
	// wto, on a connection a front in this process lent for one answer
	// (ServeLocal), is the write timeout renewed while a body is sent.
	wto time.Duration
}

func newConn(s *Server, nc net.Conn) *conn {
	c := s.freeConns.get()
	if c == nil {
		c = &conn{}
	}
	in, out := c.ownIn, c.own[:0]
	if in == nil {
		in = make([]byte, ownIn)
	}
	if out == nil {
		out = make([]byte, 0, ownOut)
	}
	// Keep what only grows (buffers, header slice, scratch, raw I/O steps
	// bound to c.rio); everything else starts from zero.
	c.connFields = connFields{
		s:     s,
		nc:    nc,
		buf:   in,
		ownIn: in,
		out:   out,
		own:   out,
		req:   httpwire.Request{Headers: c.req.Headers[:0]},

		hostBuf: c.hostBuf[:0], spans: c.spans[:0], scratch: c.scratch[:0],
		bufs: c.bufs[:0], logLine: c.logLine[:0], rio: c.rio,
		handHint: -1,
	}
	c.state.Store(stIdle)
	c.rio.Bind(nc)
	_, c.operator = nc.(*net.TCPConn)
	c.front = c.operator && s.peer != nil && s.trustedPeer(nc)
	if f, ok := nc.(interface{ FetchHint() int }); ok {
		c.handHint = f.FetchHint() // passfd's FDConn, repair's moved connection
	}
	c.adoptHandoff()
	if s.logBuf != nil {
		if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
			c.host = a.IP.String()
		} else {
			c.host = nc.RemoteAddr().String()
		}
		c.trusted = s.trustedPeer(nc)
	}
	c.since.Store(time.Now().UnixNano())
	return c
}

// release returns c, untracked and done with, to the server's free list
// with its buffers. The references it holds are dropped now, so a freed
// conn keeps no connection, site or handoff state alive.
func (c *conn) release() {
	s := c.s
	c.rio.Unbind()
	clear(c.req.Headers[:cap(c.req.Headers)])
	clear(c.bufs[:cap(c.bufs)])
	c.returnOut()
	c.returnIn()
	c.connFields = connFields{
		ownIn: c.ownIn, own: c.own[:0],
		req:     httpwire.Request{Headers: c.req.Headers[:0]},
		hostBuf: c.hostBuf[:0], spans: c.spans[:0], scratch: c.scratch[:0],
		bufs: c.bufs[:0], logLine: c.logLine[:0], rio: c.rio,
	}
	if cap(c.scratch) <= 64<<10 && cap(c.logLine) <= 64<<10 {
		s.freeConns.put(c, maxFreeConns)
	}
}

// checkTimeout is called by the sweeper: it closes the connection if its
// current state has lasted longer than that state's limit.
func (c *conn) checkTimeout(now int64) {
	st := c.state.Load()
	var limit time.Duration
	switch st {
	case stIdle:
		limit = c.s.cfg.IdleTimeout
	case stReading:
		limit = c.s.cfg.ReadTimeout
	case stActive:
		limit = c.s.cfg.WriteTimeout
	default:
		return
	}
	if now-c.since.Load() > int64(limit) && c.state.CompareAndSwap(st, stClosed) {
		c.nc.Close()
	}
}

// closeIfIdle closes the connection unless a response is being produced:
// at Shutdown, a client that has sent nothing or only part of a head has no
// response in flight.
func (c *conn) closeIfIdle() {
	if c.state.CompareAndSwap(stIdle, stClosed) || c.state.CompareAndSwap(stReading, stClosed) {
		c.nc.Close()
	}
}

func (c *conn) forceClose() {
	c.state.Store(stClosed)
	c.nc.Close()
}

func (c *conn) serve() {
	defer func() {
		c.endHandoff()
		if c.peerUp {
			c.s.untrack(c)
			c.servePeer()
		} else {
			c.nc.Close()
			c.s.untrack(c)
			c.releaseHandoff()
		}
		if c.peerUp {
			c.buf, c.out = nil, nil // the peer protocol goes on with the conn
		} else {
			c.release()
		}
	}()
	st := stIdle // the zero state; Shutdown may already have closed it
	headStart := c.since.Load()
	for {
		if c.s.draining.Load() && c.r == c.w {
			return
		}
		n, err := c.read()
		if n <= 0 {
			return
		}
		c.w += n
		if !c.state.CompareAndSwap(st, stActive) {
			return // closed by the sweeper or Shutdown
		}
		now := time.Now()
		c.since.Store(now.UnixNano())
		c.s.inService.Add(1)
		keep := c.process(now)
		c.s.inService.Add(-1)
		c.s.busy.Add(int64(time.Since(now)))
		if !keep || err != nil {
			return
		}
		next := stIdle
		if c.r < c.w {
			next = stReading
		}
		if st != stReading || next != stReading {
			headStart = now.UnixNano()
		}
		// A head that stays partial keeps the time it started, so a
		// client trickling bytes is cut at ReadTimeout.
		c.since.Store(headStart)
		if !c.state.CompareAndSwap(stActive, next) {
			return
		}
		st = next
	}
}

// process answers every complete request in the buffer, then flushes. It
// reports whether the connection stays open.
func (c *conn) process(now time.Time) bool {
	keep := true
	if cap(c.out) <= ownOut && c.r < c.w {
		if b := c.s.outBufs.get(); b != nil {
			c.out = b[:0]
		}
	}
	for c.r < c.w && keep {
		n, err := c.s.parser.Parse(c.buf[c.r:c.w], &c.req)
		if err == httpwire.ErrNeedMore {
			break
		}
		if err != nil {
			status, reason := 400, "malformed request"
			var e *httpwire.Error
			if errors.As(err, &e) {
				status, reason = e.Status, e.Reason
			}
			c.simple(status, "", now, true, false, reason)
			keep = false
			break
		}
		if c.tagAway() {
			keep = false // moved on (handoff.go)
			break
		}
		c.r += n
		keep = c.handle(now)
		if c.oneServed() {
			break // the rest goes back to the front (handoff.go)
		}
		if len(c.out) >= flushAt || len(c.bufs) >= 64 {
			if c.flush() != nil {
				keep = false
			}
		}
	}
	if c.r == c.w {
		c.r, c.w = 0, 0
	} else if c.r > 0 {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	if c.flush() != nil {
		keep = false
	}
	if c.nreq > 0 {
		c.s.requests.Add(c.nreq)
		c.nreq = 0
	}
	if c.nbytes > 0 {
		c.s.bytesSent.Add(c.nbytes)
		c.nbytes = 0
	}
	if c.served.ObjectBytes > 0 {
		c.s.objectBytes.Add(c.served.ObjectBytes)
		c.s.memoryBytes.Add(c.served.MemoryBytes)
		c.served = cache.Served{}
	}
	if len(c.logLine) > 0 {
		c.s.writeLog(c.logLine)
		c.logLine = c.logLine[:0]
	}
	c.returnOut()
	return keep
}

// returnOut gives a grown output buffer (lent, or grown from the conn's
// own) to the server's outBufs once its batch is out, and takes the conn's
// own buffer back.
func (c *conn) returnOut() {
	if cap(c.out) > ownOut && len(c.out) == 0 && len(c.bufs) == 0 {
		if cap(c.out) <= maxLentOut {
			c.s.outBufs.put(c.out, maxOutBufs)
		}
		c.out = c.own[:0]
	}
}

// fullIn is the size of a full read buffer: the largest head the parser
// takes and room for the next request's first bytes.
func (c *conn) fullIn() int { return c.s.cfg.MaxHead + 4096 }

// fitIn readies the read buffer for the next read: a full-size one when
// the last read filled the space it had or an unfinished head fills the
// buffer, else the conn's own once every byte in a larger one is parsed.
func (c *conn) fitIn() {
	if len(c.buf) < c.fullIn() && (c.burst || c.w == len(c.buf)) {
		c.growIn()
		return
	}
	if !c.burst && c.r == c.w {
		c.returnIn()
	}
}

// growIn moves the unparsed bytes into a full-size read buffer, lent by
// Server.inBufs when it keeps one.
func (c *conn) growIn() {
	b := c.s.inBufs.get()
	if b == nil {
		b = make([]byte, c.fullIn())
	}
	c.w = copy(b, c.buf[c.r:c.w])
	c.r, c.buf = 0, b
}

// returnIn takes the conn's own read buffer back (empty) and gives a lent
// full-size one to Server.inBufs; a larger one (a big pre-read) goes to
// the collector.
func (c *conn) returnIn() {
	if len(c.buf) <= len(c.ownIn) {
		return
	}
	if len(c.buf) == c.fullIn() {
		c.s.inBufs.put(c.buf, maxInBufs)
	}
	c.buf, c.r, c.w = c.ownIn, 0, 0
}

// flush writes the batch: one write(2) when everything is in out, one
// writev(2) when large cached bodies are referenced in place.
func (c *conn) flush() error {
	var n int64
	var err error
	if len(c.bufs) == 0 {
		if len(c.out) == 0 {
			return nil
		}
		var m int
		if c.rio.Active() {
			m, err = c.rio.Write(c.out, nil)
		} else {
			m, err = c.nc.Write(c.out)
		}
		n = int64(m)
	} else {
		if c.segStart < len(c.out) {
			c.bufs = append(c.bufs, c.out[c.segStart:])
		}
		c.wbufs = c.bufs
		if c.rio.Active() {
			n, err = c.rio.WriteBuffers(&c.wbufs)
		} else {
			n, err = c.wbufs.WriteTo(c.nc)
		}
		clear(c.bufs)
		c.bufs = c.bufs[:0]
		c.wbufs = nil
	}
	c.nbytes += n
	c.out = c.out[:0]
	c.segStart = 0
	return err
}

// bstr views b as a string without copying. Only for calls that do not keep
// the string (map lookups, AppendCLF, comparisons).
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// handle appends the response to the current request and reports whether
// the connection stays open.
func (c *conn) handle(now time.Time) bool {
	req := &c.req
	c.nreq++
	c.site = nil
	c.hint, c.handHint = c.handHint, -1
	closeAfter := req.Close || c.s.draining.Load()
	if c.s.edge != nil {
		return c.serveEdge(now, closeAfter) // cache mode (edge_serve.go)
	}
	if req.HasBody() {
		// Bodies are not used; skip one that is already buffered, else
		// answer and close rather than read it.
		if !req.Chunked && int64(c.w-c.r) >= req.ContentLength {
			c.r += int(req.ContentLength)
		} else {
			closeAfter = true
		}
	}
	if p := req.Path(); len(p) > len(publishPrefix) && bstr(p[:len(publishPrefix)]) == publishPrefix {
		return c.publishControl(now, closeAfter)
	}
	var head bool
	switch bstr(req.Method) {
	case "GET":
	case "HEAD":
		head = true
	default:
		c.simple(405, "Allow: GET, HEAD\r\n", now, closeAfter, false, "method not allowed")
		return !closeAfter
	}
	path := req.Path()
	if len(path) > 0 && path[0] != '/' {
		path = stripAuthority(path)
	}
	if len(path) == 0 || path[0] != '/' {
		c.simple(400, "", now, true, head, "bad request-target")
		return false
	}
	if c.operator && c.s.peer != nil && bstr(path) == peer.Path {
		return c.upgradePeer(now)
	}
	if bstr(path) == statusPath && c.operator {
		c.serveBytes(200, "application/json", "Cache-Control: no-store\r\n", c.s.statusJSON(), now, closeAfter, head)
		return !closeAfter
	}
	if bstr(path) == sizesPath {
		c.serveBytes(200, "text/plain; charset=utf-8", "Cache-Control: no-store\r\n", c.s.sizes(), now, closeAfter, head)
		return !closeAfter
	}
	if !c.pickSite() {
		c.simple(404, "", now, closeAfter, head, "no such site")
		return !closeAfter
	}
	tbl := c.site.store.Snapshot()
	e, err := tbl.Lookup(bstr(path))
	if err != nil {
		switch {
		case errors.Is(err, content.ErrForbidden):
			c.fail(tbl, 403, "forbidden", now, closeAfter, head)
		case errors.Is(err, content.ErrBadPath):
			c.simple(400, "", now, closeAfter, head, "bad path")
		default:
			c.fail(tbl, 404, "not found", now, closeAfter, head)
		}
		return !closeAfter
	}
	if e.IsDir {
		return c.serveDir(tbl, e, path, now, closeAfter, head)
	}
	return c.serveFile(tbl, e, now, closeAfter, head)
}

// stripAuthority turns an absolute-form target ("http://host/p") into its
// path; anything else is returned unchanged (and then refused).
func stripAuthority(t []byte) []byte {
	for _, scheme := range []string{"http://", "https://"} {
		if len(t) >= len(scheme) && httpwire.EqualFold(t[:len(scheme)], scheme) {
			rest := t[len(scheme):]
			for i, ch := range rest {
				if ch == '/' {
					return rest[i:]
				}
			}
			return []byte("/")
		}
	}
	return t
}

// finish appends Date, the front's token (httpwire.SeqHeader), optional
// Connection: close and the blank line.
func (c *conn) finish(now time.Time, closeAfter bool) {
	c.out = append(c.out, c.s.dates.Line(now)...)
	c.out = appendEcho(c.out, c.req.Headers)
	if closeAfter {
		c.out = append(c.out, connectionClose...)
	} else if c.req.Minor == 0 {
		// HTTP/1.0 clients assume close unless told otherwise.
		c.out = append(c.out, connectionKeepAlive...)
	}
	c.out = append(c.out, crlf...)
}

// simple answers with a short text/plain body naming the status.
func (c *conn) simple(status int, extra string, now time.Time, closeAfter, head bool, reason string) {
	body := make([]byte, 0, 64)
	body = append(body, httpwire.StatusText(status)...)
	if reason != "" {
		body = append(body, ": "...)
		body = append(body, reason...)
	}
	body = append(body, '\n')
	c.serveBytes(status, "text/plain; charset=utf-8", extra, body, now, closeAfter, head)
}

// serveBytes answers with a generated body.
func (c *conn) serveBytes(status int, ctype, extra string, body []byte, now time.Time, closeAfter, head bool) {
	c.out = httpwire.AppendStatusLine(c.out, status)
	c.out = httpwire.AppendHeader(c.out, "Server", c.s.cfg.ServerName)
	c.out = httpwire.AppendHeader(c.out, "Content-Type", ctype)
	c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", int64(len(body)))
	c.out = append(c.out, extra...)
	c.finish(now, closeAfter)
	n := int64(0)
	if !head {
		c.out = append(c.out, body...)
		n = int64(len(body))
	}
	c.logRequest(now, status, n)
}

// logRequest appends the access-log line for the current request.
func (c *conn) logRequest(now time.Time, status int, bodyBytes int64) {
	if c.s.logBuf == nil {
		return
	}
	if !c.s.cfg.LogHealth && bstr(c.req.Path()) == statusPath {
		return
	}
	host := c.host
	if c.trusted {
		if ff := forwardedFor(c.req.Headers); ff != nil {
			host = bstr(ff)
		}
	}
	proto := "HTTP/1.1"
	if c.req.Minor == 0 {
		proto = "HTTP/1.0"
	}
	method, target := bstr(c.req.Method), bstr(c.req.Target)
	if len(c.req.Method) == 0 { // refused before the request line was parsed
		method, target, proto = "-", "-", ""
	}
	vh := ""
	if c.site != nil {
		vh = c.site.name // with VHosts: nginx's "$host $remote_addr ..." layout
	}
	c.logLine = trace.AppendCLF(c.logLine, trace.Record{
		VHost: vh, Host: host, Time: now, Method: method, URL: target, Proto: proto, Status: status, Bytes: bodyBytes,
	})
}

func appendInt(dst []byte, n int64) []byte {
	var tmp [20]byte
	i := len(tmp)
	if n == 0 {
		return append(dst, '0')
	}
	for n > 0 {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
	}
	return append(dst, tmp[i:]...)
}
