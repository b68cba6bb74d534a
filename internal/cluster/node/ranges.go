package node

import (
	"time"

	"shoal/internal/base/httpwire"
)

// serveMultipart answers a request for several ranges with a 206
// multipart/byteranges body (RFC 9110 §14.6) laid out as nginx lays it out:
// each part is CRLF "--" boundary CRLF, Content-Type, Content-Range, a blank
// line and the bytes; the body ends with CRLF "--" boundary "--" CRLF. The
// boundary is a 20-digit counter, like nginx's. Each part's bytes come
// from r's body (sendBody). The ranges are c.spans, already checked and
// coalesced by httpwire.ParseRanges.
func (c *conn) serveMultipart(r *reply, lastMod string, now time.Time, closeAfter, head bool) bool {
	sel, ctype := r.sel, r.ctype
	var bnd [20]byte
	n := c.s.boundary.Add(1)
	for i := len(bnd) - 1; i >= 0; i-- {
		bnd[i] = byte('0' + n%10)
		n /= 10
	}
	var total int64
	for _, s := range c.spans {
		c.scratch = appendPartHead(c.scratch[:0], bnd[:], ctype, s, sel.Size)
		total += int64(len(c.scratch)) + s.Len()
	}
	total += int64(len("\r\n--") + len(bnd) + len("--\r\n"))

	c.out = httpwire.AppendStatusLine(c.out, 206)
	c.out = append(c.out, "Content-Type: multipart/byteranges; boundary="...)
	c.out = append(c.out, bnd[:]...)
	c.out = append(c.out, crlf...)
	c.out = httpwire.AppendHeaderInt(c.out, "Content-Length", total)
	c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, r.coding, r.vary)
	c.out = appendRule(c.out, r.rule, now)
	c.finish(now, closeAfter)
	if head {
		c.logRequest(now, 206, 0)
		return !closeAfter
	}
	c.logRequest(now, 206, total)
	for _, s := range c.spans {
		c.out = appendPartHead(c.out, bnd[:], ctype, s, sel.Size)
		if !c.sendBody(r, s.Start, s.Len()) {
			return false
		}
	}
	c.out = append(c.out, "\r\n--"...)
	c.out = append(c.out, bnd[:]...)
	c.out = append(c.out, "--\r\n"...)
	return !closeAfter
}

// appendPartHead appends the delimiter and headers of one body part.
func appendPartHead(dst, bnd []byte, ctype string, s httpwire.Span, size int64) []byte {
	dst = append(dst, "\r\n--"...)
	dst = append(dst, bnd...)
	dst = append(dst, "\r\nContent-Type: "...)
	dst = append(dst, ctype...)
	dst = append(dst, "\r\nContent-Range: bytes "...)
	dst = appendInt(dst, s.Start)
	dst = append(dst, '-')
	dst = appendInt(dst, s.End-1)
	dst = append(dst, '/')
	dst = appendInt(dst, size)
	return append(dst, "\r\n\r\n"...)
}

// appendBody queues a slice of a cached body: copied into the output when
// small, referenced for writev otherwise.
func (c *conn) appendBody(body []byte) {
	if len(body) <= inlineBody {
		c.out = append(c.out, body...)
		return
	}
	c.bufs = append(c.bufs, c.out[c.segStart:], body)
	c.segStart = len(c.out)
}
