package node

import (
	"strings"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
	"shoal/internal/base/store"
)

// The file-serving path. A representation's body comes from one of three
// places: the node's object store (a hit: copied from the store's arena
// when small, sent with sendfile from the page cache otherwise), the site
// file itself (a miss: opened and handed to the store, whose policy decides
// whether it stays), or a peer (fetched into memory, not kept unless this
// node does not store the file). The response head comes prebuilt with a
// stored object, or is built for the request.

// reply is one file response being put together: the representation
// picked, where its body comes from, and the parts of its head. A conn
// reuses one (conn.rep), so a hit allocates nothing.
type reply struct {
	e, sel *content.Entry
	ctype  string
	coding string
	vary   bool
	key    string      // the cache key, owned (not a view of conn.scratch)
	rule   *headerRule // the site's caching headers for the name, or nil
	o      *object     // the prebuilt head and validators, when known
	spare  bool        // o was built for this miss from the conn's spare (conn.spare)
	h      store.Handle
	body   []byte // a body fetched from a peer, not in the store
	mem    bool   // the body came from a memory: this node's or a peer's
}

// serveFile answers GET/HEAD for a file of tbl. It picks a precompressed
// variant (encoding.go), finds the body (findBody), evaluates
// preconditions (precond.go) and ranges (ranges.go) against the
// representation it picked. Files are opened with tbl.OpenFile, confined
// to the root at open time, and before any response byte, so a file that
// cannot be opened safely (swapped for a symlink or a FIFO since the scan)
// gets a clean 404.
func (c *conn) serveFile(tbl *content.Table, e *content.Entry, now time.Time, closeAfter, head bool) bool {
	c.cond.scan(c.req.Headers)
	r := &c.rep
	*r = reply{e: e}
	defer c.endReply(r)
	r.sel, r.coding, r.vary = c.selectEncoding(tbl, e, c.cond.acceptEncoding)
	r.ctype = c.site.rules.contentType(e)
	if done, keep := c.findBody(tbl, r, now, closeAfter, head); done {
		return keep
	}
	if r.o != nil {
		r.rule = r.o.rule
	} else if c.site.rules.headers != nil {
		r.rule = c.site.rules.rule(e.URL)
	}
	sel := r.sel
	lastMod := ""
	if r.o != nil {
		lastMod = r.o.lastModified()
	} else {
		lastMod = bstr(httpwire.AppendHTTPDate(c.lastMod[:0], sel.ModTime)) // only appended to c.out
	}
	switch precondition(&c.req, &c.cond, sel.ETag, sel.ModTime, now) {
	case 412:
		c.simple(412, "", now, closeAfter, head, "precondition failed")
		return !closeAfter
	case 304:
		// RFC 9110 §15.4.5: the validators and Vary a 200 would carry;
		// like nginx, no Content-Encoding or Accept-Ranges.
		c.out = httpwire.AppendStatusLine(c.out, 304)
		c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, "", r.vary)
		c.out = appendRule(c.out, r.rule, now)
		c.finish(now, closeAfter)
		c.logRequest(now, 304, 0)
		return !closeAfter
	}
	kind := httpwire.RangeNone
	if c.req.Range != nil && ifRangeOK(c.cond.ifRange, sel.ETag, sel.ModTime) {
		c.spans, kind = httpwire.ParseRanges(c.req.Range, sel.Size, c.s.cfg.MaxRanges, c.spans)
	}
	if !head && kind != httpwire.RangeUnsatisfiable && sel.Size > 0 && !r.h.Valid() && r.body == nil {
		h, err := c.s.link(tbl, sel, r.key, r.o)
		if err != nil {
			c.s.cfg.Logger.Warn("open file", "url", sel.URL, "err", err)
			c.simple(404, "", now, closeAfter, head, "not found")
			return !closeAfter
		}
		r.h = h
	}
	return c.answer(r, kind, lastMod, now, closeAfter, head)
}

// endReply releases r's handle and keeps the object built for a miss as
// the conn's spare when the store did not keep it: the next miss rebuilds
// it instead of allocating one.
func (c *conn) endReply(r *reply) {
	kept := r.h.Valid() && r.h.InMemory()
	r.h.Release()
	if r.spare && !kept {
		c.spare = r.o
	}
}

// findBody looks for r's body in the store, then at a peer, and otherwise
// prepares what a miss needs (r.key, and r.o when the store may keep the
// body). done means the response was sent (streamed from a peer or a
// holder, or refused); keep is then serveFile's result.
func (c *conn) findBody(tbl *content.Table, r *reply, now time.Time, closeAfter, head bool) (done, keep bool) {
	sel := r.sel
	key := c.cacheKey(r.e, r.coding)
	if h, o := c.s.cached(key, sel, r.vary); o != nil {
		r.h, r.o, r.mem = h, o, true
		return false, false
	}
	rule := c.site.rules.rule(r.e.URL)
	cacheable := sel.Size <= c.s.maxObject
	if cacheable {
		o, body, mem, done, keep := c.fromPeer(tbl, r.e, sel, key, r.ctype, r.coding, r.vary, rule, now, closeAfter, head)
		if done {
			return true, keep
		}
		if o != nil {
			r.o, r.body, r.mem = o, body, mem
			return false, false
		}
	}
	if sel.Remote {
		if cacheable {
			return true, c.noHolder(sel, now, closeAfter, head)
		}
		if !head && precondition(&c.req, &c.cond, sel.ETag, sel.ModTime, now) == 0 {
			// Stored elsewhere and too large to keep here: streamed from
			// a holder, never held whole (peerstream.go); a HEAD, a
			// 304/412 or a 416 is answered from the table.
			if done, keep := c.streamRemote(r.e, sel, key, r.ctype, r.coding, r.vary, rule, now, closeAfter); done {
				return true, keep
			}
		}
		return false, false
	}
	if r.coding != "" || c.site.name != "" {
		key = strings.Clone(key) // a view of c.scratch until now
	}
	r.key = key
	if cacheable {
		r.o, c.spare, r.spare = c.spare, nil, true
		if r.o == nil {
			r.o = &object{}
		}
		r.o.build(c.s.cfg.ServerName, sel, r.ctype, r.coding, r.vary, sel.Size)
		r.o.rule = rule
	}
	return false, false
}

// answer writes the head for the range kind and the body.
func (c *conn) answer(r *reply, kind httpwire.RangeKind, lastMod string, now time.Time, closeAfter, head bool) bool {
	sel := r.sel
	first, last := int64(0), sel.Size-1
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
		return c.serveMultipart(r, lastMod, now, closeAfter, head)
	case httpwire.RangeSingle:
		// Like nginx, a 206 carries no Accept-Ranges (RFC 9110 §14.3
		// makes it optional).
		first, last = c.spans[0].Start, c.spans[0].End-1
		c.out = httpwire.AppendStatusLine(c.out, 206)
		c.out = httpwire.AppendHeader(c.out, "Content-Type", r.ctype)
		c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", last-first+1)
		c.out = httpwire.AppendContentRange(c.out, first, last, sel.Size)
		c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, r.coding, r.vary)
	default: // the whole representation
		if r.o != nil {
			c.out = append(c.out, r.o.head...)
		} else {
			c.out = httpwire.AppendStatusLine(c.out, 200)
			c.out = httpwire.AppendHeader(c.out, "Content-Type", r.ctype)
			c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", sel.Size)
			c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, r.coding, r.vary)
			c.out = httpwire.AppendHeader(c.out, "Accept-Ranges", "bytes")
		}
	}
	c.out = appendRule(c.out, r.rule, now)
	c.finish(now, closeAfter)
	status := 200
	if kind == httpwire.RangeSingle {
		status = 206
	}
	length := last - first + 1
	if head || length <= 0 {
		c.logRequest(now, status, 0)
		return !closeAfter
	}
	c.logRequest(now, status, length)
	c.served.ObjectBytes += length
	if r.mem {
		c.served.MemoryBytes += length
	}
	return c.sendBody(r, first, length) && !closeAfter
}

// sendBody queues or sends n bytes of r's body from off: a peer's body or
// an inline one is copied into the output (or referenced, for writev), a
// body in a file goes by sendfile after the pending output. It reports
// false when the connection failed or the file shrank under a promised
// length.
func (c *conn) sendBody(r *reply, off, n int64) bool {
	if r.body != nil {
		c.appendBody(r.body[off : off+n])
		return true
	}
	if r.h.Inline() {
		c.out, _ = r.h.AppendBody(c.out, off, n)
		return true
	}
	if c.flush() != nil {
		return false
	}
	if c.snd == nil {
		c.snd = store.NewSender(c.nc)
		c.snd.Progress = c.progress
	}
	m, err := c.snd.Send(&r.h, off, n)
	c.nbytes += m
	if err != nil {
		c.s.cfg.Logger.Debug("send body", "url", r.sel.URL, "sent", m, "err", err)
		return false
	}
	return true
}

// progress records that response bytes went out, for WriteTimeout.
func (c *conn) progress() { c.since.Store(time.Now().UnixNano()) }
