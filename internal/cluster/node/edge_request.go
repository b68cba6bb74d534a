package node

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"shoal/internal/base/httpcache"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/vhost"
)

// edgeReq is a client request in cache mode, read once from the parsed
// head: the fields the cache and the upstream need, in net/http's types.
type edgeReq struct {
	method string
	host   string // the request's authority (Host, or the absolute-form target's)
	target string // path and query as sent
	url    *url.URL
	header http.Header // end-to-end fields, canonical names; no Host
	key    string      // primary cache key
	cache  httpcache.Request
	// conditional: the request has a precondition field; ranged: a
	// Range field (so a hit without either skips their evaluation).
	conditional, ranged bool
	body                io.Reader // nil without a body
	// hint is the node the front's decision names as holding the
	// response in its memory (FetchHeader), -1 for none.
	hint int
	// finish reads what the upstream left of the body, so the next
	// pipelined request starts where it should; false means the
	// connection cannot be reused.
	finish func() bool
}

// errBadTarget refuses a request-target that is not origin- or
// absolute-form (or asterisk-form for OPTIONS).
var errBadTarget = errors.New("bad request-target")

// readEdgeReq builds the edgeReq for c.req.
func (c *conn) readEdgeReq(scheme string) (*edgeReq, error) {
	req := &c.req
	r := &edgeReq{method: string(req.Method), host: string(req.Host), target: string(req.Target)}
	if a := vhost.Authority(req.Target); a != nil {
		r.host = string(a)
		if i := strings.Index(r.target, "://"); i >= 0 {
			rest := r.target[i+3:]
			if j := strings.IndexAny(rest, "/?"); j >= 0 {
				r.target = rest[j:]
			} else {
				r.target = "/"
			}
		}
	}
	if r.target == "" || (r.target[0] != '/' && r.target != "*") {
		return nil, errBadTarget
	}
	if r.target != "*" {
		// The origin sees, and the cache keys, the path with its
		// dot-segments removed; an encoded slash is refused (ForwardPath).
		path, query, hasQuery := strings.Cut(r.target, "?")
		p, err := httpwire.ForwardPath(path)
		if err != nil {
			return nil, errBadTarget
		}
		if hasQuery {
			p += "?" + query
		}
		r.target = p
	}
	u, err := url.ParseRequestURI(r.target)
	if err != nil {
		return nil, errBadTarget
	}
	u.Scheme, u.Host = scheme, r.host
	r.url = u
	r.header = make(http.Header, len(req.Headers))
	for _, h := range req.Headers {
		name := textproto.CanonicalMIMEHeaderKey(string(h.Name))
		r.header[name] = append(r.header[name], string(h.Value))
	}
	r.header.Del("Host")
	r.header.Del("Content-Length")
	r.hint = c.fetchHint()
	r.header.Del(FetchHeader) // the cluster's, never the origin's
	r.header.Del(httpwire.SeqHeader)
	_, r.ranged = r.header["Range"]
	for _, f := range [...]string{"If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since"} {
		if _, ok := r.header[f]; ok {
			r.conditional = true
		}
	}
	httpcache.StripHopByHop(r.header)
	r.key = httpcache.Key(scheme, r.host, r.target)
	r.cache = httpcache.ParseRequest(r.method, r.header)
	c.attachBody(r)
	return r, nil
}

// attachBody gives r a reader over the request body: the bytes already
// buffered after the head first, then the connection. A chunked body is
// decoded (net/http/httputil's chunked reader) and what its buffered reader
// took beyond the body is put back in front of c.buf for the next request.
func (c *conn) attachBody(r *edgeReq) {
	req := &c.req
	r.finish = func() bool { return true }
	if !req.HasBody() {
		return
	}
	src := &connBody{c: c}
	if !req.Chunked {
		lr := &io.LimitedReader{R: src, N: req.ContentLength}
		r.body = lr
		r.finish = func() bool { return drain(lr) }
		return
	}
	br := bufio.NewReaderSize(src, 4096)
	cr := httputil.NewChunkedReader(br)
	r.body = cr
	r.finish = func() bool {
		if !drain(cr) {
			return false
		}
		// Put back what br read past the body: it is the next request.
		rest := make([]byte, 0, br.Buffered()+c.w-c.r)
		b, _ := br.Peek(br.Buffered())
		rest = append(rest, b...)
		rest = append(rest, c.buf[c.r:c.w]...)
		if len(rest) > len(c.buf) && len(c.buf) < c.fullIn() {
			c.r, c.w = 0, 0
			c.growIn()
		}
		if len(rest) > len(c.buf) {
			return false
		}
		c.r, c.w = 0, copy(c.buf, rest)
		return true
	}
}

// maxDrain bounds the body bytes read and dropped after a response, so the
// connection can be kept; a longer rest closes it instead.
const maxDrain = 256 << 10

// drain reads r to its end if that is at most maxDrain bytes away.
func drain(r io.Reader) bool {
	n, err := io.Copy(io.Discard, io.LimitReader(r, maxDrain+1))
	return err == nil && n <= maxDrain
}

// connBody reads a request body: buffered bytes, then the connection,
// recording progress for the sweeper's timeouts.
type connBody struct{ c *conn }

func (b *connBody) Read(p []byte) (int, error) {
	c := b.c
	if c.r < c.w {
		n := copy(p, c.buf[c.r:c.w])
		c.r += n
		return n, nil
	}
	n, err := c.nc.Read(p)
	c.since.Store(time.Now().UnixNano())
	return n, err
}

// upstreamRequest is the request sent upstream for r: the client's method,
// URL and end-to-end header plus Via and this cache's Surrogate-Capability.
// With cond set (a GET the cache may store), the client's conditional and
// Range fields are left out, so the answer is the whole representation;
// validators, when given, make it a revalidation of a stored response.
func (e *edge) upstreamRequest(r *edgeReq, cond bool, inm, ims string) *http.Request {
	h := r.header.Clone()
	h.Del("Expect")
	if cond {
		for _, f := range []string{"If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"} {
			h.Del(f)
		}
	}
	if inm != "" {
		h.Set("If-None-Match", inm)
	}
	if ims != "" {
		h.Set("If-Modified-Since", ims)
	}
	h.Add("Via", e.via)
	h.Add(httpcache.FieldSurrogateCapability, e.cfg.Cache.Device+`="Surrogate/1.0"`)
	u := *r.url
	out := &http.Request{
		Method: r.method, URL: &u, Host: r.host, Header: h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1,
	}
	if r.body != nil && !cond {
		out.Body = io.NopCloser(r.body)
		if !r.chunked() {
			out.ContentLength = r.bodyLength()
		}
	} else {
		out.ContentLength = 0
	}
	return out
}

func (r *edgeReq) chunked() bool {
	_, ok := r.body.(*io.LimitedReader)
	return !ok
}

func (r *edgeReq) bodyLength() int64 {
	if lr, ok := r.body.(*io.LimitedReader); ok {
		return lr.N
	}
	return -1
}
