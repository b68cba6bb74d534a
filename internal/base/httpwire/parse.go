package httpwire

// DefaultMaxHead is the default limit on the size of a request head (request
// line, header fields and the blank line), the same order as nginx's
// large_client_header_buffers and HAProxy's tune.bufsize share for the head.
const DefaultMaxHead = 8 << 10

// DefaultMaxHeaders is the default limit on the number of header fields; a
// head with more is refused with 431 like an oversized one.
const DefaultMaxHeaders = 100

// ForwardHeadroom and ForwardFields bound what a front-end adds to a request
// head it accepted before passing it to a node: X-Forwarded-For (at most
// 17+39+2 bytes for an IPv6 client), a Host for an HTTP/1.0 request without
// one (6+len(host:port)+2), and ": " where the client wrote ":". A node's
// head limit is its front's plus ForwardHeadroom, and its field limit its
// front's plus ForwardFields, so that no head the front accepted is refused
// by the node because of what the front added; the front refuses
// with 431 a rewrite that would not fit.
const (
	ForwardHeadroom = 1024
	ForwardFields   = 2
)

// Error is a refusal of a request head. Status is the HTTP status the server
// should answer with before closing the connection. Errors are preallocated
// values so that refusing bad input does not allocate either; compare with
// errors.Is or ==.
type Error struct {
	Status int    // 400, 431, 501 or 505
	Reason string // short, fixed text; never echoes input
}

func (e *Error) Error() string { return "httpwire: " + e.Reason }

// ErrNeedMore means the buffer holds an incomplete head that is still within
// the size limit: read more bytes and parse again from the same start.
var ErrNeedMore = &Error{Status: 0, Reason: "incomplete request head"}

// Refusals. Each names the rule it enforces (RFC 9112 section in brackets).
var (
	ErrTooLarge         = &Error{431, "request head too large"}                    // limit
	ErrTooManyHeaders   = &Error{431, "too many header fields"}                    // limit
	ErrBareLF           = &Error{400, "bare LF line terminator"}                   // [2.2]
	ErrBareCR           = &Error{400, "bare CR"}                                   // [2.2]
	ErrNUL              = &Error{400, "NUL byte in request head"}                  // [5.5]
	ErrBadMethod        = &Error{400, "invalid method token"}                      // [3.1]
	ErrBadTarget        = &Error{400, "invalid request-target"}                    // [3.2]
	ErrBadRequestLine   = &Error{400, "malformed request line"}                    // [3]
	ErrBadVersion       = &Error{400, "malformed HTTP version"}                    // [2.3]
	ErrVersion          = &Error{505, "HTTP version not supported"}                // [2.3]
	ErrObsFold          = &Error{400, "obsolete line folding"}                     // [5.2]
	ErrBadHeaderName    = &Error{400, "invalid header field name"}                 // [5.1]
	ErrBadHeaderValue   = &Error{400, "invalid header field value"}                // [5.5]
	ErrBadContentLength = &Error{400, "invalid Content-Length"}                    // [6.3]
	ErrDupContentLength = &Error{400, "duplicate Content-Length"}                  // [6.3]
	ErrLengthAndChunked = &Error{400, "both Transfer-Encoding and Content-Length"} // [6.3]
	ErrBadTE            = &Error{400, "chunked is not the final transfer coding"}  // [6.3]
	ErrUnknownTE        = &Error{501, "unsupported transfer coding"}               // [6.1]
	ErrTEOnHTTP10       = &Error{400, "Transfer-Encoding in an HTTP/1.0 request"}  // [6.1]
	ErrMissingHost      = &Error{400, "missing Host header"}                       // [3.2]
	ErrDupHost          = &Error{400, "more than one Host header"}
	ErrBadHost          = &Error{400, "invalid Host header"} // [3.2]
	// ErrConnectionOption refuses a Connection header that names
	// Content-Length, Transfer-Encoding or Host. RFC 9110 §7.6.1 makes a
	// proxy remove every field its Connection header names, and forbids a
	// sender to name a field meant for all recipients; these three frame
	// and route the message at every hop, so a proxy that removed them
	// would forward a body its node reads as the next request.
	// HAProxy 2.6 instead ignores such options and keeps the fields;
	// refusing is the one choice that both honours §7.6.1 and cannot
	// desynchronise a pooled node connection.
	ErrConnectionOption = &Error{400, "Connection names a framing or routing field"} // RFC 9110 §7.6.1
	// ErrTargetForm refuses a request-target whose form does not fit the
	// method (RFC 9112 §3.2): authority-form outside CONNECT, asterisk-form
	// outside OPTIONS, and absolute-form with a scheme other than http or
	// https or with an empty host (RFC 9110 §4.2.1).
	ErrTargetForm = &Error{400, "request-target form not allowed"} // [3.2]
)

// Header is one header field as it appeared on the wire: Name as sent (case
// preserved), Value with surrounding whitespace removed.
type Header struct {
	Name, Value []byte
}

// Request is a parsed request head. All byte slices alias the parsed buffer
// and are valid only until the caller overwrites it. Reuse one Request per
// connection: Parse resets it and keeps the Headers capacity.
type Request struct {
	Method  []byte
	Target  []byte // request-target exactly as sent
	Minor   int    // HTTP/1.<Minor>: 0 or 1
	Headers []Header

	// ContentLength is the declared body length, -1 if absent.
	ContentLength int64
	// Chunked is set when Transfer-Encoding ends in chunked.
	Chunked bool
	// Close is set when the connection must close after the response:
	// "Connection: close", or HTTP/1.0 without "Connection: keep-alive".
	Close bool
	// KeepAlive is set when an explicit keep-alive token was sent.
	KeepAlive bool

	HasHost         bool
	Host            []byte
	IfNoneMatch     []byte // nil if absent; repeated fields are not merged (the first wins)
	IfModifiedSince []byte
	Range           []byte

	// HeadLen is the number of bytes the head occupied, including any
	// leading blank lines; the body or the next pipelined request starts there.
	HeadLen int

	hasTE bool
}

// Path returns the request-target's path: up to (not including) '?' or '#',
// and for an absolute-form target only the part after the authority ("/"
// when there is none), so that "http://h/a" is routed, cached and served as
// "/a" by the front and the nodes alike. Asterisk- and authority-form
// targets are returned as they are.
func (r *Request) Path() []byte {
	t := r.Target
	if len(t) > 0 && t[0] != '/' && t[0] != '*' {
		for i := 0; i+2 < len(t); i++ {
			if t[i] == ':' && t[i+1] == '/' && t[i+2] == '/' {
				j := i + 3
				for j < len(t) && t[j] != '/' && t[j] != '?' {
					j++
				}
				if j == len(t) || t[j] != '/' {
					return rootPath
				}
				t = t[j:]
				break
			}
		}
	}
	for i, c := range t {
		if c == '?' || c == '#' {
			return t[:i]
		}
	}
	return t
}

// rootPath is Path's answer for an absolute-form target without a path.
// Callers only read it.
var rootPath = []byte("/")

// HasBody reports whether a body follows the head.
func (r *Request) HasBody() bool { return r.Chunked || r.ContentLength > 0 }

// IsMethod reports whether the method equals m (methods are case-sensitive).
func (r *Request) IsMethod(m string) bool { return string(r.Method) == m }

func (r *Request) reset() {
	hs := r.Headers[:0]
	*r = Request{Headers: hs, ContentLength: -1}
}

// Parser holds the limits for Parse. The zero value uses DefaultMaxHead and
// DefaultMaxHeaders.
type Parser struct {
	MaxHead    int // bytes; 0 = DefaultMaxHead
	MaxHeaders int // fields; 0 = DefaultMaxHeaders
}

// Parse parses one request head at the start of b into r. It returns the
// head's length (also r.HeadLen) on success; ErrNeedMore if b holds an
// incomplete head shorter than the limit; or an *Error to answer with its
// Status before closing the connection. It never reads past the head, so
// pipelined requests are parsed by calling Parse again on b[n:] (after
// skipping any body).
func (p Parser) Parse(b []byte, r *Request) (int, error) {
	maxHead := p.MaxHead
	if maxHead <= 0 {
		maxHead = DefaultMaxHead
	}
	maxHeaders := p.MaxHeaders
	if maxHeaders <= 0 {
		maxHeaders = DefaultMaxHeaders
	}
	n, err := parse(b, r, maxHeaders)
	if err == ErrNeedMore {
		if len(b) >= maxHead {
			return 0, ErrTooLarge
		}
		return 0, ErrNeedMore
	}
	if err != nil {
		return 0, err
	}
	if n > maxHead {
		return 0, ErrTooLarge
	}
	r.HeadLen = n
	return n, nil
}

// ParseRequest parses with the default limits; see Parser.Parse.
func ParseRequest(b []byte, r *Request) (int, error) { return Parser{}.Parse(b, r) }

// Character classes (RFC 9110 §5.6.2 tchar; field-vchar plus SP/HTAB and
// obs-text for values; visible ASCII and obs-text for request-targets).
var (
	tchar  [256]bool
	vchar  [256]bool // allowed inside a field value
	tgchar [256]bool // allowed in a request-target
	// hostchar: uri-host [":" port] (RFC 3986 reg-name, IP-literal, pct-encoded).
	hostchar [256]bool
)

func init() {
	for c := 0; c < 256; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			tchar[c] = true
		}
		switch c {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
			tchar[c] = true
		}
		vchar[c] = (c >= 0x21 && c != 0x7f) || c == ' ' || c == '\t'
		tgchar[c] = c >= 0x21 && c != 0x7f
		hostchar[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	for _, c := range []byte("-._~!$&'()*+,;=:[]%") {
		hostchar[c] = true
	}
}

// TokenChar reports whether c may appear in a token (RFC 9110 §5.6.2), such
// as a field name; the front's chunked-body scanner checks trailer names
// with it.
func TokenChar(c byte) bool { return tchar[c] }

func classify(c byte, fallback *Error) *Error {
	switch c {
	case 0:
		return ErrNUL
	case '\n':
		return ErrBareLF
	}
	return fallback
}

const versionPrefix = "HTTP/"

// parse reads the request line and the header fields at the start of b
// into r. The request line is parsed inline: every request goes through
// here, and split into calls it did not measure as fast.
func parse(b []byte, r *Request, maxHeaders int) (int, error) {
	r.reset()
	i, err := skipEmptyLines(b)
	if err != nil {
		return 0, err
	}

	// method SP
	j := i
	for j < len(b) && tchar[b[j]] {
		j++
	}
	if j == len(b) {
		return 0, ErrNeedMore
	}
	if b[j] != ' ' || j == i {
		return 0, classify(b[j], ErrBadMethod)
	}
	r.Method = b[i:j]
	j++

	// request-target SP
	k := j
	for k < len(b) && tgchar[b[k]] {
		k++
	}
	if k == len(b) {
		return 0, ErrNeedMore
	}
	if b[k] != ' ' || k == j {
		if k == j && b[k] == ' ' {
			return 0, ErrBadRequestLine
		}
		return 0, classify(b[k], ErrBadTarget)
	}
	r.Target = b[j:k]
	if !targetFormOK(r.Method, r.Target) {
		return 0, ErrTargetForm
	}
	k++

	// HTTP-version CRLF: exactly "HTTP/" DIGIT "." DIGIT.
	avail := len(b) - k
	for x := 0; x < len(versionPrefix) && x < avail; x++ {
		if b[k+x] != versionPrefix[x] {
			return 0, classify(b[k+x], ErrBadVersion)
		}
	}
	if avail < 10 {
		// Check what we have of DIGIT "." DIGIT CR LF before waiting.
		for x := len(versionPrefix); x < avail; x++ {
			c := b[k+x]
			ok := (x == 5 || x == 7) && c >= '0' && c <= '9' || x == 6 && c == '.' || x == 8 && c == '\r'
			if !ok {
				return 0, classify(c, ErrBadVersion)
			}
		}
		return 0, ErrNeedMore
	}
	maj, dot, min := b[k+5], b[k+6], b[k+7]
	if maj < '0' || maj > '9' || dot != '.' || min < '0' || min > '9' {
		return 0, classify(b[k+5], ErrBadVersion)
	}
	if b[k+8] != '\r' {
		return 0, classify(b[k+8], ErrBadVersion)
	}
	if b[k+9] != '\n' {
		return 0, ErrBareCR
	}
	if maj != '1' {
		return 0, ErrVersion
	}
	r.Minor = int(min - '0')
	if r.Minor > 1 {
		// HTTP/1.2+ would be compatible, but nobody sends it; treat as 1.1.
		r.Minor = 1
	}
	i = k + 10

	var closeTok bool
	for {
		name, value, next, err := nextField(b, i, &r.Headers, maxHeaders)
		if err != nil {
			return 0, err
		}
		i = next
		if name == nil {
			break
		}
		if err := r.known(name, value, &closeTok); err != nil {
			return 0, err
		}
	}

	if err := r.finish(closeTok); err != nil {
		return 0, err
	}
	return i, nil
}

// skipEmptyLines returns the offset after the CRLFs before the request line:
// RFC 9112 §2.2 says a server SHOULD ignore at least one empty line received
// prior to the request-line.
func skipEmptyLines(b []byte) (int, error) {
	i := 0
	for i < len(b) && (b[i] == '\r' || b[i] == '\n') {
		if b[i] == '\n' {
			return 0, ErrBareLF
		}
		if i+1 >= len(b) {
			return 0, ErrNeedMore
		}
		if b[i+1] != '\n' {
			return 0, ErrBareCR
		}
		i += 2
	}
	return i, nil
}

// finish applies the rules that need the whole head: Transfer-Encoding only
// on HTTP/1.1 and never with Content-Length, Host required on HTTP/1.1, and
// whether the connection closes after the response (closeTok: a "close"
// token in Connection).
func (r *Request) finish(closeTok bool) error {
	if r.hasTE {
		if r.Minor == 0 {
			return ErrTEOnHTTP10
		}
		if r.ContentLength >= 0 {
			return ErrLengthAndChunked
		}
	}
	if r.Minor == 1 && !r.HasHost {
		return ErrMissingHost
	}
	if r.Minor == 0 {
		r.Close = !r.KeepAlive || closeTok
	} else {
		r.Close = closeTok
	}
	return nil
}

// nextField parses the header field that starts at b[i] and appends it to
// *hs (at most maxHeaders), or the empty line that ends the head (then name
// is nil). next is the offset after the line. Requests and responses share
// it, so both refuse the same malformed heads: obsolete line folding, bare
// CR or LF, invalid name or value bytes, too many fields. Optional white
// space around the value is trimmed.
func nextField(b []byte, i int, hs *[]Header, maxHeaders int) (name, value []byte, next int, err error) {
	if i >= len(b) {
		return nil, nil, 0, ErrNeedMore
	}
	switch b[i] {
	case '\r':
		if i+1 >= len(b) {
			return nil, nil, 0, ErrNeedMore
		}
		if b[i+1] != '\n' {
			return nil, nil, 0, ErrBareCR
		}
		return nil, nil, i + 2, nil
	case ' ', '\t':
		return nil, nil, 0, ErrObsFold
	}
	j := i
	for j < len(b) && tchar[b[j]] {
		j++
	}
	if j == len(b) {
		return nil, nil, 0, ErrNeedMore
	}
	if b[j] != ':' || j == i {
		return nil, nil, 0, classify(b[j], ErrBadHeaderName)
	}
	name = b[i:j]
	j++
	for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
		j++
	}
	vs := j
	for j < len(b) && vchar[b[j]] {
		j++
	}
	if j == len(b) {
		return nil, nil, 0, ErrNeedMore
	}
	if b[j] != '\r' {
		return nil, nil, 0, classify(b[j], ErrBadHeaderValue)
	}
	if j+1 >= len(b) {
		return nil, nil, 0, ErrNeedMore
	}
	if b[j+1] != '\n' {
		return nil, nil, 0, ErrBareCR
	}
	ve := j
	for ve > vs && (b[ve-1] == ' ' || b[ve-1] == '\t') {
		ve--
	}
	if len(*hs) >= maxHeaders {
		return nil, nil, 0, ErrTooManyHeaders
	}
	*hs = append(*hs, Header{Name: name, Value: b[vs:ve]})
	return name, b[vs:ve], j + 2, nil
}

// known interprets the header fields the server acts on.
func (r *Request) known(name, value []byte, closeTok *bool) error {
	switch len(name) {
	case 4:
		if eqFold(name, "host") {
			if r.HasHost {
				return ErrDupHost
			}
			for _, c := range value {
				if !hostchar[c] {
					return ErrBadHost
				}
			}
			r.HasHost, r.Host = true, value
		}
	case 5:
		if eqFold(name, "range") && r.Range == nil {
			r.Range = value
		}
	case 10:
		if eqFold(name, "connection") {
			var bad bool
			forEachToken(value, func(t []byte) {
				if eqFold(t, "close") {
					*closeTok = true
				} else if eqFold(t, "keep-alive") {
					r.KeepAlive = true
				} else if FramingField(t) {
					bad = true
				}
			})
			if bad {
				return ErrConnectionOption
			}
		}
	case 13:
		if eqFold(name, "if-none-match") && r.IfNoneMatch == nil {
			r.IfNoneMatch = value
		}
	case 14:
		if eqFold(name, "content-length") {
			if r.ContentLength >= 0 {
				return ErrDupContentLength
			}
			n, ok := parseLength(value)
			if !ok {
				return ErrBadContentLength
			}
			r.ContentLength = n
		}
	case 17:
		if eqFold(name, "if-modified-since") {
			if r.IfModifiedSince == nil {
				r.IfModifiedSince = value
			}
		} else if eqFold(name, "transfer-encoding") {
			return r.transferEncoding(value)
		}
	}
	return nil
}

// FramingField reports whether name is a field that frames or routes a
// message at every hop (Content-Length, Transfer-Encoding, Host), which a
// Connection header must not name (RFC 9110 §7.6.1). Requests that do are
// refused (ErrConnectionOption); the front's relay refuses such responses.
func FramingField(name []byte) bool {
	switch len(name) {
	case 4:
		return eqFold(name, "host")
	case 14:
		return eqFold(name, "content-length")
	case 17:
		return eqFold(name, "transfer-encoding")
	}
	return false
}

// targetFormOK checks the request-target's form against the method (RFC
// 9112 §3.2): origin-form ("/path?query") for any method; asterisk-form
// ("*") only for OPTIONS; authority-form ("host:port") only for CONNECT,
// which takes nothing else; absolute-form only with the http or https
// scheme and a non-empty host made of uri-host characters (no userinfo,
// RFC 9110 §4.2.1 and §4.2.4), followed by nothing, a path or a query.
// Front and node share it, so a target one refuses the other never sees.
func targetFormOK(method, t []byte) bool {
	if len(method) == 7 && string(method) == "CONNECT" {
		if len(t) == 0 || t[0] == '/' {
			return false
		}
		for _, c := range t {
			if !hostchar[c] {
				return false
			}
		}
		return true
	}
	switch {
	case t[0] == '/':
		return true
	case len(t) == 1 && t[0] == '*':
		return len(method) == 7 && string(method) == "OPTIONS"
	}
	var rest []byte
	switch {
	case len(t) > 7 && eqFold(t[:7], "http://"):
		rest = t[7:]
	case len(t) > 8 && eqFold(t[:8], "https://"):
		rest = t[8:]
	default:
		return false
	}
	i := 0
	for i < len(rest) && rest[i] != '/' && rest[i] != '?' {
		if !hostchar[rest[i]] {
			return false
		}
		i++
	}
	return i > 0
}

// transferEncoding applies one Transfer-Encoding field. Only "chunked" is
// implemented; chunked must be the final coding and appear once (RFC 9112
// §6.1, §6.3).
func (r *Request) transferEncoding(value []byte) error {
	r.hasTE = true
	var err error
	empty := true
	forEachToken(value, func(t []byte) {
		empty = false
		if err != nil {
			return
		}
		if r.Chunked {
			// anything after chunked (including a second chunked)
			err = ErrBadTE
			return
		}
		if eqFold(t, "chunked") {
			r.Chunked = true
			return
		}
		err = ErrUnknownTE
	})
	if err == nil && empty {
		err = ErrBadTE
	}
	return err
}

// parseLength parses 1*DIGIT without sign or spaces, refusing overflow.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// forEachToken calls f for each non-empty comma-separated element of b,
// with optional whitespace trimmed.
func forEachToken(b []byte, f func([]byte)) {
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != ',' {
			i++
		}
		t := TrimOWS(b[:i])
		if len(t) > 0 {
			f(t)
		}
		if i == len(b) {
			return
		}
		b = b[i+1:]
	}
}

// TrimOWS strips the optional white space (SP and HTAB, RFC 9110 §5.6.3)
// around a header value or list element; the front, the node and the
// trace parser share it.
func TrimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '	') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '	') {
		b = b[:len(b)-1]
	}
	return b
}

// eqFold compares b with lower, an ASCII lower-case literal, ignoring case.
// OR-ing 0x20 maps only letters onto each other for the token characters
// that can reach here.
func eqFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c |= 0x20
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// EqualFold reports whether b equals the ASCII string s ignoring case.
func EqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		x, y := b[i], s[i]
		if x >= 'A' && x <= 'Z' {
			x |= 0x20
		}
		if y >= 'A' && y <= 'Z' {
			y |= 0x20
		}
		if x != y {
			return false
		}
	}
	return true
}

// AppendRequest serialises r's request line and headers in canonical form
// (single space separators, "Name: value", CRLF). Parsing the result yields
// the same Request fields; the fuzz test relies on this, and the relay uses it
// to rewrite a head.
func AppendRequest(dst []byte, r *Request) []byte {
	dst = append(dst, r.Method...)
	dst = append(dst, ' ')
	dst = append(dst, r.Target...)
	dst = append(dst, " HTTP/1."...)
	dst = append(dst, byte('0'+r.Minor))
	dst = append(dst, "\r\n"...)
	for _, h := range r.Headers {
		dst = append(dst, h.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.Value...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}
