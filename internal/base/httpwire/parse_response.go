package httpwire

// This file is the response-head side of the wire layer, used by the
// front-end's relay (internal/cluster/front) to read what a node answers. It is as
// strict as the request parser where leniency would let a node's answer
// desynchronise a pooled connection (response splitting/smuggling):
// bare LF, obsolete folding, duplicate or malformed Content-Length,
// Content-Length together with Transfer-Encoding, chunked before another
// coding, and a Connection header naming a framing field are refused, and
// the relay answers 502 and drops the node connection.

// Response-head refusals; the relay turns each into a 502.
var (
	ErrBadStatusLine = &Error{502, "malformed status line"}      // RFC 9112 §4
	ErrBadStatus     = &Error{502, "status code not in 100-599"} // RFC 9110 §15
	// ErrRespConnectionOption: the response's Connection header names
	// Content-Length, Transfer-Encoding or Host (see ErrConnectionOption).
	ErrRespConnectionOption = &Error{502, "Connection names a framing field"} // RFC 9110 §7.6.1
)

// ResponseHead is a parsed response head. Byte slices alias the parsed
// buffer. Reuse one per connection: ParseResponse keeps Headers' capacity.
type ResponseHead struct {
	Minor  int    // HTTP/1.<Minor>
	Status int    // 100..599
	Reason []byte // may be empty
	// StatusLine is the status line without its CRLF.
	StatusLine []byte
	Headers    []Header

	// ContentLength is the declared body length, -1 if absent or
	// overridden by Transfer-Encoding.
	ContentLength int64
	// Chunked is set when Transfer-Encoding ends in chunked.
	Chunked bool
	// UntilClose is set when the body is delimited by the node closing the
	// connection: a Transfer-Encoding that does not end in chunked, or
	// neither length nor chunked on a status that has a body (RFC 9112 §6.3
	// rule 7). The connection cannot be reused.
	UntilClose bool
	// Close is set when the node will close the connection after this
	// response ("Connection: close", HTTP/1.0 without keep-alive, or an
	// until-close body).
	Close bool

	HeadLen int
}

// NoBody reports whether a response with this status never has a body
// (1xx, 204, 304; RFC 9112 §6.3 rule 1). HEAD responses also have none,
// which only the caller knows.
func (r *ResponseHead) NoBody() bool {
	return r.Status < 200 || r.Status == 204 || r.Status == 304
}

// ParseResponse parses one response head at the start of b, with at most
// maxHeaders fields (0 = DefaultMaxHeaders). It returns the head length on
// success and ErrNeedMore for an incomplete head; the caller bounds the head
// size by its buffer. Other errors are *Error values with Status 502.
func ParseResponse(b []byte, r *ResponseHead, maxHeaders int) (int, error) {
	if maxHeaders <= 0 {
		maxHeaders = DefaultMaxHeaders
	}
	*r = ResponseHead{Headers: r.Headers[:0], ContentLength: -1}
	i, err := r.statusLine(b)
	if err != nil {
		return 0, err
	}
	var closeTok, keepAlive, hasTE bool
	for {
		name, value, next, err := nextField(b, i, &r.Headers, maxHeaders)
		if err != nil {
			return 0, err
		}
		i = next
		if name == nil {
			break
		}
		switch len(name) {
		case 10:
			if eqFold(name, "connection") {
				var bad bool
				forEachToken(value, func(t []byte) {
					if eqFold(t, "close") {
						closeTok = true
					} else if eqFold(t, "keep-alive") {
						keepAlive = true
					} else if FramingField(t) {
						bad = true
					}
				})
				if bad {
					// A relay must drop what Connection names, and
					// cannot drop the framing it reads the body by.
					return 0, ErrRespConnectionOption
				}
			}
		case 14:
			if eqFold(name, "content-length") {
				if r.ContentLength >= 0 {
					return 0, ErrDupContentLength
				}
				n, ok := parseLength(value)
				if !ok {
					return 0, ErrBadContentLength
				}
				r.ContentLength = n
			}
		case 17:
			if eqFold(name, "transfer-encoding") {
				hasTE = true
				// The last coding decides the framing; chunked anywhere
				// else, in this field or an earlier one (fields combine
				// into one list), is a framing error.
				var bad bool
				forEachToken(value, func(t []byte) {
					if r.Chunked {
						bad = true
					}
					r.Chunked = eqFold(t, "chunked")
				})
				if bad {
					return 0, ErrBadTE
				}
			}
		}
	}
	if hasTE && r.ContentLength >= 0 {
		return 0, ErrLengthAndChunked
	}
	if hasTE && !r.Chunked {
		r.UntilClose = true
	}
	if !hasTE && r.ContentLength < 0 && !r.NoBody() {
		r.UntilClose = true
	}
	r.Close = closeTok || (r.Minor == 0 && !keepAlive) || r.UntilClose
	r.HeadLen = i
	return i, nil
}

// statusLine parses "HTTP/1.x SP 3DIGIT SP reason CRLF" (RFC 9112 §4) at the
// start of b into r and returns the offset after its CRLF. A missing
// SP+reason ("HTTP/1.1 200\r\n") is accepted, as RFC 9112 §4 lets a client
// tolerate.
func (r *ResponseHead) statusLine(b []byte) (int, error) {
	const minLine = len("HTTP/1.1 200")
	for x := 0; x < len(b) && x < len(versionPrefix); x++ {
		if b[x] != versionPrefix[x] {
			return 0, ErrBadStatusLine
		}
	}
	if len(b) < minLine+1 {
		return 0, ErrNeedMore
	}
	if b[5] != '1' || b[6] != '.' || b[7] < '0' || b[7] > '9' || b[8] != ' ' {
		return 0, ErrBadStatusLine
	}
	r.Minor = int(b[7] - '0')
	if r.Minor > 1 {
		r.Minor = 1
	}
	st := 0
	for _, c := range b[9:12] {
		if c < '0' || c > '9' {
			return 0, ErrBadStatus
		}
		st = st*10 + int(c-'0')
	}
	if st < 100 || st > 599 {
		return 0, ErrBadStatus
	}
	r.Status = st
	i := 12
	if b[i] == ' ' {
		i++
		j := i
		for j < len(b) && vchar[b[j]] {
			j++
		}
		if j == len(b) {
			return 0, ErrNeedMore
		}
		r.Reason = b[i:j]
		i = j
	}
	if b[i] != '\r' {
		return 0, classify(b[i], ErrBadStatusLine)
	}
	if i+1 >= len(b) {
		return 0, ErrNeedMore
	}
	if b[i+1] != '\n' {
		return 0, ErrBareCR
	}
	r.StatusLine = b[:i]
	return i + 2, nil
}
