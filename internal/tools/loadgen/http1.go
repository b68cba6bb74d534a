package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// This file is the hand-written HTTP/1.1 response reader used on the hot
// path. net/http allocates per request and runs a reader and a writer
// goroutine per connection; a load generator built on it cannot out-run the
// servers it measures (SPEC §7 asks that the generator never be the
// bottleneck). The reader below parses just what a client must: the status
// line, Content-Length, Transfer-Encoding: chunked and Connection, and it
// discards the body without copying it anywhere.

// Errors returned by the response reader; each maps to one ErrorKind.
var (
	// errProtocol wraps every malformed-response error (kind "protocol").
	errProtocol = errors.New("protocol error")
	// errShortBody means the connection ended inside a body ("short_body").
	errShortBody = errors.New("short body")
	// errPeerClosed means the connection ended before any response byte
	// arrived (kind "reset": the peer closed or reset the connection).
	errPeerClosed = errors.New("connection closed before response")
)

// defaultBufSize is the per-connection read buffer; it bounds the header
// block (as nginx's large_client_header_buffers bounds a request's).
const defaultBufSize = 16 << 10

// response is what the reader learnt about one response.
type response struct {
	status    int
	bodyBytes int64 // body bytes (decoded length for chunked)
	wireBytes int64 // bytes consumed from the connection (status line … end of body)
	close     bool  // the connection cannot be reused after this response
}

// respReader reads responses from one connection. It owns a fixed buffer;
// no allocation happens per response.
type respReader struct {
	rd   io.Reader
	buf  []byte
	r, w int   // unread data is buf[r:w]
	n    int64 // bytes consumed by the current response
}

func newRespReader(rd io.Reader, size int) *respReader {
	if size <= 0 {
		size = defaultBufSize
	}
	return &respReader{rd: rd, buf: make([]byte, size)}
}

// reset forgets buffered bytes (used when the connection is replaced).
func (p *respReader) reset(rd io.Reader) { p.rd, p.r, p.w = rd, 0, 0 }

// buffered is the number of bytes read but not yet parsed.
func (p *respReader) buffered() int { return p.w - p.r }

// fill reads more bytes, compacting first when the buffer tail is full.
func (p *respReader) fill() error {
	if p.r > 0 && (p.r == p.w || p.w == len(p.buf)) {
		copy(p.buf, p.buf[p.r:p.w])
		p.w -= p.r
		p.r = 0
	}
	if p.w == len(p.buf) {
		return fmt.Errorf("%w: header line longer than %d bytes", errProtocol, len(p.buf))
	}
	for i := 0; i < 100; i++ {
		n, err := p.rd.Read(p.buf[p.w:])
		p.w += n
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// line returns the next line without its CR LF (a bare LF is accepted, as
// every real client does). The slice aliases the buffer and is valid until
// the next call.
func (p *respReader) line() ([]byte, error) {
	scanned := 0
	for {
		if i := bytes.IndexByte(p.buf[p.r+scanned:p.w], '\n'); i >= 0 {
			end := p.r + scanned + i
			l := p.buf[p.r:end]
			p.n += int64(end + 1 - p.r)
			p.r = end + 1
			if len(l) > 0 && l[len(l)-1] == '\r' {
				l = l[:len(l)-1]
			}
			return l, nil
		}
		scanned = p.w - p.r
		if err := p.fill(); err != nil {
			return nil, err
		}
	}
}

// read parses one complete response to a request of the given method and
// discards its body. Errors are the sentinel errors above (wrapped) or the
// connection's own error.
func (p *respReader) read(head bool) (response, error) {
	for {
		resp, err := p.readOne(head)
		if err != nil {
			return resp, err
		}
		// 1xx interim responses (100 Continue, 103 Early Hints) precede
		// the real one; 101 would switch protocols, which we never ask for.
		if resp.status >= 100 && resp.status < 200 && resp.status != 101 {
			continue
		}
		if resp.status == 101 {
			return resp, fmt.Errorf("%w: unexpected 101 Switching Protocols", errProtocol)
		}
		return resp, nil
	}
}

func (p *respReader) readOne(head bool) (resp response, err error) {
	p.n = 0
	if p.r == p.w {
		if err := p.fill(); err != nil {
			if errors.Is(err, io.EOF) {
				return resp, errPeerClosed
			}
			return resp, err
		}
	}
	resp, contentLength, chunked, err := p.readHead()
	if err != nil {
		return resp, err
	}
	if head || resp.status < 200 || resp.status == 204 || resp.status == 304 {
		return resp, nil
	}
	switch {
	case chunked: // RFC 9112 §6.3: chunked overrides Content-Length
		err = p.chunkedBody(&resp)
	case contentLength >= 0:
		err = p.skip(contentLength, &resp)
	default: // close-delimited
		resp.close = true
		err = p.skip(-1, &resp)
	}
	resp.wireBytes = p.n
	return resp, err
}

// readHead parses a response's status line and header fields: the status,
// whether the connection closes after it, and how the body is framed
// (contentLength -1 when not given).
func (p *respReader) readHead() (resp response, contentLength int64, chunked bool, err error) {
	contentLength = -1
	l, err := p.line()
	if err != nil {
		return resp, contentLength, false, eofAs(err, errProtocol, "truncated status line")
	}
	// "HTTP/1.1 200 OK": version, space, three digits, then space or end.
	if len(l) < 12 || !bytes.HasPrefix(l, []byte("HTTP/1.")) || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
		!isDigit(l[9]) || !isDigit(l[10]) || !isDigit(l[11]) || (len(l) > 12 && l[12] != ' ') {
		return resp, contentLength, false, fmt.Errorf("%w: bad status line %q", errProtocol, clip(l))
	}
	http10 := l[7] == '0'
	resp.status = int(l[9]-'0')*100 + int(l[10]-'0')*10 + int(l[11]-'0')
	resp.close = http10 // HTTP/1.0 closes unless it says keep-alive
	for {
		l, err = p.line()
		if err != nil {
			return resp, contentLength, chunked, eofAs(err, errProtocol, "truncated header")
		}
		if len(l) == 0 {
			break
		}
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 {
			return resp, contentLength, chunked, fmt.Errorf("%w: bad header line %q", errProtocol, clip(l))
		}
		name := l[:colon]
		switch {
		case headerIs(name, "content-length"):
			value := bytes.TrimSpace(l[colon+1:])
			n, ok := parseDecimal(value)
			if !ok || (contentLength >= 0 && n != contentLength) {
				return resp, contentLength, chunked, fmt.Errorf("%w: bad Content-Length %q", errProtocol, clip(value))
			}
			contentLength = n
		case headerIs(name, "transfer-encoding"):
			// Only a final "chunked" coding makes the length knowable.
			value := bytes.TrimSpace(l[colon+1:])
			if !hasTokenLast(value, "chunked") {
				return resp, contentLength, chunked, fmt.Errorf("%w: unsupported Transfer-Encoding %q", errProtocol, clip(value))
			}
			chunked = true
		case headerIs(name, "connection"):
			value := l[colon+1:]
			if hasToken(value, "close") {
				resp.close = true
			} else if http10 && hasToken(value, "keep-alive") {
				resp.close = false
			}
		}
	}
	resp.wireBytes = p.n
	return resp, contentLength, chunked, nil
}

// discarder is a reader that can drop bytes without copying them
// (plainConn: recv with MSG_TRUNC).
type discarder interface {
	discard(n int) (int, error)
}

// maxDiscard bounds one discard call.
const maxDiscard = 1 << 30

// skip discards n body bytes (n < 0: until EOF). Once the buffer is empty,
// a known remainder is dropped in the socket when the reader can
// (discarder): nothing follows a body before the next request is sent, so
// the buffer has nothing to gain.
func (p *respReader) skip(n int64, resp *response) error {
	d, _ := p.rd.(discarder)
	for n != 0 {
		if p.r == p.w && n > 0 && d != nil {
			k, err := d.discard(int(min(n, maxDiscard)))
			p.n += int64(k)
			resp.bodyBytes += int64(k)
			n -= int64(k)
			if err != nil {
				return eofAs(err, errShortBody, "")
			}
			continue
		}
		if p.r == p.w {
			p.r, p.w = 0, 0
			if err := p.fill(); err != nil {
				if n < 0 && errors.Is(err, io.EOF) {
					return nil
				}
				return eofAs(err, errShortBody, "")
			}
		}
		k := int64(p.w - p.r)
		if n >= 0 && k > n {
			k = n
		}
		p.r += int(k)
		p.n += k
		resp.bodyBytes += k
		if n > 0 {
			n -= k
		}
	}
	return nil
}

func (p *respReader) chunkedBody(resp *response) error {
	for {
		l, err := p.line()
		if err != nil {
			return eofAs(err, errShortBody, "")
		}
		if i := bytes.IndexByte(l, ';'); i >= 0 { // chunk extensions
			l = l[:i]
		}
		size, ok := parseHex(bytes.TrimSpace(l))
		if !ok {
			return fmt.Errorf("%w: bad chunk size %q", errProtocol, clip(l))
		}
		if size == 0 {
			break
		}
		if err := p.skip(size, resp); err != nil {
			return err
		}
		l, err = p.line()
		if err != nil {
			return eofAs(err, errShortBody, "")
		}
		if len(l) != 0 {
			return fmt.Errorf("%w: chunk not followed by CRLF", errProtocol)
		}
	}
	for { // trailer section
		l, err := p.line()
		if err != nil {
			return eofAs(err, errShortBody, "")
		}
		if len(l) == 0 {
			return nil
		}
	}
}

// eofAs turns an end-of-stream into the given sentinel; other errors pass.
func eofAs(err, sentinel error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if what == "" {
			return sentinel
		}
		return fmt.Errorf("%w: %s", sentinel, what)
	}
	return err
}

// headerIs compares a header name with a lower-case ASCII name, ignoring
// case; cheaper than bytes.EqualFold, which must handle Unicode, and the
// length check rejects most headers at once.
func headerIs(name []byte, lower string) bool {
	if len(name) != len(lower) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseDecimal parses a non-negative decimal that fits in 62 bits.
func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseHex parses a chunk size (at most 15 hex digits, so it fits int64).
func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

// hasToken reports whether the comma-separated list v holds tok
// (case-insensitive).
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var t []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			t, v = v[:i], v[i+1:]
		} else {
			t, v = v, nil
		}
		if bytes.EqualFold(bytes.TrimSpace(t), []byte(tok)) {
			return true
		}
	}
	return false
}

// hasTokenLast reports whether the last element of the list v is tok.
func hasTokenLast(v []byte, tok string) bool {
	if i := bytes.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return bytes.EqualFold(bytes.TrimSpace(v), []byte(tok))
}

// clip shortens b for error messages (a garbage response can be huge).
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
