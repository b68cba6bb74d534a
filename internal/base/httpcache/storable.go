package httpcache

import (
	"net/http"
	"strings"
)

// Request is what the cache reads from a client's request once, before
// looking anything up.
type Request struct {
	Method string
	// Dir are the request's Cache-Control directives (RFC 9111 §5.2.1).
	// Pragma is not read: RFC 9111 §5.4 deprecates it.
	Dir Directives
	// Authorization: the request carried credentials (§3.5).
	Authorization bool
}

// ParseRequest reads a request's method and the caching fields of its
// header.
func ParseRequest(method string, h http.Header) Request {
	return Request{
		Method:        method,
		Dir:           ParseDirectives(h.Values("Cache-Control")),
		Authorization: len(h.Values("Authorization")) > 0,
	}
}

// Cacheable reports whether the method's responses are ever answered from
// the cache: GET, and HEAD from a stored GET response (RFC 9110 §9.3.2).
// Everything else goes through (and an unsafe method may invalidate,
// Invalidations).
func (r *Request) Cacheable() bool { return r.Method == "GET" || r.Method == "HEAD" }

// Why a response was not stored (Storable's second result), also used as
// Cache-Status "detail" values.
const (
	NotMethod         = "method"
	NotStatus         = "status"
	NotRequestNoStore = "request-no-store"
	NotNoStore        = "no-store"
	NotPrivate        = "private"
	NotAuthorization  = "authorization"
	NotVaryStar       = "vary-star"
	NotUnderstood     = "must-understand"
	NotExplicit       = "no-freshness"
	NotUseful         = "never-reusable"
)

// Storable decides whether a shared cache may store a response to req
// (RFC 9111 §3), and if not, why:
//   - only responses to GET are stored (HEAD and other methods are
//     forwarded; §3's "the request method is understood by the cache");
//   - a final status, but not 206 (partial content is not kept) nor 304
//     (which updates a stored response instead, §4.3.4);
//   - must-understand with a status this cache understands overrides
//     no-store (§5.2.2.3); with another status it forbids storing;
//   - no no-store in the request or the response, no unqualified private
//     (a shared cache, §5.2.2.7), no Vary: * (it never matches, §4.1);
//   - credentials (Authorization) only with public, must-revalidate or
//     s-maxage (§3.5);
//   - and a reason to keep it: public, Expires, max-age, s-maxage, a
//     targeted field, or a heuristically cacheable status (§3's last
//     condition).
//
// Beyond §3, a response that could never be reused is not stored: one with
// no freshness, no validator to revalidate it by, and no stale-* window
// (storing it would only evict something useful).
func Storable(cfg Config, req *Request, status int, h http.Header, f *Freshness) (bool, string) {
	cfg = cfg.withDefaults()
	d, targeted := ResponseDirectives(h, cfg.Device)
	switch {
	case req.Method != "GET":
		return false, NotMethod
	case status < 200 || status == 206 || status == 304:
		return false, NotStatus
	case req.Dir.NoStore:
		return false, NotRequestNoStore
	case d.MustUnderstand && !Understood(status):
		return false, NotUnderstood
	case d.NoStore && !d.MustUnderstand:
		return false, NotNoStore
	case d.Private:
		return false, NotPrivate
	case req.Authorization && !d.Public && !d.MustRevalidate && d.SMaxAge == Unset:
		return false, NotAuthorization
	}
	if _, star := VaryNames(h); star {
		return false, NotVaryStar
	}
	explicit := d.Public || d.MaxAge != Unset || d.SMaxAge != Unset || targeted ||
		len(h.Values("Expires")) > 0 || HeuristicallyCacheable(status)
	if !explicit {
		return false, NotExplicit
	}
	if f != nil && f.Lifetime <= f.InitialAge && !hasValidator(h) &&
		f.StaleWhileRevalidate <= 0 && f.StaleIfError <= 0 {
		return false, NotUseful
	}
	return true, ""
}

// hasValidator reports whether the response can be revalidated.
func hasValidator(h http.Header) bool {
	return h.Get("ETag") != "" || h.Get("Last-Modified") != ""
}

// Validators returns the conditional fields a revalidation of a stored
// response sends (RFC 9111 §4.3.1): If-None-Match with its entity tag, and
// If-Modified-Since with its Last-Modified. Both empty means it cannot be
// revalidated, only fetched again.
func Validators(h http.Header) (ifNoneMatch, ifModifiedSince string) {
	if et := strings.TrimSpace(h.Get("ETag")); et != "" {
		ifNoneMatch = et
	}
	if lm := strings.TrimSpace(h.Get("Last-Modified")); lm != "" {
		ifModifiedSince = lm
	}
	return ifNoneMatch, ifModifiedSince
}
