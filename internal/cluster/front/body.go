package front

import (
	"errors"
	"io"
	"net"
	"time"

	"shoal/internal/base/httpwire"
)

// spliceMin is the body remainder from which streaming goes socket to socket
// through io.Copy over an io.LimitedReader, which the net package turns into splice(2) between two
// TCP connections (no copy through user space). Below it a read/write loop
// through the connection's own buffer costs fewer system calls.
const spliceMin = 32 << 10

// spliceStep bounds one spliceN so deadlines are refreshed while a large
// body streams: a stalled peer is cut, a slow but live one is not (one that
// takes at least spliceStep per timeout, close to nginx's send_timeout
// between two writes).
const spliceStep = 256 << 10

// inbuf is a connection's read buffer: bytes b[r:w] are read and not yet
// consumed. It never grows, which bounds per-connection memory.
type inbuf struct {
	b    []byte
	r, w int
}

var errBufFull = errors.New("buffer full")

func (ib *inbuf) bytes() []byte { return ib.b[ib.r:ib.w] }
func (ib *inbuf) len() int      { return ib.w - ib.r }

func (ib *inbuf) consume(n int) {
	ib.r += n
	if ib.r >= ib.w {
		ib.r, ib.w = 0, 0
	}
}

// fill reads once from c into the free space, compacting first when the
// unread bytes sit at the end of the buffer.
func (ib *inbuf) fill(c net.Conn) (int, error) {
	if ib.w == len(ib.b) {
		if ib.r == 0 {
			return 0, errBufFull
		}
		ib.w = copy(ib.b, ib.b[ib.r:ib.w])
		ib.r = 0
	}
	n, err := c.Read(ib.b[ib.w:])
	ib.w += n
	return n, err
}

// deadline keeps the deadline last set on a connection so that the hot path
// can skip re-arming a timer for every request: the deadline is moved only
// when the wanted one is earlier, or later by more than an eighth of the
// timeout. Timeouts are thus exact to within 1/8 on the long side, which is
// what an idle or stall timeout needs.
type deadline struct{ at int64 }

func (d *deadline) setRead(c net.Conn, now int64, timeout time.Duration) {
	want := now + int64(timeout)
	if want < d.at || want-d.at > int64(timeout)/8 {
		d.at = want
		c.SetReadDeadline(time.Unix(0, want))
	}
}

func (d *deadline) setWrite(c net.Conn, now int64, timeout time.Duration) {
	want := now + int64(timeout)
	if want < d.at || want-d.at > int64(timeout)/8 {
		d.at = want
		c.SetWriteDeadline(time.Unix(0, want))
	}
}

// pipe is one direction of a body transfer: from a buffered source to dst,
// with the deadlines to refresh while it runs.
type pipe struct {
	dst    net.Conn
	dstDL  *deadline
	src    net.Conn
	srcBuf *inbuf
	srcDL  *deadline
	rto    time.Duration     // read stall timeout on src
	wto    time.Duration     // write stall timeout on dst
	lr     *io.LimitedReader // reused by spliceN, so streaming does not allocate
}

// spliceN copies up to k bytes from the source socket to dst, which the
// net package does with splice(2) when both are TCP connections. It returns
// io.EOF when the source ended before k bytes (as io.CopyN does).
func (p *pipe) spliceN(k int64) (int64, error) {
	p.lr.R, p.lr.N = p.src, k
	w, err := io.Copy(p.dst, p.lr)
	p.lr.R = nil
	if err == nil && w < k {
		err = io.EOF
	}
	return w, err
}

func (p *pipe) arm() {
	now := time.Now().UnixNano()
	p.srcDL.setRead(p.src, now, p.rto)
	p.dstDL.setWrite(p.dst, now, p.wto)
}

// copyN moves exactly n bytes: the buffered ones first, then the rest
// straight from the source socket (spliced when large). It returns the bytes
// written; io.ErrUnexpectedEOF if the source ended early.
func (p *pipe) copyN(n int64) (int64, error) {
	var done int64
	if m := int64(p.srcBuf.len()); m > 0 {
		if m > n {
			m = n
		}
		w, err := p.dst.Write(p.srcBuf.bytes()[:m])
		p.srcBuf.consume(w)
		done += int64(w)
		if err != nil {
			return done, err
		}
	}
	for done < n {
		rem := n - done
		p.arm()
		if rem >= spliceMin {
			k := rem
			if k > spliceStep {
				k = spliceStep
			}
			w, err := p.spliceN(k)
			done += w
			if err == io.EOF {
				return done, io.ErrUnexpectedEOF
			}
			if err != nil {
				return done, err
			}
			continue
		}
		r, err := p.srcBuf.fill(p.src)
		if r > 0 {
			m := int64(p.srcBuf.len())
			if m > rem {
				m = rem
			}
			w, werr := p.dst.Write(p.srcBuf.bytes()[:m])
			p.srcBuf.consume(w)
			done += int64(w)
			if werr != nil {
				return done, werr
			}
		}
		if err != nil {
			if err == io.EOF && done < n {
				return done, io.ErrUnexpectedEOF
			}
			return done, err
		}
	}
	return done, nil
}

// copyUntilClose moves the buffered bytes and then everything the source
// sends until it closes (a response without length or chunking).
func (p *pipe) copyUntilClose() (int64, error) {
	var done int64
	if m := p.srcBuf.len(); m > 0 {
		w, err := p.dst.Write(p.srcBuf.bytes())
		p.srcBuf.consume(w)
		done += int64(w)
		if err != nil {
			return done, err
		}
	}
	for {
		p.arm()
		w, err := p.spliceN(spliceStep)
		done += w
		if err == io.EOF {
			return done, nil
		}
		if err != nil {
			return done, err
		}
	}
}

// copyChunked moves a chunked body, validating its framing so the end is
// found exactly (the connection stays reusable) and nothing past it is
// taken. With strip set only the chunk data is written (de-chunking for an
// HTTP/1.0 client); otherwise the bytes pass through unchanged.
func (p *pipe) copyChunked(strip bool) (int64, error) {
	var ch chunker
	var done int64
	for {
		buf := p.srcBuf.bytes()
		if len(buf) == 0 {
			if ch.state == chData && ch.left >= spliceMin {
				// A large chunk with nothing buffered: splice its data.
				p.arm()
				k := ch.left
				if k > spliceStep {
					k = spliceStep
				}
				w, err := p.spliceN(k)
				done += w
				ch.left -= w
				if ch.left == 0 {
					ch.state = chDataCR
				}
				if err == io.EOF {
					return done, io.ErrUnexpectedEOF
				}
				if err != nil {
					return done, err
				}
				continue
			}
			p.arm()
			if _, err := p.srcBuf.fill(p.src); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				if p.srcBuf.len() == 0 {
					return done, err
				}
			}
			continue
		}
		// Scan as much as is buffered; pass it on in one write.
		var n int
		var end bool
		for n < len(buf) && !end {
			k, d0, d1, fin, err := ch.scan(buf[n:])
			if err != nil {
				return done, err
			}
			if strip && d1 > d0 {
				w, werr := p.dst.Write(buf[n+d0 : n+d1])
				done += int64(w)
				if werr != nil {
					return done, werr
				}
			}
			n += k
			end = fin
		}
		if !strip {
			w, err := p.dst.Write(buf[:n])
			done += int64(w)
			if err != nil {
				return done, err
			}
		}
		p.srcBuf.consume(n)
		if end {
			return done, nil
		}
	}
}

// Chunked-coding parser states (RFC 9112 §7.1).
const (
	chSize    = iota
	chSizeBWS // after the size: BWS, then ";" or CRLF
	chExt
	chSizeLF
	chData
	chDataCR
	chDataLF
	chTrailerStart
	chTrailerName
	chTrailer
	chTrailerLF
	chEndLF
	chDone
)

// ctl reports a control byte that may not appear in a chunk extension or
// a trailer field value (RFC 9110 §5.5: field-vchar, SP and HTAB only).
func ctl(b byte) bool { return b < 0x20 && b != '\t' || b == 0x7f }

var errBadChunk = errors.New("malformed chunked body")

// maxChunkLine bounds a chunk-size line with extensions, and each trailer
// field, so a peer cannot make the scanner run forever on one line.
const maxChunkLine = 4096

// chunker finds the frame boundaries of a chunked body.
type chunker struct {
	state   int
	left    int64 // chunk data bytes still to come
	digits  int
	lineLen int
	last    bool // the zero-size chunk was seen
}

// scan consumes a prefix of p: framing bytes up to and including at most one
// run of chunk data, which it reports as p[d0:d1]. fin is set when the final
// CRLF has been consumed; nothing after it is consumed.
func (c *chunker) scan(p []byte) (n, d0, d1 int, fin bool, err error) {
	for n < len(p) {
		b := p[n]
		switch c.state {
		case chSize:
			v, ok := unhex(b)
			if ok {
				if c.digits == 15 {
					return n, 0, 0, false, errBadChunk
				}
				c.left = c.left<<4 | int64(v)
				c.digits++
				n++
				continue
			}
			if c.digits == 0 {
				return n, 0, 0, false, errBadChunk
			}
			c.state = chSizeBWS
			c.lineLen = c.digits
			continue
		case chSizeBWS:
			if !c.sizeBWS(b) {
				return n, 0, 0, false, errBadChunk
			}
			n++
		case chExt:
			if !c.lineByte(b, chSizeLF) {
				return n, 0, 0, false, errBadChunk
			}
			n++
		case chSizeLF:
			if b != '\n' {
				return n, 0, 0, false, errBadChunk
			}
			n++
			c.digits = 0
			if c.left == 0 {
				c.last = true
				c.state = chTrailerStart
			} else {
				c.state = chData
			}
		case chData:
			k := int64(len(p) - n)
			if k > c.left {
				k = c.left
			}
			d0, d1 = n, n+int(k)
			n += int(k)
			c.left -= k
			if c.left == 0 {
				c.state = chDataCR
			}
			return n, d0, d1, false, nil
		case chDataCR, chDataLF, chTrailerLF:
			if !c.expect(b) {
				return n, 0, 0, false, errBadChunk
			}
			n++
		case chTrailerStart, chTrailerName, chTrailer:
			if !c.trailerByte(b) {
				return n, 0, 0, false, errBadChunk
			}
			n++
		case chEndLF:
			if b != '\n' {
				return n, 0, 0, false, errBadChunk
			}
			c.state = chDone
			return n + 1, 0, 0, true, nil
		case chDone:
			return n, 0, 0, true, nil
		}
	}
	return n, 0, 0, false, nil
}

// sizeBWS takes one byte after a chunk size. chunk-ext = *( BWS ";" BWS
// ext-name [ BWS "=" BWS ext-val ] ): anything but blanks, ";" or CR after
// the size is refused, as the nodes and HAProxy refuse it.
func (c *chunker) sizeBWS(b byte) bool {
	switch b {
	case '\r':
		c.state = chSizeLF
	case ';':
		c.state = chExt
	case ' ', '\t':
	default:
		return false
	}
	c.lineLen++
	return c.lineLen <= maxChunkLine
}

// trailerByte takes one byte of a trailer section. A trailer is a field
// line, name ":" value (RFC 9112 §7.1.2): no obsolete folding, no empty or
// malformed name; an empty line (its CR here) ends the body.
func (c *chunker) trailerByte(b byte) bool {
	switch c.state {
	case chTrailerStart:
		switch {
		case b == '\r':
			c.state = chEndLF
		case httpwire.TokenChar(b):
			c.state = chTrailerName
			c.lineLen = 1
		default:
			return false
		}
		return true
	case chTrailerName:
		if b == ':' {
			c.state = chTrailer
		} else if !httpwire.TokenChar(b) {
			return false
		}
		c.lineLen++
		return c.lineLen <= maxChunkLine
	}
	return c.lineByte(b, chTrailerLF)
}

// lineByte takes one byte of a chunk extension or a trailer value: CR ends
// the line (next state: its LF), a control byte or an overlong line is
// refused.
func (c *chunker) lineByte(b byte, next int) bool {
	if b == '\r' {
		c.state = next
		return true
	}
	c.lineLen++
	return !ctl(b) && c.lineLen <= maxChunkLine
}

// expect takes the one byte the states between fields allow (chDataCR's
// CR, then LF) and moves on.
func (c *chunker) expect(b byte) bool {
	want, next := byte('\n'), chSize
	switch c.state {
	case chDataCR:
		want, next = '\r', chDataLF
	case chTrailerLF:
		next = chTrailerStart
	}
	if b != want {
		return false
	}
	c.state = next
	return true
}

func unhex(b byte) (byte, bool) {
	switch {
	case b >= '0' && b <= '9':
		return b - '0', true
	case b >= 'a' && b <= 'f':
		return b - 'a' + 10, true
	case b >= 'A' && b <= 'F':
		return b - 'A' + 10, true
	}
	return 0, false
}
