package node

import (
	"errors"
	"slices"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
	"shoal/internal/cluster/peer"
)

// Streaming a file this node neither stores nor may cache (a partitioned
// site's file above MaxObject, content.Entry.Remote): the bytes come from a
// holder through peer.Host.Stream and each chunk goes to the client as it
// arrives, so a 1 GB file costs about one 64 KiB frame on each node, not
// 1 GB per request (the project's rule that every buffer has a bound).
// These fetches are not collapsed: nobody keeps a body that others could
// share. A HEAD, a 304/412 and a 416 need none of the body and serveFile
// answers them from the table (the manifest's size, ETag and date). Ranges
// are cut from the stream, which stops once their last byte went out;
// ranges asked out of order get the whole representation (RFC 9110 §14.2
// lets a server ignore Range), since one pass cannot go back.

var (
	// errClientGone stops a holder's stream when the client's connection
	// fails.
	errClientGone = errors.New("node: client write failed")
	// errEnough stops a holder's stream once the ranges' last byte went out.
	errEnough = errors.New("node: the ranges are sent")
)

// streamRemote answers a GET for sel from its holders. handled false means
// nothing was written and serveFile answers from the table (an
// unsatisfiable range, an empty file); otherwise keep is serveFile's
// result. When every holder fails before any byte went out the answer is
// 502; when one fails midway the next holder's stream resumes where the
// client is (the bytes already dealt with skipped); when none can finish,
// the client's connection is closed short of Content-Length, never left
// looking complete.
func (c *conn) streamRemote(e, sel *content.Entry, key, ctype, coding string, vary bool, rule *headerRule,
	now time.Time, closeAfter bool) (handled, keep bool) {
	req := &c.req
	kind := httpwire.RangeNone
	if req.Range != nil && ifRangeOK(c.cond.ifRange, sel.ETag, sel.ModTime) {
		c.spans, kind = httpwire.ParseRanges(req.Range, sel.Size, c.s.cfg.MaxRanges, c.spans)
	}
	if kind == httpwire.RangeUnsatisfiable || sel.Size == 0 {
		return false, false
	}
	if kind == httpwire.RangeMulti && !slices.IsSortedFunc(c.spans, func(a, b httpwire.Span) int { return int(a.Start - b.Start) }) {
		kind = httpwire.RangeNone
	}
	if kind == httpwire.RangeNone {
		c.spans = append(c.spans[:0], httpwire.Span{Start: 0, End: sel.Size})
	}
	var candBuf [8]int
	cs := c.s.holderPeers(candBuf[:0], sel)
	if len(cs) == 0 {
		return true, c.noHolder(sel, now, closeAfter, false)
	}
	mark, seg, nbufs := len(c.out), c.segStart, len(c.bufs)
	rs := &rangeSink{c: c, kind: kind, ctype: ctype, size: sel.Size, end: c.spans[len(c.spans)-1].End}
	status, length := c.remoteHead(rs, sel, ctype, coding, vary, rule, now, closeAfter)
	r := peer.Request{Site: c.site.name, URL: e.URL, Coding: coding, ETag: sel.ETag, Size: sel.Size, Key: key}
	var err error
	for _, i := range cs {
		rs.at = 0
		_, err = c.s.peer.Stream(i, r, rs.write)
		if errors.Is(err, errEnough) {
			err = nil
		}
		if err == nil || errors.Is(err, errClientGone) {
			break
		}
		c.s.cfg.Logger.Debug("peer stream", "url", sel.URL, "peer", i, "done", rs.done, "err", err)
	}
	switch {
	case err == nil:
		if kind == httpwire.RangeMulti {
			c.out = append(c.out, "\r\n--"...)
			c.out = append(c.out, rs.bnd[:]...)
			c.out = append(c.out, "--\r\n"...)
		}
		c.logRequest(now, status, length)
		c.served.ObjectBytes += length // from a holder's disk, not a memory
		return true, !closeAfter
	case !rs.started:
		// Nothing went out: take the head back and answer 502.
		c.out, c.segStart = c.out[:mark], seg
		clear(c.bufs[nbufs:])
		c.bufs = c.bufs[:nbufs]
		return true, c.noHolder(sel, now, closeAfter, false)
	default:
		// Part of the body went out and no holder could finish it: the
		// connection closes short of Content-Length.
		c.s.cfg.Logger.Warn("peer stream failed midway; closing the client connection", "url", sel.URL, "sent", rs.done, "err", err)
		c.logRequest(now, status, length)
		c.served.ObjectBytes += length // from a holder's disk, not a memory
		return true, false
	}
}

// remoteHead appends the response head for the ranges c.spans of kind
// rs.kind (a multipart boundary goes to rs.bnd) and returns the status and
// the body length.
func (c *conn) remoteHead(rs *rangeSink, sel *content.Entry, ctype, coding string, vary bool, rule *headerRule,
	now time.Time, closeAfter bool) (status int, length int64) {
	status, length = 200, sel.Size
	switch rs.kind {
	case httpwire.RangeSingle:
		// Like serveFile: a 206 carries no Accept-Ranges.
		s := c.spans[0]
		status, length = 206, s.Len()
		c.out = httpwire.AppendStatusLine(c.out, 206)
		c.out = httpwire.AppendHeader(c.out, "Content-Type", ctype)
		c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", length)
		c.out = httpwire.AppendContentRange(c.out, s.Start, s.End-1, sel.Size)
	case httpwire.RangeMulti:
		// serveMultipart's layout and boundary.
		n := c.s.boundary.Add(1)
		for i := len(rs.bnd) - 1; i >= 0; i-- {
			rs.bnd[i] = byte('0' + n%10)
			n /= 10
		}
		length = int64(len("\r\n--") + len(rs.bnd) + len("--\r\n"))
		for _, s := range c.spans {
			c.scratch = appendPartHead(c.scratch[:0], rs.bnd[:], ctype, s, sel.Size)
			length += int64(len(c.scratch)) + s.Len()
		}
		status = 206
		c.out = httpwire.AppendStatusLine(c.out, 206)
		c.out = append(c.out, "Content-Type: multipart/byteranges; boundary="...)
		c.out = append(c.out, rs.bnd[:]...)
		c.out = append(c.out, crlf...)
		c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", length)
	default:
		c.out = httpwire.AppendStatusLine(c.out, 200)
		c.out = httpwire.AppendHeader(c.out, "Content-Type", ctype)
		c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", sel.Size)
	}
	c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, string(httpwire.AppendHTTPDate(nil, sel.ModTime)), coding, vary)
	if rs.kind == httpwire.RangeNone {
		c.out = httpwire.AppendHeader(c.out, "Accept-Ranges", "bytes")
	}
	c.out = appendRule(c.out, rule, now)
	c.finish(now, closeAfter)
	return status, length
}

// rangeSink cuts the spans c.spans out of a holder's stream and writes
// them to the client (peer.Host.Stream's sink), across holders: done
// counts the representation's bytes already dealt with (sent when in a
// span, skipped otherwise), at is the current holder's position, si the
// span being sent, open whether its part head went out.
type rangeSink struct {
	c        *conn
	kind     httpwire.RangeKind
	ctype    string
	size     int64
	end      int64 // the last span's end: the stream is stopped there
	bnd      [20]byte
	done, at int64
	si       int
	open     bool
	started  bool // a body byte (or part head) went to the client
}

// write handles one chunk of the stream.
func (rs *rangeSink) write(chunk []byte) error {
	c := rs.c
	cs, ce := rs.at, rs.at+int64(len(chunk))
	rs.at = ce
	for rs.done < ce && rs.si < len(c.spans) {
		s := c.spans[rs.si]
		lo, hi := max(cs, rs.done, s.Start), min(ce, s.End)
		if lo >= hi {
			if ce <= s.Start {
				break
			}
			rs.si, rs.open = rs.si+1, false
			continue
		}
		if rs.kind == httpwire.RangeMulti && !rs.open {
			c.out = appendPartHead(c.out, rs.bnd[:], rs.ctype, s, rs.size)
			rs.open = true
		}
		if !rs.started || len(c.out) > 0 {
			rs.started = true
			if c.flush() != nil {
				return errClientGone
			}
		}
		n, err := c.nc.Write(chunk[lo-cs : hi-cs])
		c.nbytes += int64(n)
		c.since.Store(time.Now().UnixNano()) // progress, for WriteTimeout
		if err != nil {
			return errClientGone
		}
		rs.done = hi
	}
	rs.done = max(rs.done, ce)
	if rs.done >= rs.end && rs.at < rs.size {
		return errEnough // the rest is not wanted: stop the holder
	}
	return nil
}
