// Package trace reads and writes web-server access logs and generates synthetic
// request workloads, for the simulator, the benchmark client and the cache
// comparisons (SPEC §6 "Input").
//
// Two log formats are understood, both plain or gzip-compressed:
//
//   - Common Log Format (CLF):
//     host ident user [dd/Mon/yyyy:hh:mm:ss zone] "METHOD URL PROTO" status bytes
//   - EPA's variant (the 1995 EPA WWW trace):
//     host [DD:HH:MM:SS] "METHOD URL PROTO" status bytes
//     It carries no year, month or zone. The trace was recorded in August 1995
//     at Research Triangle Park, so the reader assumes August 1995 at -0400
//     (EDT); see EPAYear, EPAMonth and EPAZoneOffset.
//
// The parser is hand-written (no regexp, no allocation except the Host and URL
// strings, which a Reader interns) because it sits on the simulator's hot path.
// Real traces hold broken lines (an embedded '"' in the request, an empty URL);
// those are counted by Reader.Malformed and skipped, never fatal.
package trace

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"shoal/internal/base/httpwire"
)

// Format names a log line layout.
type Format int

const (
	// Auto detects the format from the first line that parses as CLF or EPA.
	Auto Format = iota
	// CLF is the NCSA Common Log Format.
	CLF
	// EPA is the EPA trace's variant: host [DD:HH:MM:SS] "request" status bytes.
	EPA
)

// String returns "auto", "clf" or "epa".
func (f Format) String() string {
	switch f {
	case Auto:
		return "auto"
	case CLF:
		return "clf"
	case EPA:
		return "epa"
	}
	return "format(" + strconv.Itoa(int(f)) + ")"
}

// The EPA variant has no year, month or zone; these are the assumed values
// (the trace is from 29–30 August 1995, EDT).
const (
	EPAYear       = 1995
	EPAMonth      = time.August
	EPAZoneOffset = -4 * 3600 // seconds east of UTC
)

// Record is one request of an access log.
type Record struct {
	// VHost is the virtual host (site) the request was for, from logs that
	// carry it as a first field — Apache's vhost_combined ("%v:%p", the
	// port is dropped) or nginx's "$host $remote_addr ..." — and "" for
	// plain CLF. Content keys of a multi-site log are VHost + URL.
	VHost  string
	Host   string    // client host name or address
	Time   time.Time // request time in the log's own zone
	Method string    // e.g. "GET"
	URL    string    // request target as logged (may hold spaces in old logs)
	Proto  string    // e.g. "HTTP/1.0"; "" for HTTP/0.9-style requests
	Status int       // HTTP status, 100..999
	Bytes  int64     // response body bytes; -1 when the log says "-"
}

// ErrMalformed is wrapped by every parse error; callers test it with errors.Is.
var ErrMalformed = errors.New("malformed log line")

type parseError string

func (e parseError) Error() string { return "malformed log line: " + string(e) }
func (e parseError) Unwrap() error { return ErrMalformed }

// Preallocated errors keep the parser allocation-free on bad input too.
var (
	errHost    error = parseError("host")
	errIdent   error = parseError("ident/user")
	errTime    error = parseError("timestamp")
	errRequest error = parseError("request")
	errStatus  error = parseError("status")
	errBytes   error = parseError("bytes")
	errTrail   error = parseError("trailing data")
	errFormat  error = parseError("unknown format")
	// errNoRequest is a well-formed line whose request is "-": a server's
	// answer to a connection that sent no request (a refusal at a limit, a
	// timeout), which Reader skips as no request rather than as malformed.
	errNoRequest error = parseError("no request")
)

// ParseLine parses one line (without or with its trailing "\n" or "\r\n") in
// format f (CLF or EPA; Auto tries CLF then EPA). It allocates the strings of
// the returned Record; use a Reader to stream a file with interned strings.
func ParseLine(line []byte, f Format) (Record, error) {
	var p parser
	return p.parse(line, f)
}

// parser holds per-stream state that saves allocations: the last zone's
// *time.Location and an optional string interner.
type parser struct {
	zoneOff int
	zoneLoc *time.Location
	in      *interner
}

// str converts b to a string, through the interner when there is one.
func (p *parser) str(b []byte) string {
	if p.in != nil {
		return p.in.get(b)
	}
	return string(b)
}

// loc returns a fixed zone for off seconds east of UTC, reusing the last one.
func (p *parser) loc(off int) *time.Location {
	if p.zoneLoc == nil || p.zoneOff != off {
		if off == 0 {
			p.zoneLoc = time.UTC
		} else {
			p.zoneLoc = time.FixedZone("", off)
		}
		p.zoneOff = off
	}
	return p.zoneLoc
}

func (p *parser) parse(line []byte, f Format) (Record, error) {
	// Strip the line terminator and trailing blanks.
	n := len(line)
	for n > 0 && (line[n-1] == '\n' || line[n-1] == '\r' || line[n-1] == ' ' || line[n-1] == '\t') {
		n--
	}
	line = line[:n]
	// Control bytes are not rejected: the EPA trace logs URLs holding raw
	// ^A..^U bytes; they round-trip through AppendCLF as \xHH escapes.
	switch f {
	case CLF:
		return p.parseCLF(line)
	case EPA:
		return p.parseEPA(line)
	case Auto:
		r, err := p.parseCLF(line)
		if err == nil || err == errNoRequest {
			return r, err
		}
		return p.parseEPA(line)
	}
	return Record{}, errFormat
}

// token returns the bytes up to the next space and the rest after that space.
func token(b []byte) (tok, rest []byte, ok bool) {
	for i, c := range b {
		if c == ' ' {
			return b[:i], b[i+1:], i > 0
		}
	}
	return nil, nil, false
}

var monthNames = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// num parses exactly len(b) decimal digits.
func num(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

func daysIn(m time.Month, y int) int {
	switch m {
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// clock parses "hh:mm:ss" (8 bytes).
func clock(b []byte) (h, m, s int, ok bool) {
	if len(b) != 8 || b[2] != ':' || b[5] != ':' {
		return 0, 0, 0, false
	}
	h, ok1 := num(b[0:2])
	m, ok2 := num(b[3:5])
	s, ok3 := num(b[6:8])
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || s > 59 {
		return 0, 0, 0, false
	}
	return h, m, s, true
}

// parseCLFTime parses "dd/Mon/yyyy:hh:mm:ss +zzzz" (26 bytes).
func (p *parser) parseCLFTime(b []byte) (time.Time, bool) {
	if len(b) != 26 || b[2] != '/' || b[6] != '/' || b[11] != ':' || b[20] != ' ' {
		return time.Time{}, false
	}
	d, ok := num(b[0:2])
	if !ok {
		return time.Time{}, false
	}
	mon := time.Month(0)
	for i, name := range monthNames {
		if string(b[3:6]) == name {
			mon = time.Month(i + 1)
			break
		}
	}
	y, oky := num(b[7:11])
	h, mi, s, okc := clock(b[12:20])
	if mon == 0 || !oky || !okc || d < 1 || d > daysIn(mon, y) {
		return time.Time{}, false
	}
	sign := 0
	switch b[21] {
	case '+':
		sign = 1
	case '-':
		sign = -1
	default:
		return time.Time{}, false
	}
	zh, ok1 := num(b[22:24])
	zm, ok2 := num(b[24:26])
	if !ok1 || !ok2 || zh > 23 || zm > 59 {
		return time.Time{}, false
	}
	return time.Date(y, mon, d, h, mi, s, 0, p.loc(sign*(zh*3600+zm*60))), true
}

// parseEPATime parses "DD:HH:MM:SS" (11 bytes) as a day of EPAMonth EPAYear.
func (p *parser) parseEPATime(b []byte) (time.Time, bool) {
	if len(b) != 11 || b[2] != ':' {
		return time.Time{}, false
	}
	d, ok := num(b[0:2])
	h, mi, s, okc := clock(b[3:11])
	if !ok || !okc || d < 1 || d > daysIn(EPAMonth, EPAYear) {
		return time.Time{}, false
	}
	return time.Date(EPAYear, EPAMonth, d, h, mi, s, 0, p.loc(EPAZoneOffset)), true
}

func (p *parser) parseCLF(line []byte) (Record, error) {
	var r Record
	host, rest, ok := token(line)
	if !ok {
		return r, errHost
	}
	// ident and user: single tokens, ignored.
	ident, rest, ok := token(rest)
	if !ok {
		return r, errIdent
	}
	if _, rest, ok = token(rest); !ok {
		return r, errIdent
	}
	var vhost []byte
	if len(rest) > 0 && rest[0] != '[' {
		// A fourth field before the time: the first was the virtual
		// host, then come host, ident and user.
		vhost, host = host, ident
		if _, rest, ok = token(rest); !ok {
			return r, errIdent
		}
	}
	if len(rest) < 28 || rest[0] != '[' || rest[27] != ']' {
		return r, errTime
	}
	t, ok := p.parseCLFTime(rest[1:27])
	if !ok {
		return r, errTime
	}
	r.Time = t
	if err := p.parseTail(&r, rest[28:]); err != nil {
		return Record{}, err
	}
	r.Host = p.str(host)
	if vhost != nil {
		// Apache's %v:%p: drop a numeric port.
		for i := len(vhost) - 1; i > 0; i-- {
			if c := vhost[i]; c == ':' {
				if i < len(vhost)-1 {
					vhost = vhost[:i]
				}
				break
			} else if c < '0' || c > '9' {
				break
			}
		}
		r.VHost = p.str(vhost)
	}
	return r, nil
}

func (p *parser) parseEPA(line []byte) (Record, error) {
	var r Record
	host, rest, ok := token(line)
	if !ok {
		return r, errHost
	}
	if len(rest) < 13 || rest[0] != '[' || rest[12] != ']' {
		return r, errTime
	}
	t, ok := p.parseEPATime(rest[1:12])
	if !ok {
		return r, errTime
	}
	r.Time = t
	if err := p.parseTail(&r, rest[13:]); err != nil {
		return Record{}, err
	}
	r.Host = p.str(host)
	return r, nil
}

// parseTail parses ` "METHOD URL PROTO" status bytes` after the timestamp.
// The request ends at the first '"': a request with an embedded quote leaves
// junk where the status should be and is rejected. Anything after bytes must
// start with ` "` (the referer/agent fields of the combined format) and is ignored.
func (p *parser) parseTail(r *Record, b []byte) error {
	if len(b) < 2 || b[0] != ' ' || b[1] != '"' {
		return errRequest
	}
	b = b[2:]
	q := -1
	for i, c := range b {
		if c == '"' {
			q = i
			break
		}
	}
	if q < 0 {
		return errRequest
	}
	req, b := b[:q], b[q+1:]
	if len(b) < 1 || b[0] != ' ' {
		return errStatus
	}
	st, b, ok := token(b[1:])
	if !ok || len(st) != 3 {
		return errStatus
	}
	status, ok := num(st)
	if !ok || status < 100 {
		return errStatus
	}
	// bytes: up to the end or to the next space.
	by := b
	var trail []byte
	for i, c := range b {
		if c == ' ' {
			by, trail = b[:i], b[i:]
			break
		}
	}
	if len(trail) > 0 && (len(trail) < 2 || trail[1] != '"') {
		return errTrail
	}
	var size int64
	switch {
	case len(by) == 1 && by[0] == '-':
		size = -1
	case len(by) >= 1 && len(by) <= 15:
		v, ok := num(by)
		if !ok {
			return errBytes
		}
		size = int64(v)
	default:
		return errBytes
	}
	if err := p.parseRequest(r, req); err != nil {
		return err
	}
	r.Status, r.Bytes = status, size
	return nil
}

// parseRequest splits "METHOD URL [PROTO]". The URL is everything between the
// method and a final "HTTP/..." token, trimmed of blanks: 1995 logs hold
// unescaped spaces in URLs, and HTTP/0.9 requests carry no protocol.
func (p *parser) parseRequest(r *Record, req []byte) error {
	if len(req) == 1 && req[0] == '-' {
		return errNoRequest
	}
	m, rest, ok := token(req)
	if !ok {
		return errRequest
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return errRequest
		}
	}
	rest = httpwire.TrimOWS(rest)
	var proto []byte
	i := len(rest) - 1
	for i >= 0 && rest[i] != ' ' {
		i--
	}
	// rest[i+1:] is the last token (the whole of rest when i == -1, so that
	// "GET  HTTP/1.0" has an empty URL and is rejected).
	if last := rest[i+1:]; len(last) > 5 && string(last[:5]) == "HTTP/" {
		proto, rest = last, httpwire.TrimOWS(rest[:max(i, 0)])
	}
	if len(rest) == 0 {
		return errRequest
	}
	r.Method = method(m)
	if bytes.Contains(rest, []byte(`\x`)) {
		r.URL = unescapeHex(rest)
	} else {
		r.URL = p.str(rest)
	}
	r.Proto = protocol(proto)
	return nil
}

// unescapeHex decodes the \xHH escapes AppendCLF and nginx write in a
// request; a backslash not followed by 'x' and two hex digits stays.
func unescapeHex(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && b[i+1] == 'x' {
			if hi, lo := httpwire.Unhex(b[i+2]), httpwire.Unhex(b[i+3]); hi >= 0 && lo >= 0 {
				out = append(out, byte(hi<<4|lo))
				i += 3
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}

// method and protocol return constant strings for the common values so the
// hot path does not allocate them.
func method(b []byte) string {
	switch string(b) {
	case "GET":
		return "GET"
	case "HEAD":
		return "HEAD"
	case "POST":
		return "POST"
	}
	return string(b)
}

func protocol(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case "HTTP/1.0":
		return "HTTP/1.0"
	case "HTTP/1.1":
		return "HTTP/1.1"
	}
	return string(b)
}
