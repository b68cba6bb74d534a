package node

import (
	"io"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"shoal/internal/base/httpcache"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/store"
)

// headSkip are the stored or upstream fields a cache-mode response never
// copies: framing (written from the body actually sent), Age (generated
// for a stored response; an upstream's is passed on), and the fields
// appended to rather than copied.
var headSkip = map[string]bool{
	"Content-Length": true, "Transfer-Encoding": true, "Age": true,
	"Via": true, "Cache-Status": true, "X-Cache": true,
	httpwire.SeqHeader: true, // a front's token is the cluster's, never the origin's
}

// noFraming is appendEdgeHead's length for responses that carry neither
// Content-Length nor Transfer-Encoding (1xx, 204, 304).
const noFraming = -2

// headParts is a response header prepared for writing: its fields as
// wire lines in name order (each value on its own line, as Set-Cookie
// needs; headSkip's fields left out), and what appendEdgeHead completes:
// the upstream's Via and Cache-Status lines joined, whether it has a Date.
// A stored response's parts are built once and reused by every hit
// (edgeDecoded).
type headParts struct {
	fields      []byte
	via, status string
	hasDate     bool
}

// makeHeadParts prepares h; keepAge keeps an upstream's Age (a response
// passed on rather than built from the store, whose Age is generated).
func makeHeadParts(h http.Header, keepAge bool) headParts {
	names := make([]string, 0, len(h))
	for n := range h {
		if !headSkip[n] || (n == "Age" && keepAge) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var hp headParts
	for _, n := range names {
		for _, v := range h[n] {
			hp.fields = httpwire.AppendHeader(hp.fields, n, v)
		}
	}
	hp.via = strings.Join(h.Values("Via"), ", ")
	hp.status = strings.Join(h.Values("Cache-Status"), ", ")
	hp.hasDate = len(h.Values("Date")) > 0
	return hp
}

// appendEdgeHead appends a response head: the status line, the prepared
// fields, Age when age >= 0, Content-Length when length >= 0 (-1: unknown,
// so chunked, or close-delimited for HTTP/1.0; noFraming: neither), Via
// and Cache-Status appended to the upstream's, X-Cache, Date when the
// response had none, and the connection fields. It reports whether the body
// is chunked and whether the connection must close after it.
func (c *conn) appendEdgeHead(status int, hp *headParts, age, length int64, cs httpcache.CacheStatus, xcache string, now time.Time, closeAfter bool) (chunked, mustClose bool) {
	e := c.s.edge
	c.out = httpwire.AppendStatusLine(c.out, status)
	c.out = append(c.out, hp.fields...)
	if age >= 0 {
		c.out = httpwire.AppendHeaderInt(c.out, "Age", age)
	}
	switch {
	case length == noFraming:
	case length >= 0:
		c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", length)
	case c.req.Minor >= 1 && !c.req.IsMethod("HEAD"):
		c.out = httpwire.AppendHeader(c.out, "Transfer-Encoding", "chunked")
		chunked = true
	case !c.req.IsMethod("HEAD"):
		mustClose = true // HTTP/1.0: the body ends with the connection
	}
	c.out = appendListField(c.out, "Via", hp.via, e.via)
	c.out = append(appendListField(c.out, "Cache-Status", hp.status, ""), e.cfg.Name...)
	c.out = cs.AppendParams(c.out)
	c.out = append(c.out, crlf...)
	c.out = httpwire.AppendHeader(c.out, "X-Cache", xcache)
	if !hp.hasDate {
		c.out = append(c.out, c.s.dates.Line(now)...)
	}
	c.out = appendEcho(c.out, c.req.Headers)
	if closeAfter || mustClose {
		c.out = append(c.out, connectionClose...)
	} else if c.req.Minor == 0 {
		c.out = append(c.out, connectionKeepAlive...)
	}
	c.out = append(c.out, crlf...)
	return chunked, mustClose
}

// appendListField appends "Name: prior, ours" — or "Name: ours" without
// prior — leaving the line open when ours is "" (the caller ends it).
func appendListField(dst []byte, name, prior, ours string) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	if prior != "" {
		dst = append(dst, prior...)
		dst = append(dst, ", "...)
	}
	if ours == "" {
		return dst
	}
	dst = append(dst, ours...)
	return append(dst, crlf...)
}

// noBody reports statuses whose responses never have a body.
func noBody(status int) bool {
	return status == http.StatusNoContent || status == http.StatusNotModified || status < 200
}

// writeStored answers from a stored response: 304 or 412 when the client's
// preconditions say so, a 206 for a single satisfiable range of a stored
// 200 (several ranges get the whole 200, as RFC 9110 §14.2 allows), 416
// for an unsatisfiable one, else the stored status, header and body.
func (c *conn) writeStored(r *edgeReq, st *cachedResp, hd *store.Handle, age int64, cs httpcache.CacheStatus, xcache string, now time.Time, closeAfter bool) bool {
	head := r.method == "HEAD"
	if st.Status >= 200 && st.Status < 300 && r.conditional {
		switch httpcache.Precondition(r.method, r.header, st.Header) {
		case 304:
			hp := makeHeadParts(notModifiedHeader(st.Header), false)
			c.appendEdgeHead(304, &hp, age, noFraming, cs, xcache, now, closeAfter)
			c.logRequest(now, 304, 0)
			return !closeAfter
		case 412:
			c.simple(412, "", now, closeAfter, head, "precondition failed")
			return !closeAfter
		}
	}
	size := hd.Size()
	status, first, n, hp := st.Status, int64(0), size, &st.hp
	if r.ranged && st.Status == 200 && r.method == "GET" {
		var done bool
		if status, first, n, hp, done = c.storedRange(r, st, size, cs, xcache, now, closeAfter); done {
			return !closeAfter
		}
	}
	if noBody(status) {
		n = noFraming
	}
	c.appendEdgeHead(status, hp, age, n, cs, xcache, now, closeAfter)
	if head || n <= 0 {
		c.logRequest(now, status, 0)
		return !closeAfter
	}
	c.logRequest(now, status, n)
	if n <= inlineBody && hd.Inline() {
		// A small body goes out with the head, in the batch's one write.
		c.out, _ = hd.AppendBody(c.out, first, n)
		return !closeAfter
	}
	if c.flush() != nil {
		return false
	}
	snd := store.NewSender(c.nc)
	snd.Progress = func() {
		c.since.Store(time.Now().UnixNano())
		if c.wto > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(c.wto))
		}
	}
	m, err := snd.Send(hd, first, n)
	c.nbytes += m
	return err == nil && m == n && !closeAfter
}

// storedRange evaluates the client's Range (and If-Range) against a
// stored 200 of size bytes: a single satisfiable range becomes a 206 of
// its span (status, offset, length and head returned), an unsatisfiable
// one is answered 416 here (done), anything else is the whole 200.
func (c *conn) storedRange(r *edgeReq, st *cachedResp, size int64, cs httpcache.CacheStatus, xcache string, now time.Time, closeAfter bool) (status int, first, n int64, hp *headParts, done bool) {
	status, n, hp = st.Status, size, &st.hp
	if !ifRangeMatches(r.header.Get("If-Range"), st.Header) {
		return status, 0, n, hp, false
	}
	spans, kind := httpwire.ParseRanges([]byte(r.header.Get("Range")), size, c.s.cfg.MaxRanges, c.spans)
	c.spans = spans
	switch kind {
	case httpwire.RangeSingle:
		first, n = spans[0].Start, spans[0].Len()
		h := st.Header.Clone()
		h.Set("Content-Range", "bytes "+strconv.FormatInt(first, 10)+"-"+strconv.FormatInt(first+n-1, 10)+"/"+strconv.FormatInt(size, 10))
		p := makeHeadParts(h, false)
		return 206, first, n, &p, false
	case httpwire.RangeUnsatisfiable:
		p := makeHeadParts(http.Header{"Content-Range": {"bytes */" + strconv.FormatInt(size, 10)}}, false)
		c.appendEdgeHead(416, &p, -1, 0, cs, xcache, now, closeAfter)
		c.logRequest(now, 416, 0)
		return 416, 0, 0, nil, true
	}
	return status, 0, n, hp, false
}

// notModifiedHeader is the subset of a stored header a 304 carries (RFC
// 9110 §15.4.5): the fields a 200 would have sent that describe caching and
// the representation's identity, not its bytes.
func notModifiedHeader(h http.Header) http.Header {
	out := http.Header{}
	for _, n := range []string{"Cache-Control", "Content-Location", "Date", "Etag", "Expires", "Vary", "Last-Modified"} {
		if v := h.Values(n); len(v) > 0 {
			out[n] = v
		}
	}
	return out
}

// ifRangeMatches evaluates If-Range against a stored response (RFC 9110
// §13.1.5): absent, a strong ETag equal to the stored one, or a date equal
// to its Last-Modified.
func ifRangeMatches(v string, h http.Header) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return true
	}
	if strings.HasPrefix(v, `"`) {
		et := strings.TrimSpace(h.Get("ETag"))
		return et != "" && !strings.HasPrefix(et, "W/") && et == v
	}
	t, err := http.ParseTime(v)
	lm, err2 := http.ParseTime(strings.TrimSpace(h.Get("Last-Modified")))
	return err == nil && err2 == nil && t.Equal(lm)
}

// writeFetched answers with a response from the upstream, streaming its
// body (from the fetch's pipe, or straight from the upstream for a pass
// through). A 200 the cache fetched in place of the client's conditional
// request is answered 304 or 412 when the client's preconditions say so.
func (c *conn) writeFetched(r *edgeReq, res fetched, cs httpcache.CacheStatus, xcache string, now time.Time, closeAfter bool) bool {
	resp := res.resp
	var body io.ReadCloser = resp.Body
	if res.body != nil {
		body = res.body
	}
	defer body.Close()
	h := resp.Header.Clone()
	httpcache.StripHopByHop(h)
	if r.cache.Cacheable() && resp.StatusCode >= 200 && resp.StatusCode < 300 && r.method == "GET" {
		switch httpcache.Precondition(r.method, r.header, h) {
		case 304:
			hp := makeHeadParts(notModifiedHeader(h), false)
			c.appendEdgeHead(304, &hp, -1, noFraming, cs, xcache, now, closeAfter)
			c.logRequest(now, 304, 0)
			return !closeAfter
		case 412:
			c.simple(412, "", now, closeAfter, false, "precondition failed")
			return !closeAfter
		}
	}
	length := resp.ContentLength
	if r.method == "HEAD" && length < 0 {
		if v, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil && v >= 0 {
			length = v // the length a GET would have, as the origin said
		}
	}
	if noBody(resp.StatusCode) {
		length = noFraming
	}
	hp := makeHeadParts(h, true)
	chunked, mustClose := c.appendEdgeHead(resp.StatusCode, &hp, -1, length, cs, xcache, now, closeAfter)
	if r.method == "HEAD" || noBody(resp.StatusCode) {
		c.logRequest(now, resp.StatusCode, 0)
		return !closeAfter
	}
	if c.flush() != nil {
		return false
	}
	n, err := c.copyOut(body, chunked)
	c.logRequest(now, resp.StatusCode, n)
	if err != nil || (length >= 0 && n != length) {
		return false
	}
	return !closeAfter && !mustClose
}

// copyOut copies a streamed body to the client, chunked when asked.
func (c *conn) copyOut(body io.Reader, chunked bool) (int64, error) {
	var w io.Writer = progress{c}
	var cw io.WriteCloser
	if chunked {
		cw = httputil.NewChunkedWriter(w)
		w = cw
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	n, err := io.CopyBuffer(w, body, *buf)
	if chunked && err == nil {
		if err = cw.Close(); err == nil {
			_, err = progress{c}.Write(crlf)
		}
	}
	return n, err
}

// copyBufs are the buffers streamed bodies pass through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// progress writes to the client, counting bytes and recording progress for
// the sweeper's WriteTimeout.
type progress struct{ c *conn }

func (p progress) Write(b []byte) (int, error) {
	n, err := p.c.nc.Write(b)
	p.c.nbytes += int64(n)
	p.c.since.Store(time.Now().UnixNano())
	return n, err
}

// bodyGuard tells when the upstream's transport is done with a request
// body: net/http may still be reading it after RoundTrip returns, and the
// connection's buffer must not be touched until it stops.
type bodyGuard struct {
	closed chan struct{}
	once   sync.Once
	r      io.Reader
}

func (g *bodyGuard) Read(p []byte) (int, error) { return g.r.Read(p) }
func (g *bodyGuard) Close() error {
	g.once.Do(func() { close(g.closed) })
	return nil
}

// guardBody wraps out's body; wait blocks until the transport closed it.
func guardBody(out *http.Request) *bodyGuard {
	if out.Body == nil {
		return &bodyGuard{}
	}
	g := &bodyGuard{closed: make(chan struct{}), r: out.Body}
	out.Body = g
	return g
}

// bodyGuardWait bounds the wait for a transport to let go of a body.
const bodyGuardWait = 30 * time.Second

func (g *bodyGuard) wait() bool {
	if g.closed == nil {
		return true
	}
	t := time.NewTimer(bodyGuardWait)
	defer t.Stop()
	select {
	case <-g.closed:
		return true
	case <-t.C:
		return false
	}
}
