package node

import (
	"time"

	"shoal/internal/base/httpwire"
)

// condFields are the request fields the node reads beyond those httpwire
// parses for every request: the remaining preconditions of RFC 9110 §13.1
// and Accept-Encoding. They are found in one pass over the parsed headers,
// only for requests that reach a file, and alias the read buffer. A
// repeated field counts by its first occurrence, as httpwire does for
// If-None-Match.
type condFields struct {
	ifMatch           []byte
	ifUnmodifiedSince []byte
	ifRange           []byte
	acceptEncoding    []byte
}

func (f *condFields) scan(hs []httpwire.Header) {
	*f = condFields{}
	for _, h := range hs {
		switch len(h.Name) {
		case 8:
			if f.ifMatch == nil && httpwire.EqualFold(h.Name, "if-match") {
				f.ifMatch = h.Value
			} else if f.ifRange == nil && httpwire.EqualFold(h.Name, "if-range") {
				f.ifRange = h.Value
			}
		case 15:
			if f.acceptEncoding == nil && httpwire.EqualFold(h.Name, "accept-encoding") {
				f.acceptEncoding = h.Value
			}
		case 19:
			if f.ifUnmodifiedSince == nil && httpwire.EqualFold(h.Name, "if-unmodified-since") {
				f.ifUnmodifiedSince = h.Value
			}
		}
	}
}

// precondition evaluates the conditional fields against the selected
// representation (its ETag and modification time) in the order of RFC 9110
// §13.2.2 and returns 412, 304, or 0 to go on with the request:
//
//  1. If-Match: 412 unless some listed tag matches strongly, or "*";
//  2. otherwise If-Unmodified-Since: 412 if the file changed after the date;
//     an invalid date is ignored (§13.1.4; nginx answers 412 instead);
//  3. If-None-Match: 304 if a listed tag matches weakly, or "*";
//  4. otherwise If-Modified-Since: 304 if the file did not change after the
//     date. A date later than now is ignored, as Apache does (nginx's
//     default "if_modified_since exact" also answers 200 then), so a client
//     with a fast clock never freezes its copy.
//
// Comparisons use whole seconds, the resolution of Last-Modified.
func precondition(req *httpwire.Request, f *condFields, etag string, modTime, now time.Time) int {
	lm := modTime.Unix()
	if f.ifMatch != nil {
		if !matchStrong(f.ifMatch, etag) {
			return 412
		}
	} else if f.ifUnmodifiedSince != nil {
		if t, ok := httpwire.ParseHTTPDate(f.ifUnmodifiedSince); ok && lm > t.Unix() {
			return 412
		}
	}
	if req.IfNoneMatch != nil {
		if httpwire.MatchETag(req.IfNoneMatch, etag) {
			return 304
		}
	} else if req.IfModifiedSince != nil {
		if t, ok := httpwire.ParseHTTPDate(req.IfModifiedSince); ok && t.Unix() <= now.Unix() && lm <= t.Unix() {
			return 304
		}
	}
	return 0
}

// matchStrong reports whether an If-Match value lists etag under the strong
// comparison (RFC 9110 §8.8.3.2): "*" matches any current representation, a
// weak tag never matches.
func matchStrong(list []byte, etag string) bool {
	if len(etag) >= 2 && etag[0] == 'W' && etag[1] == '/' {
		return false
	}
	v := list
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		t := httpwire.TrimOWS(v[:i])
		if len(t) == 1 && t[0] == '*' || string(t) == etag {
			return true
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
	}
	return false
}

// ifRangeOK reports whether a Range may be honoured (RFC 9110 §13.1.5): no
// If-Range, an entity-tag equal to the current strong ETag, or a date equal
// to the current Last-Modified.
func ifRangeOK(v []byte, etag string, modTime time.Time) bool {
	if v == nil {
		return true
	}
	if len(v) > 0 && (v[0] == '"' || v[0] == 'W' && len(v) > 1 && v[1] == '/') {
		return string(v) == etag && etag[0] == '"'
	}
	t, ok := httpwire.ParseHTTPDate(v)
	return ok && t.Unix() == modTime.Unix()
}
