package httpcache

import (
	"strings"
)

// Unset is a delta-seconds directive's value when the directive is absent
// (or malformed, which RFC 9111 §5.2 says to treat as absent).
const Unset int64 = -1

// MaxDelta is the value a delta-seconds larger than a cache can represent
// stands for (RFC 9111 §1.2.2: 2^31).
const MaxDelta int64 = 1 << 31

// Directives is a parsed Cache-Control field (or a targeted one such as
// CDN-Cache-Control), request or response. Delta-seconds fields are Unset
// when absent.
type Directives struct {
	MaxAge, SMaxAge, MaxStale, MinFresh       int64
	StaleWhileRevalidate, StaleIfError        int64
	MaxStaleAny                               bool // max-stale without a value: any staleness
	NoStore, NoCache, Private, Public         bool
	MustRevalidate, ProxyRevalidate           bool
	MustUnderstand, OnlyIfCached, NoTransform bool
	Immutable                                 bool
	NoCacheFields, PrivateFields              []string // lower-case names of the qualified forms
	Conflict                                  bool     // a delta directive appeared twice with different values
	directivesSeen                            int
}

// Any reports whether at least one directive was recognised.
func (d *Directives) Any() bool { return d.directivesSeen > 0 }

func newDirectives() Directives {
	return Directives{MaxAge: Unset, SMaxAge: Unset, MaxStale: Unset, MinFresh: Unset,
		StaleWhileRevalidate: Unset, StaleIfError: Unset}
}

// ParseDirectives parses the lines of a Cache-Control (or CDN-Cache-Control)
// field as one comma-separated list (RFC 9110 §5.3 and §5.6.1). Directive
// names are case-insensitive; arguments may be tokens or quoted strings
// (RFC 9111 §5.2: recipients accept both forms). A directive whose argument
// is malformed (a delta-seconds that is not all digits, a space around "=")
// is ignored on its own; unknown directives are ignored (§5.2.3). When a
// delta directive appears twice with different values, Conflict is set and
// the smaller value kept, so that the response is never fresher than either
// copy says (§4.2.1 allows "treat as stale" or "use the first"; the smaller
// keeps both the suite's "must not reuse" cases and a single duplicate of
// the same value working).
func ParseDirectives(lines []string) Directives {
	d := newDirectives()
	for _, line := range lines {
		forEachDirective(line, func(name, arg string, hasArg, quoted bool) {
			d.add(name, arg, hasArg, quoted)
		})
	}
	return d
}

// add records one directive. name is lower-cased by the caller.
func (d *Directives) add(name, arg string, hasArg, quoted bool) {
	delta := func(p *int64) {
		v, ok := parseDelta(arg)
		if !hasArg || !ok {
			return
		}
		d.directivesSeen++
		if *p != Unset && *p != v {
			d.Conflict = true
			v = min(v, *p)
		}
		*p = v
	}
	flag := func(p *bool) {
		if hasArg {
			return // these take no argument; a malformed one is ignored
		}
		d.directivesSeen++
		*p = true
	}
	switch name {
	case "max-age":
		delta(&d.MaxAge)
	case "s-maxage":
		delta(&d.SMaxAge)
	case "min-fresh":
		delta(&d.MinFresh)
	case "stale-while-revalidate":
		delta(&d.StaleWhileRevalidate)
	case "stale-if-error":
		delta(&d.StaleIfError)
	case "max-stale":
		if !hasArg {
			d.directivesSeen++
			d.MaxStaleAny = true
			return
		}
		delta(&d.MaxStale)
	case "no-cache", "private":
		d.directivesSeen++
		fields := fieldList(arg, hasArg)
		if name == "no-cache" {
			if fields == nil {
				d.NoCache = true
			}
			d.NoCacheFields = append(d.NoCacheFields, fields...)
		} else {
			if fields == nil {
				d.Private = true
			}
			d.PrivateFields = append(d.PrivateFields, fields...)
		}
	case "no-store":
		flag(&d.NoStore)
	case "public":
		flag(&d.Public)
	case "must-revalidate":
		flag(&d.MustRevalidate)
	case "proxy-revalidate":
		flag(&d.ProxyRevalidate)
	case "must-understand":
		flag(&d.MustUnderstand)
	case "only-if-cached":
		flag(&d.OnlyIfCached)
	case "no-transform":
		flag(&d.NoTransform)
	case "immutable":
		flag(&d.Immutable)
	}
}

// fieldList reads the argument of a qualified no-cache or private: a
// comma-separated list of field names. It returns nil for the unqualified
// form (no argument, or an empty one).
func fieldList(arg string, hasArg bool) []string {
	if !hasArg {
		return nil
	}
	var out []string
	for _, f := range strings.Split(arg, ",") {
		if f = strings.TrimSpace(f); f != "" && isToken(f) {
			out = append(out, strings.ToLower(f))
		}
	}
	return out
}

// parseDelta reads delta-seconds (RFC 9111 §1.2.2): one or more digits,
// leading zeros allowed, values past MaxDelta taken as MaxDelta.
func parseDelta(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v < MaxDelta {
			v = v*10 + int64(c-'0')
		}
	}
	return min(v, MaxDelta), true
}

// forEachDirective walks one field line as a list of
// `token [ "=" ( token / quoted-string ) ]` elements (RFC 9110 §5.6.1),
// skipping empty elements and whitespace around commas. An element that
// does not fit the grammar is skipped up to the next comma outside a
// quoted string, so a "max-age=…" inside a quoted string is never read as
// a directive. Names are passed lower-cased; quoted arguments unescaped.
func forEachDirective(s string, f func(name, arg string, hasArg, quoted bool)) {
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return
		}
		j := i
		for j < len(s) && tchar(s[j]) {
			j++
		}
		name := s[i:j]
		var arg string
		hasArg, quoted, ok := false, false, name != ""
		if ok && j < len(s) && s[j] == '=' {
			hasArg = true
			j++
			if j < len(s) && s[j] == '"' {
				arg, j, ok = unquote(s, j)
				quoted = true
			} else {
				k := j
				for j < len(s) && tchar(s[j]) {
					j++
				}
				arg = s[k:j]
			}
		}
		// After the element: optional whitespace, then a comma or the end.
		k := j
		for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
			k++
		}
		if ok && k < len(s) && s[k] != ',' {
			ok = false
		}
		if !ok {
			i = skipElement(s, j)
			continue
		}
		f(strings.ToLower(name), arg, hasArg, quoted)
		i = k
	}
}

// unquote reads the quoted-string starting at s[i] == '"' and returns its
// unescaped content and the index after the closing quote; ok is false
// when it is not closed.
func unquote(s string, i int) (string, int, bool) {
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '"':
			return b.String(), j + 1, true
		case '\\':
			if j+1 < len(s) {
				j++
			}
		}
		b.WriteByte(s[j])
	}
	return "", len(s), false
}

// skipElement returns the index after the next comma at or after i that is
// not inside a quoted string (or len(s)).
func skipElement(s string, i int) int {
	inQuote := false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			return i + 1
		}
	}
	return len(s)
}

// tchar reports whether c may appear in a token (RFC 9110 §5.6.2).
func tchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !tchar(s[i]) {
			return false
		}
	}
	return s != ""
}
