package httpcache

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Key is a request's primary cache key (RFC 9111 §4.1's "target URI"):
// scheme, host and the request-target's path and query as sent, as
// "scheme://host/path?query". The host is lower-cased and a port that is
// the scheme's default dropped, so "Example.com:80" and "example.com" share
// entries; the path and query are kept byte for byte (a different query is a
// different resource). An absolute-form target ("http://h/p") contributes
// only its path and query: the host comes from Host, which a server must
// make equal to the target's authority (RFC 9112 §3.2.2). A fragment is
// never part of a key.
func Key(scheme, host, target string) string {
	return string(AppendKey(make([]byte, 0, len(scheme)+len(host)+len(target)+4), scheme, host, target))
}

// AppendKey appends Key(scheme, host, target) to dst: the same bytes,
// built without allocating when dst has room, so a cache's hit path can
// look a request up without making a string of its key.
func AppendKey(dst []byte, scheme, host, target string) []byte {
	start := len(dst)
	if scheme == "" {
		scheme = "http"
	}
	dst = appendLower(dst, scheme)
	sch := string(dst[start:]) // compared below, never kept: no allocation
	dst = append(dst, "://"...)
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		if p := host[i+1:]; (sch == "http" && p == "80") || (sch == "https" && p == "443") {
			host = host[:i]
		}
	}
	dst = appendLower(dst, host)
	if i := strings.Index(target, "://"); i > 0 && !strings.HasPrefix(target, "/") {
		rest := target[i+3:]
		if j := strings.IndexAny(rest, "/?"); j >= 0 {
			target = rest[j:]
		} else {
			target = "/"
		}
	}
	if i := strings.IndexByte(target, '#'); i >= 0 {
		target = target[:i]
	}
	if target == "" || target[0] == '?' {
		dst = append(dst, '/')
	}
	return append(dst, target...)
}

// appendLower appends s with ASCII upper-case letters lowered, as
// strings.ToLower does for the ASCII host names and schemes of keys.
func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// VaryNames returns the request fields a response's Vary names, lower-cased,
// deduplicated and sorted (so two responses varying on the same fields in
// another order share a variant layout), and whether Vary contains "*",
// which no request ever matches (RFC 9111 §4.1).
func VaryNames(h http.Header) (names []string, star bool) {
	for _, line := range h.Values("Vary") {
		for _, f := range strings.Split(line, ",") {
			f = strings.ToLower(strings.TrimSpace(f))
			switch {
			case f == "*":
				star = true
			case f != "" && !slices.Contains(names, f):
				names = append(names, f)
			}
		}
	}
	slices.Sort(names)
	return names, star
}

// VariantKey is the key of the variant of primary that a request with
// header h selects, for a response that varies on names (as VaryNames
// returns them). It appends to primary, after a NUL that cannot occur in a
// URL, each name with the request's normalised value, or with a mark for
// "absent" (an absent field and an empty one are different requests, §4.1).
// With no names it is primary itself.
//
// Normalisation (§4.1 allows any that keeps semantics): a field's lines are
// combined with ", "; whitespace around list commas is dropped; for
// Accept-Language, Accept-Encoding and Accept-Charset the members are
// lower-cased and ordered by q-value, then name, since their order carries no
// meaning beyond the q-values.
func VariantKey(primary string, names []string, h http.Header) string {
	if len(names) == 0 {
		return primary
	}
	var b strings.Builder
	b.WriteString(primary)
	for _, n := range names {
		b.WriteByte(0)
		b.WriteString(n)
		lines := h.Values(n)
		if lines == nil {
			b.WriteByte(1) // absent
			continue
		}
		b.WriteByte('=')
		b.WriteString(normaliseField(n, lines))
	}
	return b.String()
}

// VariantPrefix is the prefix every variant key of primary starts with
// (VariantKey with at least one name), for invalidating all variants of a
// URL by a prefix walk.
func VariantPrefix(primary string) string { return primary + "\x00" }

func normaliseField(name string, lines []string) string {
	members := make([]string, 0, len(lines))
	for _, l := range lines {
		for _, m := range strings.Split(l, ",") {
			if m = strings.TrimSpace(m); m != "" {
				members = append(members, strings.Join(strings.Fields(m), ""))
			}
		}
	}
	switch name {
	case "accept-language", "accept-encoding", "accept-charset":
		for i, m := range members {
			members[i] = strings.ToLower(m)
		}
		slices.SortStableFunc(members, func(a, b string) int {
			if qa, qb := qvalue(a), qvalue(b); qa != qb {
				return qb - qa // higher q first
			}
			return strings.Compare(a, b)
		})
	}
	return strings.Join(members, ",")
}

// qvalue returns a member's weight (";q=0.5") in thousandths; 1000 when
// absent or malformed.
func qvalue(m string) int {
	_, params, ok := strings.Cut(m, ";")
	if !ok {
		return 1000
	}
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.TrimSpace(k) != "q" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1 {
			return 1000
		}
		return int(f*1000 + 0.5)
	}
	return 1000
}
