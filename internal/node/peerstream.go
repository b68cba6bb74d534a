package node

import (
	"errors"
	"time"

	"shoal/internal/content"
	"shoal/internal/httpwire"
	"shoal/internal/peer"
)

// Streaming a file this node neither stores nor may cache (a partitioned
// site's file above MaxObject, content.Entry.Remote): the bytes come from a
// holder through peer.Host.Stream and each chunk goes to the client as it
// arrives, so a 1 GB file costs about one 64 KiB frame on each node, not
// 1 GB per request (the project's rule that every buffer has a bound).
// These fetches are not collapsed: nobody keeps a body that others could
// share. A HEAD, a 304/412 and a 416 need none of the body and serveFile
// answers them from the table (the manifest's size, ETag and date); a
// single range is cut from the stream; several ranges get the whole
// representation (RFC 9110 §14.2 lets a server ignore Range).

// errClientGone stops a holder's stream when the client's connection fails.
var errClientGone = errors.New("node: client write failed")

// streamRemote answers a GET for sel from its holders. handled false means
// nothing was written and serveFile answers from the table (an
// unsatisfiable range, an empty file); otherwise keep is serveFile's
// result. When every holder fails before any byte went out the answer is
// 502; when one fails midway the next holder's stream resumes where the
// client is (its first bytes skipped); when none can finish, the client's
// connection is closed short of Content-Length, never left looking
// complete.
func (c *conn) streamRemote(e, sel *content.Entry, key, ctype, coding string, vary bool, rule *headerRule,
	now time.Time, closeAfter bool) (handled, keep bool) {
	req := &c.req
	first, last, kind := int64(0), sel.Size-1, httpwire.RangeNone
	if req.Range != nil && ifRangeOK(c.cond.ifRange, sel.ETag, sel.ModTime) {
		c.spans, kind = httpwire.ParseRanges(req.Range, sel.Size, c.s.cfg.MaxRanges, c.spans)
	}
	if kind == httpwire.RangeUnsatisfiable || sel.Size == 0 {
		return false, false
	}
	var candBuf [8]int
	cs := c.s.holderPeers(candBuf[:0], sel)
	if len(cs) == 0 {
		return true, c.noHolder(sel, now, closeAfter, false)
	}
	lastMod := string(httpwire.AppendHTTPDate(nil, sel.ModTime))
	mark, seg, nbufs := len(c.out), c.segStart, len(c.bufs)
	status := 200
	if kind == httpwire.RangeSingle {
		// Like serveFile: a 206 carries no Accept-Ranges.
		status, first, last = 206, c.spans[0].Start, c.spans[0].End-1
		c.out = httpwire.AppendStatusLine(c.out, 206)
		c.out = httpwire.AppendHeader(c.out, "Content-Type", ctype)
		c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", last-first+1)
		c.out = httpwire.AppendContentRange(c.out, first, last, sel.Size)
		c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, coding, vary)
	} else {
		c.out = httpwire.AppendStatusLine(c.out, 200)
		c.out = httpwire.AppendHeader(c.out, "Content-Type", ctype)
		c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", sel.Size)
		c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, coding, vary)
		c.out = httpwire.AppendHeader(c.out, "Accept-Ranges", "bytes")
	}
	c.out = appendRule(c.out, rule, now)
	c.finish(now, closeAfter)
	// done counts the representation's bytes already dealt with (sent when
	// in [first, last], skipped otherwise), across holders; at is the
	// current holder's position.
	var done, at int64
	started := false
	sink := func(chunk []byte) error {
		start, end := at, at+int64(len(chunk))
		at = end
		if end <= done {
			return nil // a previous holder's stream already covered these
		}
		lo, hi := max(start, done, first), min(end, last+1)
		done = end
		if lo >= hi {
			return nil
		}
		if !started {
			started = true
			if c.flush() != nil {
				return errClientGone
			}
		}
		n, err := c.nc.Write(chunk[lo-start : hi-start])
		c.nbytes += int64(n)
		c.since.Store(time.Now().UnixNano()) // progress, for WriteTimeout
		if err != nil {
			return errClientGone
		}
		return nil
	}
	r := peer.Request{Site: c.site.name, URL: e.URL, Coding: coding, ETag: sel.ETag, Size: sel.Size, Key: key}
	var err error
	for _, i := range cs {
		at = 0
		if _, err = c.s.peer.Stream(i, r, sink); err == nil || errors.Is(err, errClientGone) {
			break
		}
		c.s.cfg.Logger.Debug("peer stream", "url", sel.URL, "peer", i, "done", done, "err", err)
	}
	switch {
	case err == nil:
		c.logRequest(now, status, last-first+1)
		return true, !closeAfter
	case !started:
		// Nothing went out: take the head back and answer 502.
		c.out, c.segStart = c.out[:mark], seg
		clear(c.bufs[nbufs:])
		c.bufs = c.bufs[:nbufs]
		return true, c.noHolder(sel, now, closeAfter, false)
	default:
		// Part of the body went out and no holder could finish it: the
		// connection closes short of Content-Length.
		c.s.cfg.Logger.Warn("peer stream failed midway; closing the client connection", "url", sel.URL, "sent", done, "err", err)
		c.logRequest(now, status, last-first+1)
		return true, false
	}
}
