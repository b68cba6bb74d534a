package content

import (
	"path"
	"strings"
)

// CleanURL turns the path of a request-target as received into the URL key of
// the table: the query is cut at the first '?', %-escapes are decoded exactly
// once, a leading '/' is ensured and the result is cleaned with path.Clean.
// dir reports that the request named a directory explicitly (a trailing "/",
// "/." or "/.."), so a file must not answer it.
//
// It fails with ErrBadPath on an invalid escape, NUL or backslash and with
// ErrForbidden when a ".." segment would climb above "/" (path.Clean would
// silently clamp "/../x" to "/x"; we refuse it so the attempt is visible).
// A path that is already clean is returned as is, without allocating.
func CleanURL(rawPath string) (url string, dir bool, err error) {
	p := rawPath
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if isClean(p) {
		return p, false, nil
	}
	if strings.IndexByte(p, '%') >= 0 {
		if p, err = unescape(p); err != nil {
			return "", false, err
		}
	}
	if strings.IndexByte(p, '\\') >= 0 || strings.IndexFunc(p, isControl) >= 0 {
		return "", false, ErrBadPath
	}
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	last := p[strings.LastIndexByte(p, '/')+1:]
	dir = last == "" || last == "." || last == ".."
	depth := 0
	for seg := range strings.SplitSeq(p[1:], "/") {
		switch seg {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return "", false, ErrForbidden
			}
		default:
			depth++
		}
	}
	return path.Clean(p), dir, nil
}

// isControl reports ASCII control characters (NUL, CR, LF, TAB, DEL, …):
// never part of a file name a site serves, and CR/LF in a path are the stuff
// of header and log injection.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// isClean reports whether p is already a canonical table key: it starts with
// '/', has no empty, "." or ".." segment, no trailing slash (except "/"), and
// no byte that needs decoding or rejecting ('%', '\\', control characters).
func isClean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	if len(p) == 1 {
		return true
	}
	segStart := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) {
			switch c := p[i]; {
			case c == '%' || c == '\\' || c < 0x20 || c == 0x7f:
				return false
			case c == '/':
			default:
				continue
			}
		}
		switch p[segStart:i] {
		case "", ".", "..":
			return false
		}
		segStart = i + 1
	}
	return true
}

// unescape decodes every %XX in s once. Unlike url.PathUnescape it is used
// only after the caller saw a '%', and it treats '+' literally (paths are not
// form-encoded).
func unescape(s string) (string, error) {
	n := strings.Count(s, "%")
	b := make([]byte, 0, max(len(s)-2*n, 0))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", ErrBadPath
		}
		h, ok1 := unhex(s[i+1])
		l, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", ErrBadPath
		}
		b = append(b, h<<4|l)
		i += 2
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// IndexFile is the file a node answers a directory with when the directory
// has one (and caches under its own URL).
const IndexFile = "index.html"

// ObjectKey is the table URL of the file a request target names on a site
// that holds it, what a node caches the answer under: CleanURL's key (no
// query, escapes decoded, "//" and "/./" folded), and for a target that
// names a directory explicitly ("/", a trailing "/") the directory's index
// file. Many spellings of one file in a real access log ("/a?x=1",
// "/./a", "/a%2Eb") are thus one object. The front keys its policies by it,
// the simulator its policies and caches, and a site written from a trace
// names its files by it, so that one file is one object on every side. A
// target that is already a clean file URL is returned as is, without
// allocating; ok is false for one no node would serve (CleanURL's errors).
func ObjectKey(target string) (key string, ok bool) {
	u, dir, err := CleanURL(target)
	if err != nil {
		return "", false
	}
	switch {
	case u == "/":
		return "/" + IndexFile, true
	case dir:
		return u + "/" + IndexFile, true
	}
	return u, true
}
