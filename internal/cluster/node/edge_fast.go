package node

import (
	"bytes"
	"time"

	"shoal/internal/base/httpcache"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/store"
)

// edgeFastHit answers the current request from the store without building
// its edgeReq (net/http's header map, URL and key strings: a dozen
// allocations) when it is a plain hit: GET or HEAD without a body, an
// origin-form target whose path ForwardPath keeps as it is, none of the
// request fields that change what a cache does (Cache-Control,
// Authorization, Range, the If-* preconditions, Expect), and a response
// hit before, so that its key and decoded metadata are known
// (decodedCache). Then httpcache.Decide is asked with the request as
// ParseRequest reads one without those fields (edge.plainGet), and a fresh response
// goes out from the store with nothing allocated.
//
// done false means nothing was looked up: the normal path answers. When
// the stored response turns out not to be servable as it is (stale, to
// revalidate), the normal path takes over with this lookup (edgeLooked),
// so the store counts the request once.
func (c *conn) edgeFastHit(now time.Time, closeAfter bool) (done, keep bool) {
	e := c.s.edge
	rq, de, ok := c.edgeFastFind()
	if !ok {
		return false, false
	}
	key := de.key
	hd, ok := e.store.Get(key)
	if !ok {
		return false, false // evicted since: the normal path fetches
	}
	cr := de.cr
	if !sameMeta(hd.Meta(), de.meta) {
		var err error
		if cr, err = e.decoded.get(key, hd.Meta()); err != nil {
			hd.Release() // a Vary marker now, or unreadable: the normal path sorts it out
			return false, false
		}
	}
	d := httpcache.Decide(rq, cr.Stored, now)
	if d.Action != httpcache.Serve {
		return true, c.edgeSlowWith(key, cr, hd, now, closeAfter)
	}
	return true, c.edgeWriteHit(rq, key, cr, &hd, d, now, closeAfter)
}

// edgeFastFind is the lookup of edgeFastHit without the store: the
// request as httpcache sees it and the decoded entry of its key, if the
// request is plain enough and its response was hit before.
func (c *conn) edgeFastFind() (*httpcache.Request, decodedEntry, bool) {
	e := c.s.edge
	req := &c.req
	var rq *httpcache.Request
	switch bstr(req.Method) {
	case "GET":
		rq = &e.plainGet
	case "HEAD":
		rq = &e.plainHead
	default:
		return nil, decodedEntry{}, false
	}
	t := req.Target
	if req.HasBody() || len(t) == 0 || t[0] != '/' || !plainRequest(req.Headers) {
		return nil, decodedEntry{}, false
	}
	path := t
	if i := bytes.IndexByte(t, '?'); i >= 0 {
		if bytes.IndexByte(t[i:], '#') >= 0 {
			return nil, decodedEntry{}, false
		}
		path = t[:i]
	}
	if !httpwire.ForwardPathUnchanged(path) {
		return nil, decodedEntry{}, false
	}
	c.scratch = httpcache.AppendKey(c.scratch[:0], e.cfg.Scheme, bstr(req.Host), bstr(t))
	de, ok := e.decoded.find(bstr(c.scratch))
	return rq, de, ok
}

// sameMeta reports whether a and b are the same metadata bytes (the
// decoded cache's test: the store hands out new bytes when they change).
func sameMeta(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// edgeWriteHit answers a fresh hit (d says Serve) and releases hd.
func (c *conn) edgeWriteHit(rq *httpcache.Request, key string, cr *cachedResp, hd *store.Handle, d httpcache.Decision, now time.Time, closeAfter bool) bool {
	c.s.edge.hit(key)
	r := edgeReq{method: rq.Method}
	keep := c.writeStored(&r, cr, hd, d.Age, httpcache.CacheStatus{Hit: true, TTL: d.TTL, HasTTL: true}, "HIT", now, closeAfter)
	hd.Release()
	return keep && !closeAfter
}

// edgeSlowWith answers the current request on the normal path with the
// lookup edgeFastHit made (key, cr, hd; hd released here).
func (c *conn) edgeSlowWith(key string, cr *cachedResp, hd store.Handle, now time.Time, closeAfter bool) bool {
	if c.flush() != nil {
		hd.Release()
		return false
	}
	r, err := c.readEdgeReq(c.s.edge.cfg.Scheme)
	if err != nil {
		hd.Release()
		c.simple(400, "", now, true, false, err.Error())
		return false
	}
	keep := c.edgeLooked(r, key, cr, hd, now, closeAfter)
	return r.finish() && keep && !closeAfter
}

// plainRequest reports whether a request's fields leave a cache's answer
// to its method and target alone: none of Cache-Control (request
// directives), Authorization (RFC 9111 §3.5), Range, If-* or Expect.
func plainRequest(hs []httpwire.Header) bool {
	for i := range hs {
		n := hs[i].Name
		if len(n) < 5 {
			continue
		}
		switch n[0] | 0x20 {
		case 'c':
			if httpwire.EqualFold(n, "cache-control") {
				return false
			}
		case 'a':
			if httpwire.EqualFold(n, "authorization") {
				return false
			}
		case 'r':
			if httpwire.EqualFold(n, "range") {
				return false
			}
		case 'i':
			if n[1]|0x20 == 'f' && n[2] == '-' {
				return false
			}
		case 'e':
			if httpwire.EqualFold(n, "expect") {
				return false
			}
		}
	}
	return true
}
