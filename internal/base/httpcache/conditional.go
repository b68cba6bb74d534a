package httpcache

import (
	"net/http"
	"strings"
	"time"
)

// Precondition evaluates a client's conditional request fields against a
// stored response's header, in RFC 9110 §13.2.2's order, and returns 412,
// 304 or 0 (answer normally):
//
//  1. If-Match: 412 unless "*" or a listed tag matches the stored ETag
//     strongly;
//  2. otherwise If-Unmodified-Since: 412 if the stored Last-Modified is
//     later (a cache answering for the origin, RFC 9111 §4.3.2);
//  3. If-None-Match: 304 (for GET and HEAD) if "*" or a listed tag matches
//     weakly;
//  4. otherwise If-Modified-Since, for GET and HEAD: 304 unless the stored
//     Last-Modified (or, without one, its Date, §4.3.2) is later than the
//     given date.
//
// Invalid dates are ignored. Unsafe methods are never answered 304.
func Precondition(method string, req, stored http.Header) int {
	etag := strings.TrimSpace(stored.Get("ETag"))
	lm, hasLM := singleDate(stored, "Last-Modified")
	if im := req.Values("If-Match"); len(im) > 0 {
		if !matchETag(im, etag, true) {
			return 412
		}
	} else if ius, ok := singleDate(req, "If-Unmodified-Since"); ok && hasLM && lm.After(ius) {
		return 412
	}
	safe := method == "GET" || method == "HEAD"
	if inm := req.Values("If-None-Match"); len(inm) > 0 {
		if matchETag(inm, etag, false) {
			if safe {
				return 304
			}
			return 412
		}
		return 0
	}
	if !safe {
		return 0
	}
	if ims, ok := singleDate(req, "If-Modified-Since"); ok {
		last := lm
		if !hasLM {
			var okDate bool
			if last, okDate = singleDate(stored, "Date"); !okDate {
				return 0
			}
		}
		if !last.Truncate(time.Second).After(ims) {
			return 304
		}
	}
	return 0
}

// matchETag reports whether an If-Match / If-None-Match list contains "*"
// or a tag equal to etag: strongly (both strong and identical) or weakly
// (identical after dropping W/), RFC 9110 §8.8.3.2.
func matchETag(lines []string, etag string, strong bool) bool {
	if etag == "" {
		for _, l := range lines {
			if strings.TrimSpace(l) == "*" {
				return true
			}
		}
		return false
	}
	weakStored := strings.HasPrefix(etag, "W/")
	opaque := strings.TrimPrefix(etag, "W/")
	for _, l := range lines {
		for _, t := range splitETags(l) {
			if t == "*" {
				return true
			}
			weak := strings.HasPrefix(t, "W/")
			if strong && (weak || weakStored) {
				continue
			}
			if strings.TrimPrefix(t, "W/") == opaque {
				return true
			}
		}
	}
	return false
}

// splitETags splits a list of entity tags, where a comma inside a quoted
// tag does not separate.
func splitETags(s string) []string {
	var out []string
	start, inQuote := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				if t := strings.TrimSpace(s[start:i]); t != "" {
					out = append(out, t)
				}
				start = i + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}
