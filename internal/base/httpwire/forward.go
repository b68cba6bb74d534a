package httpwire

import (
	"errors"
	"strings"
)

// ErrForwardPath refuses a request path a proxy must not forward: an
// encoded slash or backslash, a control character (raw or encoded), a raw
// backslash, or an invalid %-escape.
var ErrForwardPath = errors.New("httpwire: path not forwardable (encoded slash or backslash, control character or bad escape)")

// ForwardPath returns the path a proxy (a PoP's edge) sends to its origin
// for rawPath, the path of a request-target as received (still
// %-encoded, without the query). The path is normalised as RFC 3986 says:
// %-encodings of unreserved characters are decoded and the other ones
// upper-cased (§6.2.2.1, §6.2.2.2), then dot-segments are removed (§5.2.4),
// so "." and ".." never reach the origin however they were spelled
// ("%2e%2E") and climbing above "/" stops at "/". Other bytes outside the
// path grammar are %-encoded; reserved characters keep their encoding.
//
// Encoded slashes and backslashes are refused rather than forwarded: an
// origin that decodes "%2F" (or treats "\" as a separator) sees segments
// the proxy did not, so "/a%2f..%2f..%2fsecret", one segment here, would
// be "/a/../../secret" there. Forwarding them decoded is that desync;
// keeping them encoded leaves the origin's decoding to decide.
func ForwardPath(rawPath string) (string, error) {
	b := make([]byte, 0, len(rawPath)+1)
	if rawPath == "" || rawPath[0] != '/' {
		b = append(b, '/')
	}
	for i := 0; i < len(rawPath); i++ {
		c := rawPath[i]
		switch {
		case c == '%':
			if i+2 >= len(rawPath) || Unhex(rawPath[i+1]) < 0 || Unhex(rawPath[i+2]) < 0 {
				return "", ErrForwardPath
			}
			v := byte(Unhex(rawPath[i+1])<<4 | Unhex(rawPath[i+2]))
			i += 2
			switch {
			case v == '/' || v == '\\' || v < 0x20 || v == 0x7f:
				return "", ErrForwardPath
			case unreserved(v):
				b = append(b, v)
			default:
				b = appendEscape(b, v)
			}
		case c == '\\' || c < 0x20 || c == 0x7f:
			return "", ErrForwardPath
		case c == '/' || pchar(c):
			b = append(b, c)
		default:
			b = appendEscape(b, c)
		}
	}
	return removeDotSegments(string(b)), nil
}

// ForwardPathUnchanged reports whether ForwardPath(p) is p itself: p
// starts with "/", holds only "/" and RFC 3986 pchar bytes (no %-escape,
// nothing to encode) and no dot-segment can start in it (no "/."). A cache
// can then use the path as received, without ForwardPath's copy; "false"
// only means ForwardPath must be asked.
func ForwardPathUnchanged(p []byte) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	for i, c := range p {
		switch {
		case c == '/':
			if i+1 < len(p) && p[i+1] == '.' {
				return false
			}
		case !pchar(c):
			return false
		}
	}
	return true
}

// removeDotSegments is RFC 3986 §5.2.4 for an absolute path: "." segments
// go, ".." removes the segment before it (none above "/"), and a path
// that ended in "." or ".." keeps a trailing "/".
func removeDotSegments(p string) string {
	if !strings.Contains(p, "/.") {
		return p
	}
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	trailing := false
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			trailing = trailing || last
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			trailing = trailing || last
		default:
			out = append(out, s)
		}
	}
	r := "/" + strings.Join(out, "/")
	if trailing && len(out) > 0 {
		r += "/"
	}
	return r
}

// unreserved is RFC 3986 §2.3: ALPHA / DIGIT / "-" / "." / "_" / "~".
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// pchar is RFC 3986 §3.3's pchar without pct-encoded: unreserved,
// sub-delims, ":" and "@".
func pchar(c byte) bool {
	return unreserved(c) || strings.IndexByte("!$&'()*+,;=:@", c) >= 0
}

// Unhex is the value of the hex digit c, or -1 when c is not one; the
// access-log parser decodes nginx's \xHH escapes with it too.
func Unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

func appendEscape(b []byte, c byte) []byte {
	const hex = "0123456789ABCDEF"
	return append(b, '%', hex[c>>4], hex[c&15])
}
