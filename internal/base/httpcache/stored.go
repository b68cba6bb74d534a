package httpcache

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

// Stored is what a cache keeps about a stored response besides its body:
// the status, the header as it will be replayed, when its request was sent
// and when it arrived, and the freshness computed from them.
type Stored struct {
	Status       int
	Header       http.Header
	RequestTime  time.Time
	ResponseTime time.Time
	Fresh        Freshness
	// Vary are the request fields the response varies on (VaryNames).
	Vary []string
}

// NewStored prepares a response for storing: the header as StoreHeader
// leaves it, a Date added when the response had none (RFC 9110 §6.6.1: a
// cache with a clock must), and its freshness.
func NewStored(cfg Config, status int, h http.Header, requestTime, responseTime time.Time) *Stored {
	cfg = cfg.withDefaults()
	sh := StoreHeader(cfg, h)
	if len(sh.Values("Date")) == 0 {
		sh.Set("Date", responseTime.UTC().Format(http.TimeFormat))
	}
	vary, _ := VaryNames(sh)
	return &Stored{
		Status: status, Header: sh, RequestTime: requestTime, ResponseTime: responseTime,
		Fresh: ComputeFreshness(cfg, status, sh, requestTime, responseTime), Vary: vary,
	}
}

// CanRevalidate reports whether the stored response has a validator.
func (s *Stored) CanRevalidate() bool { return hasValidator(s.Header) }

// hopByHop are the fields that describe one connection, not the message
// (RFC 9110 §7.6.1), and the proxy-authentication fields that concern only
// the next hop (§11.7): never stored nor forwarded.
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Transfer-Encoding", "Trailer", "Upgrade",
	"Proxy-Authenticate", "Proxy-Authentication-Info", "Proxy-Authorization",
}

// StripHopByHop removes from h, in place, the hop-by-hop fields and every
// field the Connection field names (RFC 9110 §7.6.1). A proxy does this in
// both directions before forwarding.
func StripHopByHop(h http.Header) {
	for _, line := range h.Values("Connection") {
		for _, f := range strings.Split(line, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, f := range hopByHop {
		h.Del(f)
	}
}

// StoreHeader returns a copy of a response header as a shared cache may
// keep it (RFC 9111 §3.1): hop-by-hop fields and those Connection names
// removed, and those named by a qualified private (§5.2.2.7, a shared cache
// must not store them) or qualified no-cache (§5.2.2.4: they may not be
// reused without revalidation, so shoal does not keep them at all).
func StoreHeader(cfg Config, h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	StripHopByHop(out)
	d, _ := ResponseDirectives(out, cfg.withDefaults().Device)
	for _, f := range d.PrivateFields {
		out.Del(f)
	}
	for _, f := range d.NoCacheFields {
		out.Del(f)
	}
	return out
}

// notUpdated are the fields a 304 does not replace in the stored response:
// Content-Length (RFC 9111 §3.2), and those describing the stored
// representation's bytes, which a 304 has no body to change.
var notUpdated = []string{"Content-Length", "Content-Encoding", "Content-Range", "Content-MD5", "ETag"}

// Update applies a 304 (or a HEAD's 200) to the stored response (RFC 9111
// §3.2 and §4.3.4): each field the new response carries replaces the stored
// one, except the hop-by-hop ones and notUpdated; Age is the new
// response's (absent there means none), and the request and response times
// become the revalidation's, so the freshness starts again from the new
// response. It returns a new Stored; s is not modified.
func (s *Stored) Update(cfg Config, h http.Header, requestTime, responseTime time.Time) *Stored {
	cfg = cfg.withDefaults()
	nh := h.Clone()
	StripHopByHop(nh)
	merged := s.Header.Clone()
	merged.Del("Age")
	for name, vals := range nh {
		if slices.ContainsFunc(notUpdated, func(n string) bool { return strings.EqualFold(n, name) }) {
			continue
		}
		merged[name] = slices.Clone(vals)
	}
	d, _ := ResponseDirectives(merged, cfg.Device)
	for _, f := range d.PrivateFields {
		merged.Del(f)
	}
	for _, f := range d.NoCacheFields {
		merged.Del(f)
	}
	if len(merged.Values("Date")) == 0 {
		merged.Set("Date", responseTime.UTC().Format(http.TimeFormat))
	}
	vary, _ := VaryNames(merged)
	return &Stored{
		Status: s.Status, Header: merged, RequestTime: requestTime, ResponseTime: responseTime,
		Fresh: ComputeFreshness(cfg, s.Status, merged, requestTime, responseTime), Vary: vary,
	}
}

// unsafeMethod reports methods RFC 9110 §9.2.1 does not define as safe.
func unsafeMethod(m string) bool {
	switch m {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return false
	}
	return true
}

// Invalidations returns the primary keys an unsafe request's response
// invalidates (RFC 9111 §4.4): on a non-error status (2xx or 3xx), the
// request's own key and those of the Location and Content-Location URLs
// that have the same scheme and host (a cache must not invalidate another
// origin's URLs on this origin's word). key is the request's Key; base its
// scheme and host. Nil for safe methods and error statuses.
func Invalidations(method string, status int, key, scheme, host string, h http.Header) []string {
	if !unsafeMethod(method) || status < 200 || status >= 400 {
		return nil
	}
	keys := []string{key}
	origin := Key(scheme, host, "/")
	origin = origin[:len(origin)-1]
	for _, name := range []string{"Location", "Content-Location"} {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			continue
		}
		var k string
		switch {
		case strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//"):
			k = origin + v
		case strings.Contains(v, "://"):
			sch, rest, _ := strings.Cut(v, "://")
			hostPart, path, _ := strings.Cut(rest, "/")
			k = Key(sch, hostPart, "/"+path)
		default:
			continue // relative paths and network-path references: not resolved
		}
		if strings.HasPrefix(k, origin+"/") && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}
