package httpcache

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// Freshness is what a stored response's fields say about its reuse,
// computed once when it is stored (and again when a 304 updates it), so a
// hit only adds the time it has been resident.
type Freshness struct {
	// Lifetime is the freshness lifetime in seconds (RFC 9111 §4.2.1).
	Lifetime int64
	// InitialAge is corrected_initial_age in seconds (§4.2.3): the age the
	// response had when it arrived. MaxDelta when its Age field was
	// invalid, so it is never fresh.
	InitialAge int64
	// Heuristic: Lifetime is a heuristic (§4.2.2), not explicit.
	Heuristic bool
	// NoCache: the response must be revalidated before every reuse
	// (no-cache, §5.2.2.4).
	NoCache bool
	// NoStale: never served stale, not even where a stale-* directive would
	// allow it (must-revalidate, proxy-revalidate, no-cache; §4.2.4).
	NoStale bool
	// ImpliedNoStale: s-maxage's implied proxy-revalidate (§5.2.2.10):
	// never served stale unless stale-while-revalidate or stale-if-error
	// says so explicitly.
	ImpliedNoStale bool
	// StaleWhileRevalidate and StaleIfError are RFC 5861's windows in
	// seconds, Unset when absent.
	StaleWhileRevalidate, StaleIfError int64
}

// ComputeFreshness reads a response's freshness for a shared cache from its
// status and header, the time its request was sent and the time it arrived.
func ComputeFreshness(cfg Config, status int, h http.Header, requestTime, responseTime time.Time) Freshness {
	cfg = cfg.withDefaults()
	d, targeted := ResponseDirectives(h, cfg.Device)
	date, ok := singleDate(h, "Date")
	if !ok {
		date = responseTime // §4.2.3: no valid Date, use the time it arrived
	}
	f := Freshness{
		InitialAge:           initialAge(h, date, requestTime, responseTime),
		NoCache:              d.NoCache,
		NoStale:              d.MustRevalidate || d.ProxyRevalidate || d.NoCache,
		ImpliedNoStale:       d.SMaxAge != Unset,
		StaleWhileRevalidate: d.StaleWhileRevalidate,
		StaleIfError:         d.StaleIfError,
	}
	f.Lifetime, f.Heuristic = lifetime(cfg, status, h, &d, targeted, date)
	return f
}

// lifetime picks the freshness lifetime in §4.2.1's order for a shared
// cache: s-maxage, max-age, Expires − Date; then a heuristic where §4.2.2
// allows one. With a targeted field, Expires is ignored with the rest of
// Cache-Control (RFC 9213 §2.1).
func lifetime(cfg Config, status int, h http.Header, d *Directives, targeted bool, date time.Time) (int64, bool) {
	switch {
	case d.SMaxAge != Unset:
		return d.SMaxAge, false
	case d.MaxAge != Unset:
		return d.MaxAge, false
	}
	if !targeted && len(h.Values("Expires")) > 0 {
		exp, ok := singleDate(h, "Expires")
		if !ok { // invalid ("0") or repeated: already expired (§5.3)
			return 0, false
		}
		return max(int64(exp.Sub(date)/time.Second), 0), false
	}
	if !HeuristicallyCacheable(status) && !d.Public {
		return 0, false
	}
	lm, ok := singleDate(h, "Last-Modified")
	if !ok || !lm.Before(date) {
		return 0, true
	}
	life := time.Duration(float64(date.Sub(lm)) * cfg.HeuristicFraction)
	return int64(min(life, cfg.HeuristicMax) / time.Second), true
}

// initialAge is corrected_initial_age (§4.2.3). An Age field that is not
// exactly one line of digits (a list, a sign, a fraction, a parameter) is
// untrustworthy: the response is then taken as infinitely old.
func initialAge(h http.Header, date, requestTime, responseTime time.Time) int64 {
	ageValue := int64(0)
	if lines := h.Values("Age"); len(lines) > 0 {
		v, ok := parseDelta(strings.TrimSpace(lines[0]))
		if len(lines) > 1 || !ok {
			return MaxDelta
		}
		ageValue = v
	}
	apparent := max(responseTime.Sub(date), 0)
	delay := max(responseTime.Sub(requestTime), 0)
	corrected := ageValue + int64(delay/time.Second)
	return max(int64(apparent/time.Second), corrected)
}

// singleDate parses a date field that appears exactly once (a repeated date
// field is as good as invalid, §4.2.1). Go's http.ParseTime reads the three
// formats RFC 9110 §5.6.7 requires recipients to accept.
func singleDate(h http.Header, name string) (time.Time, bool) {
	lines := h.Values(name)
	if len(lines) != 1 {
		return time.Time{}, false
	}
	t, err := http.ParseTime(strings.TrimSpace(lines[0]))
	return t, err == nil
}

// CurrentAge is the response's age in seconds at now (§4.2.3): its initial
// age plus the time it has been resident.
func (f *Freshness) CurrentAge(responseTime, now time.Time) int64 {
	resident := max(now.Sub(responseTime), 0) / time.Second
	if f.InitialAge >= MaxDelta || int64(resident) > math.MaxInt64-f.InitialAge {
		return MaxDelta
	}
	return min(f.InitialAge+int64(resident), MaxDelta)
}

// HeuristicallyCacheable reports the status codes RFC 9110 §15.1 defines as
// heuristically cacheable: a response with one of them may be stored and
// given a heuristic lifetime without explicit freshness.
func HeuristicallyCacheable(status int) bool {
	switch status {
	case 200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501:
		return true
	}
	return false
}

// Understood reports whether the status code is one RFC 9110 defines (or
// a registered one in common use), which is what must-understand
// (RFC 9111 §5.2.2.3) asks a cache to know before it stores a response.
func Understood(status int) bool {
	switch {
	case status >= 200 && status <= 206, status >= 300 && status <= 308 && status != 306,
		status >= 400 && status <= 418, status >= 421 && status <= 426, status == 428, status == 429,
		status == 431, status == 451, status >= 500 && status <= 505, status == 507, status == 511:
		return true
	}
	return false
}
