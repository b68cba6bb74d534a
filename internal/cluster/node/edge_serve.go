package node

import (
	"context"
	"errors"
	"net/http"
	"time"

	"shoal/internal/base/httpcache"
	"shoal/internal/base/store"
)

// serveEdge answers the current request in cache mode and reports whether
// the connection stays open. Responses already batched are flushed first:
// a cache-mode response may stream, and must follow them on the wire.
func (c *conn) serveEdge(now time.Time, closeAfter bool) bool {
	e := c.s.edge
	if p := bstr(c.req.Path()); len(p) >= len(internalPrefix) && p[:len(internalPrefix)] == internalPrefix {
		return c.edgeInternal(p, now, closeAfter)
	}
	if done, keep := c.edgeFastHit(now, closeAfter); done {
		return keep
	}
	if c.flush() != nil {
		return false
	}
	r, err := c.readEdgeReq(e.cfg.Scheme)
	if err != nil {
		c.simple(400, "", now, true, false, err.Error())
		return false
	}
	if r.body != nil && expects100(r.header) {
		c.out = append(c.out, "HTTP/1.1 100 Continue\r\n\r\n"...)
		if c.flush() != nil {
			return false
		}
	}
	var keep bool
	if r.cache.Cacheable() {
		keep = c.edgeCached(r, now, closeAfter)
	} else {
		keep = c.edgeForward(r, now, closeAfter)
	}
	if !r.finish() {
		keep = false
	}
	return keep && !closeAfter
}

// internalPrefix is the node's own namespace: never forwarded to the
// upstream (it is the cluster's, not the site's).
const internalPrefix = "/.shoal/"

// edgeInternal answers the node's own paths in cache mode: the status report
// on operator connections, an empty size index (stored responses have no
// sizes to announce before they are asked for), and 404 for the rest.
func (c *conn) edgeInternal(p string, now time.Time, closeAfter bool) bool {
	head := c.req.IsMethod("HEAD")
	switch {
	case p == statusPath && c.operator:
		c.serveBytes(200, "application/json", "Cache-Control: no-store\r\n", c.s.statusJSON(), now, closeAfter, head)
	case p == sizesPath:
		c.serveBytes(200, "text/plain; charset=utf-8", "Cache-Control: no-store\r\n", nil, now, closeAfter, head)
	default:
		c.simple(404, "", now, closeAfter, head, "not found")
	}
	if c.req.HasBody() {
		return false // not read: the connection cannot go on
	}
	return !closeAfter
}

func expects100(h http.Header) bool {
	for _, v := range h.Values("Expect") {
		if len(v) == 12 && (v == "100-continue" || httpEqualFold(v, "100-continue")) {
			return true
		}
	}
	return false
}

func httpEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// edgeCached answers a GET or HEAD: from the store when Decide allows it,
// else through a (collapsed) fetch or revalidation.
func (c *conn) edgeCached(r *edgeReq, now time.Time, closeAfter bool) bool {
	key, st, hd := c.s.edge.lookup(r.key, r.header)
	return c.edgeLooked(r, key, st, hd, now, closeAfter)
}

// edgeLooked is edgeCached once the store was asked: key is where the
// response is (or would be) stored, st and hd what is there (nil and an
// invalid handle for nothing usable; released here).
func (c *conn) edgeLooked(r *edgeReq, key string, st *cachedResp, hd store.Handle, now time.Time, closeAfter bool) bool {
	e := c.s.edge
	d := httpcache.Decide(&r.cache, st.stored(), now)
	switch d.Action {
	case httpcache.Serve:
		e.hit(key)
		defer hd.Release()
		return c.writeStored(r, st, &hd, d.Age, httpcache.CacheStatus{Hit: true, TTL: d.TTL, HasTTL: true}, "HIT", now, closeAfter)
	case httpcache.ServeStale:
		e.stale.Add(1)
		defer hd.Release()
		e.revalidateLater(r, key, st.Stored)
		return c.writeStored(r, st, &hd, d.Age, httpcache.CacheStatus{Hit: true, TTL: d.TTL, HasTTL: true, Detail: "stale-while-revalidate"}, "STALE", now, closeAfter)
	case httpcache.Unsatisfiable:
		hd.Release()
		c.simple(504, "", now, closeAfter, r.method == "HEAD", "only-if-cached")
		return !closeAfter
	}
	if r.method == "HEAD" {
		// A HEAD is passed through: its answer has no body to store.
		hd.Release()
		return c.edgeForward(r, now, closeAfter)
	}
	return c.edgeFetch(r, key, st, hd, d, now, closeAfter)
}

// edgeFetch fetches (or revalidates) the response for r, collapsing with
// a fetch of the same key already in flight: a follower waits for it and
// answers from the store if the result is usable for it too, else fetches
// on its own.
func (c *conn) edgeFetch(r *edgeReq, key string, st *cachedResp, hd store.Handle, d httpcache.Decision, now time.Time, closeAfter bool) bool {
	e := c.s.edge
	fl, lead := e.join(key)
	if !lead {
		e.collapsed.Add(1)
		<-fl.done
		_, st2, hd2 := e.lookup(r.key, r.header)
		if d2 := httpcache.Decide(&r.cache, st2.stored(), e.now()); d2.Action == httpcache.Serve {
			hd.Release()
			defer hd2.Release()
			e.hit(key)
			return c.writeStored(r, st2, &hd2, d2.Age, httpcache.CacheStatus{Hit: true, TTL: d2.TTL, HasTTL: true, Collapsed: true}, "HIT", now, closeAfter)
		}
		hd2.Release()
		fl = &flight{done: make(chan struct{})} // our own, unshared
	}
	var inm, ims string
	var stale *httpcache.Stored
	if st != nil && d.Action == httpcache.Revalidate {
		inm, ims = httpcache.Validators(st.Header)
		stale = st.Stored
	}
	job := &fetchJob{out: e.upstreamRequest(r, true, inm, ims), r: r, primary: r.key, key: key, fl: fl, stale: stale, stream: true}
	res := <-e.startFetch(job)
	cs := httpcache.CacheStatus{Fwd: d.Fwd}
	defer hd.Release()
	switch {
	case res.err != nil:
		if httpcache.StaleOnError(e.cfg.Cache, &r.cache, st.stored(), e.now(), true) {
			return c.serveStaleOnError(r, st, &hd, cs, now, closeAfter)
		}
		return c.upstreamFailed(res.err, now, closeAfter)
	case res.revalidated:
		cs.FwdStatus = http.StatusNotModified
		cs.TTL, cs.HasTTL = res.st.Fresh.Lifetime-res.st.Fresh.InitialAge, true
		return c.writeStored(r, newCachedResp(res.st), &hd, res.st.Fresh.CurrentAge(res.st.ResponseTime, e.now()), cs, "REVALIDATED", now, closeAfter)
	case httpcache.ErrorStatus(res.resp.StatusCode) && httpcache.StaleOnError(e.cfg.Cache, &r.cache, st.stored(), e.now(), false):
		if res.body != nil {
			res.body.Close()
		}
		cs.FwdStatus = res.resp.StatusCode
		return c.serveStaleOnError(r, st, &hd, cs, now, closeAfter)
	}
	e.misses.Add(1)
	cs.FwdStatus, cs.Stored = res.resp.StatusCode, res.stored
	xc := "MISS"
	if st != nil {
		xc = "EXPIRED"
	}
	return c.writeFetched(r, res, cs, xc, now, closeAfter)
}

// hit counts an answer from the store and tells Config.OnHit.
func (e *edge) hit(key string) {
	e.hits.Add(1)
	if e.cfg.OnHit != nil {
		e.cfg.OnHit(key)
	}
}

// serveStaleOnError answers with the stale stored response in place of an
// upstream failure (RFC 5861 stale-if-error).
func (c *conn) serveStaleOnError(r *edgeReq, st *cachedResp, hd *store.Handle, cs httpcache.CacheStatus, now time.Time, closeAfter bool) bool {
	e := c.s.edge
	e.stale.Add(1)
	age := st.Fresh.CurrentAge(st.ResponseTime, e.now())
	cs.TTL, cs.HasTTL, cs.Detail = st.Fresh.Lifetime-age, true, "stale-if-error"
	return c.writeStored(r, st, hd, age, cs, "STALE", now, closeAfter)
}

// upstreamFailed answers 504 when the upstream timed out and 502 for any
// other failure, with a body that says so and nothing more: the upstream's
// address and error stay in the node's log.
func (c *conn) upstreamFailed(err error, now time.Time, closeAfter bool) bool {
	c.s.edge.errors.Add(1)
	c.s.cfg.Logger.Warn("upstream failed", "err", err)
	status := http.StatusBadGateway
	if errors.Is(err, ErrUpstreamTimeout) || errors.Is(err, context.DeadlineExceeded) {
		status = http.StatusGatewayTimeout
	}
	c.simple(status, "", now, closeAfter, c.req.IsMethod("HEAD"), "")
	return !closeAfter
}

// revalidateLater revalidates a stale response in the background
// (stale-while-revalidate), unless a fetch of its key is already running.
func (e *edge) revalidateLater(r *edgeReq, key string, st *httpcache.Stored) {
	fl, lead := e.join(key)
	if !lead {
		return
	}
	inm, ims := httpcache.Validators(st.Header)
	job := &fetchJob{out: e.upstreamRequest(r, true, inm, ims), r: r, primary: r.key, key: key, fl: fl, stale: st}
	e.startFetch(job)
}

// edgeForward passes a request through uncached (methods a cache does not
// answer, HEAD misses) and, after an unsafe method's success, invalidates
// the URLs RFC 9111 §4.4 names.
func (c *conn) edgeForward(r *edgeReq, now time.Time, closeAfter bool) bool {
	e := c.s.edge
	e.bypass.Add(1)
	out := e.upstreamRequest(r, false, "", "")
	guard := guardBody(out)
	resp, err := e.up.Fetch(context.Background(), out)
	if err != nil {
		guard.wait()
		return c.upstreamFailed(err, now, closeAfter)
	}
	defer resp.Body.Close()
	if keys := httpcache.Invalidations(r.method, resp.StatusCode, r.key, e.cfg.Scheme, r.host, resp.Header); keys != nil {
		e.invalidate(keys)
	}
	res := fetched{resp: resp}
	keep := c.writeFetched(r, res, httpcache.CacheStatus{Fwd: fwdFor(r.method), FwdStatus: resp.StatusCode}, "BYPASS", now, closeAfter)
	if !guard.wait() {
		return false
	}
	return keep
}

func fwdFor(method string) string {
	if method == "HEAD" {
		return "request"
	}
	return "method"
}
