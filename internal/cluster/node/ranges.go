package node

import (
	"io"
	"os"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
)

// serveMultipart answers a request for several ranges with a 206
// multipart/byteranges body (RFC 9110 §14.6) laid out as nginx lays it out:
// each part is CRLF "--" boundary CRLF, Content-Type, Content-Range, a blank
// line and the bytes; the body ends with CRLF "--" boundary "--" CRLF. The
// boundary is a 20-digit counter, like nginx's. Cached bodies are sliced in
// place; others go out part by part with sendfile from f, opened (and
// confined to the root) before the head; serveMultipart closes it. The ranges are c.spans,
// already checked and coalesced by httpwire.ParseRanges.
func (c *conn) serveMultipart(o *object, f *os.File, sel *content.Entry, ctype, coding string, vary bool, rule *headerRule, lastMod string, now time.Time, closeAfter, head bool) bool {
	if f != nil {
		defer f.Close()
	}
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
	c.out = appendRepHeaders(c.out, c.s.cfg.ServerName, sel.ETag, lastMod, coding, vary)
	c.out = appendRule(c.out, rule, now)
	c.finish(now, closeAfter)
	if head {
		c.logRequest(now, 206, 0)
		return !closeAfter
	}
	c.logRequest(now, 206, total)
	for _, s := range c.spans {
		c.out = appendPartHead(c.out, bnd[:], ctype, s, sel.Size)
		if o != nil {
			c.appendBody(o.body[s.Start:s.End])
		} else if f == nil || !c.sendPart(f, s.Start, s.Len()) {
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

// sendPart flushes the pending output and streams length bytes of f from
// offset with sendfile(2), leaving f open for the next part (sendFile
// closes it). A short copy (the file shrank) ends the connection.
func (c *conn) sendPart(f *os.File, offset, length int64) bool {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		c.flush()
		return false
	}
	return c.copyFile(f, length)
}
