package node

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"shoal/internal/base/cache"
	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
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
	// sendChunk is the sendfile chunk between write-progress updates.
	sendChunk = 4 << 20
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

// conn is one client connection, served by one goroutine.
type conn struct {
	s    *Server
	nc   net.Conn
	host string // client address for the access log
	// trusted: the peer is a front in Config.TrustedFronts, whose
	// X-Forwarded-For names the client for the access log.
	trusted bool

	buf  []byte // read buffer; requests are parsed in place
	r, w int    // unparsed bytes are buf[r:w]
	req  httpwire.Request
	cond condFields // preconditions and Accept-Encoding of req (precond.go)

	site    *vsite          // the site of the current request (vhosts.go)
	hostBuf []byte          // its normalized host name
	spans   []httpwire.Span // ranges of the current request (ranges.go)
	scratch []byte          // names and keys built per request without allocating

	out      []byte      // response bytes for the current batch
	bufs     net.Buffers // segments for writev when large bodies are not copied
	wbufs    net.Buffers // scratch that WriteTo consumes
	segStart int         // start of out not yet referenced by bufs
	lr       io.LimitedReader
	logLine  []byte

	state atomic.Int32
	since atomic.Int64 // unix ns when the current state began

	nreq, nbytes int64 // batch counters, added to the server's per batch
	served       cache.Served

	pre int       // bytes at buf[w:] handed over with the connection, read first
	hb  *handback // non-nil for a connection handed off by the front (handoff.go)
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
	c := &conn{
		s:   s,
		nc:  nc,
		buf: make([]byte, s.cfg.MaxHead+4096),
		out: make([]byte, 0, 4096),

		handHint: -1,
	}
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
			return
		}
		c.nc.Close()
		c.s.untrack(c)
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
	if cap(c.out) > 1<<20 {
		c.out = make([]byte, 0, 4096)
	}
	return keep
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
		m, err = c.nc.Write(c.out)
		n = int64(m)
	} else {
		if c.segStart < len(c.out) {
			c.bufs = append(c.bufs, c.out[c.segStart:])
		}
		c.wbufs = c.bufs
		n, err = c.wbufs.WriteTo(c.nc)
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

// finish appends Date, optional Connection: close and the blank line.
func (c *conn) finish(now time.Time, closeAfter bool) {
	c.out = append(c.out, c.s.dates.Line(now)...)
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

// serveFile answers GET/HEAD for a file of tbl: from the cache when it
// fits, otherwise with sendfile. It picks a precompressed variant
// (encoding.go), evaluates preconditions (precond.go) and ranges
// (ranges.go) against the representation it picked. Files are opened with
// tbl.OpenFile, confined to the root at open time, and before any response
// byte, so a file that cannot be opened safely (swapped for a symlink or a
// FIFO since the scan) gets a clean 404.
func (c *conn) serveFile(tbl *content.Table, e *content.Entry, now time.Time, closeAfter, head bool) bool {
	req := &c.req
	c.cond.scan(req.Headers)
	sel, coding, vary := c.selectEncoding(tbl, e, c.cond.acceptEncoding)
	ctype := c.site.rules.contentType(e)
	var rule *headerRule
	var o *object
	mem := false // o came from a memory: this node's cache or a peer's
	if c.s.cache != nil && sel.Size <= c.s.cfg.MaxObject {
		key := c.cacheKey(e, coding)
		var done, keep bool
		if v, ok := c.s.cache.Get(key); ok && v.etag == sel.ETag && v.vary == vary {
			o, rule, mem = v, v.rule, true
		} else if o, mem, done, keep = c.fromPeer(tbl, e, sel, key, ctype, coding, vary, c.site.rules.rule(e.URL), now, closeAfter, head); done {
			return keep
		} else if o != nil {
			rule = o.rule
		} else if sel.Remote {
			return c.noHolder(sel, now, closeAfter, head)
		} else {
			body, err := readSmall(tbl, sel)
			if err != nil {
				c.s.cfg.Logger.Warn("read file", "url", sel.URL, "err", err)
				c.simple(404, "", now, closeAfter, head, "not found")
				return !closeAfter
			}
			rule = c.site.rules.rule(e.URL)
			o = buildObject(c.s.cfg.ServerName, sel, ctype, coding, vary, body)
			o.rule = rule
			if coding != "" || c.site.name != "" {
				key = strings.Clone(key) // a view of c.scratch until now
			}
			c.s.cache.Add(key, o, o.cost())
		}
	}
	if o == nil && sel.Remote && !head && precondition(req, &c.cond, sel.ETag, sel.ModTime, now) == 0 {
		// Stored elsewhere and not cacheable here: streamed from a holder,
		// never held whole (peerstream.go); a HEAD, a 304/412 or a 416 is
		// answered below from the table.
		if done, keep := c.streamRemote(e, sel, c.cacheKey(e, coding), ctype, coding, vary, c.site.rules.rule(e.URL), now, closeAfter); done {
			return keep
		}
	}
	if o == nil && c.site.rules.headers != nil {
		rule = c.site.rules.rule(e.URL)
	}
	lastMod := ""
	if o != nil {
		lastMod = o.lastMod
	} else {
		lastMod = string(httpwire.AppendHTTPDate(nil, sel.ModTime))
	}

	switch precondition(req, &c.cond, sel.ETag, sel.ModTime, now) {
	case 412:
		c.simple(412, "", now, closeAfter, head, "precondition failed")
		return !closeAfter
	case 304:
		// RFC 9110 §15.4.5: the validators and Vary a 200 would carry;
		// like nginx, no Content-Encoding or Accept-Ranges.
		c.out = httpwire.AppendStatusLine(c.out, 304)
		c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, "", vary)
		c.out = appendRule(c.out, rule, now)
		c.finish(now, closeAfter)
		c.logRequest(now, 304, 0)
		return !closeAfter
	}

	first, last, kind := int64(0), sel.Size-1, httpwire.RangeNone
	if req.Range != nil && ifRangeOK(c.cond.ifRange, sel.ETag, sel.ModTime) {
		c.spans, kind = httpwire.ParseRanges(req.Range, sel.Size, c.s.cfg.MaxRanges, c.spans)
	}
	var f *os.File // the file to sendfile from, opened before the head
	if o == nil && !head && kind != httpwire.RangeUnsatisfiable && sel.Size > 0 {
		var err error
		if f, err = tbl.OpenFile(sel); err != nil {
			c.s.cfg.Logger.Warn("open file", "url", sel.URL, "err", err)
			c.simple(404, "", now, closeAfter, head, "not found")
			return !closeAfter
		}
	}
	switch kind {
	case httpwire.RangeUnsatisfiable:
		c.out = httpwire.AppendStatusLine(c.out, 416)
		c.out = httpwire.AppendHeader(c.out, "Server", c.s.cfg.ServerName)
		c.out = append(c.out, "Content-Range: bytes */"...)
		c.out = appendInt(c.out, sel.Size)
		c.out = append(c.out, "\r\nContent-Length: 0\r\n"...)
		c.finish(now, closeAfter)
		c.logRequest(now, 416, 0)
		return !closeAfter
	case httpwire.RangeMulti:
		return c.serveMultipart(o, f, sel, ctype, coding, vary, rule, lastMod, now, closeAfter, head)
	case httpwire.RangeSingle:
		// Like nginx, a 206 carries no Accept-Ranges (RFC 9110 §14.3
		// makes it optional).
		first, last = c.spans[0].Start, c.spans[0].End-1
		c.out = httpwire.AppendStatusLine(c.out, 206)
		c.out = httpwire.AppendHeader(c.out, "Content-Type", ctype)
		c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", last-first+1)
		c.out = httpwire.AppendContentRange(c.out, first, last, sel.Size)
		c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, coding, vary)
		c.out = appendRule(c.out, rule, now)
		c.finish(now, closeAfter)
	default: // the whole representation
		if o != nil {
			c.out = append(c.out, o.head...)
		} else {
			c.out = httpwire.AppendStatusLine(c.out, 200)
			c.out = httpwire.AppendHeader(c.out, "Content-Type", ctype)
			c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", sel.Size)
			c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, coding, vary)
			c.out = httpwire.AppendHeader(c.out, "Accept-Ranges", "bytes")
		}
		c.out = appendRule(c.out, rule, now)
		c.finish(now, closeAfter)
	}
	status := 200
	if kind == httpwire.RangeSingle {
		status = 206
	}
	length := last - first + 1
	if head || length <= 0 {
		if f != nil {
			f.Close()
		}
		c.logRequest(now, status, 0)
		return !closeAfter
	}
	c.logRequest(now, status, length)
	c.served.ObjectBytes += length
	if mem {
		c.served.MemoryBytes += length
	}
	if o != nil {
		c.appendBody(o.body[first : last+1])
		return !closeAfter
	}
	return c.sendFile(f, first, length) && !closeAfter
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
