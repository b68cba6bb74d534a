package httpwire

import (
	"strconv"
	"sync/atomic"
	"time"
)

// StatusText returns the reason phrase for the statuses shoal sends, and
// "Status" for any other code.
func StatusText(code int) string {
	switch code {
	case 200:
		return "OK"
	case 206:
		return "Partial Content"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 304:
		return "Not Modified"
	case 400:
		return "Bad Request"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 413:
		return "Content Too Large"
	case 412:
		return "Precondition Failed"
	case 416:
		return "Range Not Satisfiable"
	case 431:
		return "Request Header Fields Too Large"
	case 500:
		return "Internal Server Error"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Status"
}

// AppendStatusLine appends "HTTP/1.1 <code> <reason>\r\n".
func AppendStatusLine(dst []byte, code int) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, ' ')
	dst = append(dst, StatusText(code)...)
	return append(dst, "\r\n"...)
}

// AppendHeader appends "name: value\r\n". The caller guarantees that value
// holds no CR or LF (values shoal sends are built, not copied from requests).
func AppendHeader(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// AppendHeaderInt appends "name: n\r\n" without allocating.
func AppendHeaderInt(dst []byte, name string, n int64) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, "\r\n"...)
}

// AppendContentRange appends "Content-Range: bytes first-last/size\r\n".
func AppendContentRange(dst []byte, first, last, size int64) []byte {
	dst = append(dst, "Content-Range: bytes "...)
	dst = strconv.AppendInt(dst, first, 10)
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, last, 10)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, size, 10)
	return append(dst, "\r\n"...)
}

// TimeFormat is the IMF-fixdate layout (RFC 9110 §5.6.7), for time.Format.
const TimeFormat = "Mon, 02 Jan 2006 15:04:05 GMT"

var (
	dayNames   = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	monthNames = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// AppendHTTPDate appends t in IMF-fixdate form ("Sun, 06 Nov 1994 08:49:37
// GMT") without allocating.
func AppendHTTPDate(dst []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	dst = append(dst, dayNames[t.Weekday()]...)
	dst = append(dst, ", "...)
	dst = append2(dst, d)
	dst = append(dst, ' ')
	dst = append(dst, monthNames[mo-1]...)
	dst = append(dst, ' ')
	if y < 0 || y > 9999 {
		y = 0
	}
	dst = append(dst, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), ' ')
	dst = append2(dst, h)
	dst = append(dst, ':')
	dst = append2(dst, mi)
	dst = append(dst, ':')
	dst = append2(dst, s)
	return append(dst, " GMT"...)
}

func append2(dst []byte, v int) []byte { return append(dst, byte('0'+v/10), byte('0'+v%10)) }

// ParseHTTPDate parses an HTTP-date: IMF-fixdate without allocating, and the
// obsolete RFC 850 and asctime forms (RFC 9110 §5.6.7) through time.Parse.
func ParseHTTPDate(b []byte) (time.Time, bool) {
	if len(b) == 29 && b[3] == ',' && b[4] == ' ' && b[7] == ' ' && b[11] == ' ' &&
		b[16] == ' ' && b[19] == ':' && b[22] == ':' && b[25] == ' ' && string(b[26:]) == "GMT" {
		d, ok1 := num(b[5:7])
		y, ok2 := num(b[12:16])
		h, ok3 := num(b[17:19])
		mi, ok4 := num(b[20:22])
		s, ok5 := num(b[23:25])
		mo := -1
		for i, m := range monthNames {
			if string(b[8:11]) == m {
				mo = i
			}
		}
		if !(ok1 && ok2 && ok3 && ok4 && ok5) || mo < 0 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 {
			return time.Time{}, false
		}
		return time.Date(y, time.Month(mo+1), d, h, mi, s, 0, time.UTC), true
	}
	for _, layout := range [...]string{"Monday, 02-Jan-06 15:04:05 GMT", "Mon Jan _2 15:04:05 2006"} {
		if t, err := time.Parse(layout, string(b)); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

func num(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// DateCache holds the current "Date: ...\r\n" header line, reformatted at
// most once per second. The caller owns it (one per server, not a global)
// and calls Line with the current time on each response; concurrent use is
// safe. Formatting the date per response would cost ~100 ns, which is 5–10 %
// of a cached 1 KB response.
type DateCache struct {
	cur atomic.Pointer[dateLine]
}

type dateLine struct {
	sec  int64
	line []byte
}

// Line returns "Date: <IMF-fixdate>\r\n" for now. The returned slice must
// not be modified.
func (c *DateCache) Line(now time.Time) []byte {
	sec := now.Unix()
	if d := c.cur.Load(); d != nil && d.sec == sec {
		return d.line
	}
	b := make([]byte, 0, 40)
	b = append(b, "Date: "...)
	b = AppendHTTPDate(b, now)
	b = append(b, "\r\n"...)
	c.cur.Store(&dateLine{sec: sec, line: b})
	return b
}

// RangeKind classifies a Range header against a representation's size.
type RangeKind int

// Range outcomes (RFC 9110 §14).
const (
	RangeNone          RangeKind = iota // absent, not bytes, or syntactically invalid: ignore, send 200
	RangeSingle                         // one satisfiable range: send 206
	RangeMulti                          // several ranges: multipart/byteranges (ParseRanges; ParseRange reports only the kind)
	RangeUnsatisfiable                  // valid syntax, no range overlaps the body: send 416
)

// ParseRange interprets a Range header value for a body of size bytes. For
// RangeSingle it returns the inclusive byte positions first..last.
func ParseRange(v []byte, size int64) (first, last int64, kind RangeKind) {
	v = TrimOWS(v)
	if len(v) < 6 || !EqualFold(v[:6], "bytes=") {
		return 0, 0, RangeNone
	}
	v = v[6:]
	count := 0
	satisfiable := 0
	bad := false
	forEachToken(v, func(t []byte) {
		if bad {
			return
		}
		count++
		dash := -1
		for i, c := range t {
			if c == '-' {
				dash = i
				break
			}
		}
		if dash < 0 {
			bad = true
			return
		}
		a, b := t[:dash], t[dash+1:]
		var f, l int64
		switch {
		case len(a) == 0: // suffix: -N
			n, ok := parseLength(b)
			if !ok {
				bad = true
				return
			}
			if n == 0 || size == 0 {
				return
			}
			if n > size {
				n = size
			}
			f, l = size-n, size-1
		default:
			fa, ok := parseLength(a)
			if !ok {
				bad = true
				return
			}
			la := size - 1
			if len(b) > 0 {
				lb, ok := parseLength(b)
				if !ok || lb < fa {
					bad = true
					return
				}
				if lb < la {
					la = lb
				}
			}
			if fa >= size {
				return
			}
			f, l = fa, la
		}
		satisfiable++
		first, last = f, l
	})
	switch {
	case bad || count == 0:
		return 0, 0, RangeNone
	case satisfiable == 0:
		return 0, 0, RangeUnsatisfiable
	case count > 1:
		return 0, 0, RangeMulti
	}
	return first, last, RangeSingle
}

// MatchETag reports whether an If-None-Match value matches etag (a quoted
// strong tag) under the weak comparison RFC 9110 §13.1.2 requires: "*"
// matches anything, W/ prefixes are ignored.
func MatchETag(header []byte, etag string) bool {
	if len(etag) >= 2 && etag[0] == 'W' && etag[1] == '/' {
		etag = etag[2:]
	}
	match := false
	forEachToken(header, func(t []byte) {
		if len(t) == 1 && t[0] == '*' {
			match = true
			return
		}
		if len(t) > 2 && t[0] == 'W' && t[1] == '/' {
			t = t[2:]
		}
		if string(t) == etag {
			match = true
		}
	})
	return match
}
