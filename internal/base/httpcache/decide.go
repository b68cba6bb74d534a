package httpcache

import "time"

// Action is what to do with a request given what is stored for it.
type Action int

const (
	// Fetch: nothing usable is stored (or it has no validator); forward
	// the request and store the answer if Storable.
	Fetch Action = iota
	// Serve: answer from the stored response.
	Serve
	// ServeStale: answer from the stale stored response now and revalidate
	// it in the background (RFC 5861 stale-while-revalidate).
	ServeStale
	// Revalidate: send a conditional request built from the stored
	// response's validators (RFC 9111 §4.3.1) and answer from the stored
	// response if the origin says 304.
	Revalidate
	// Unsatisfiable: the client sent only-if-cached and nothing usable is
	// stored: answer 504 without contacting anyone (§5.2.1.7).
	Unsatisfiable
	// Bypass: the method is never answered from the cache; forward it.
	Bypass
)

// String names the action (for logs and tests).
func (a Action) String() string {
	return [...]string{"fetch", "serve", "serve-stale", "revalidate", "unsatisfiable", "bypass"}[a]
}

// Decision is Decide's answer.
type Decision struct {
	Action Action
	// Age is the stored response's current age in seconds, for the Age
	// field of a response built from it.
	Age int64
	// TTL is the freshness left in seconds (negative when stale), for
	// Cache-Status "ttl".
	TTL int64
	// Fwd is the Cache-Status "fwd" reason when the request goes forward
	// (RFC 9211 §2.2): "uri-miss", "stale", "request", "method"; empty
	// when served.
	Fwd string
}

// Decide chooses how to answer req given the stored response (stored nil
// when nothing matched its key and variant), with freshness f and arrival
// time responseTime, at now (RFC 9111 §4):
//
//   - only GET and HEAD are answered from the cache;
//   - a fresh response is served unless the request's no-cache, max-age or
//     min-fresh asks for more (§5.2.1), or the response's no-cache demands
//     validation (§4.2.4 / §5.2.2.4);
//   - a stale one is served if the request's max-stale allows it or within
//     stale-while-revalidate (then revalidated in the background), unless
//     must-revalidate, proxy-revalidate or no-cache forbid serving it stale
//     (s-maxage forbids it too unless a stale-* window is explicit);
//   - otherwise it is revalidated when it has a validator, else fetched;
//   - only-if-cached turns every forward into Unsatisfiable.
func Decide(req *Request, stored *Stored, now time.Time) Decision {
	if !req.Cacheable() {
		return Decision{Action: Bypass, Fwd: "method"}
	}
	d := decide(req, stored, now)
	if req.Dir.OnlyIfCached && d.Action != Serve && d.Action != ServeStale {
		d.Action = Unsatisfiable
	}
	return d
}

func decide(req *Request, stored *Stored, now time.Time) Decision {
	if stored == nil {
		return Decision{Action: Fetch, Fwd: "uri-miss"}
	}
	f := &stored.Fresh
	age := f.CurrentAge(stored.ResponseTime, now)
	ttl := f.Lifetime - age
	d := Decision{Age: age, TTL: ttl}
	forward := func(why string) Decision {
		d.Fwd = why
		if stored.CanRevalidate() {
			d.Action = Revalidate
		} else {
			d.Action = Fetch
		}
		return d
	}
	rd := &req.Dir
	if rd.NoCache || (rd.MaxAge != Unset && age > rd.MaxAge) {
		return forward("request")
	}
	if f.NoCache {
		return forward("stale")
	}
	if ttl > 0 {
		if rd.MinFresh != Unset && ttl < rd.MinFresh {
			return forward("request")
		}
		d.Action = Serve
		return d
	}
	staleness := -ttl
	if !f.NoStale {
		if (rd.MaxStaleAny || (rd.MaxStale != Unset && staleness <= rd.MaxStale)) && !f.ImpliedNoStale {
			d.Action = Serve
			return d
		}
		if f.StaleWhileRevalidate != Unset && staleness <= f.StaleWhileRevalidate && stored.CanRevalidate() {
			d.Action = ServeStale
			return d
		}
	}
	return forward("stale")
}

// StaleOnError reports whether a stale stored response may answer in place
// of an upstream failure (RFC 9111 §4.2.4, RFC 5861 §4). A fresh response
// always may (unless no-cache). A stale one may not when must-revalidate,
// proxy-revalidate or no-cache forbid it; otherwise it may within its
// stale-if-error window (or the request's), and, when the upstream could
// not be reached at all (disconnected: no response, as opposed to a 5xx
// answer), within cfg.StaleIfDisconnected — §4.2.4 lets a disconnected
// cache serve stale, except where s-maxage implies proxy-revalidate.
func StaleOnError(cfg Config, req *Request, stored *Stored, now time.Time, disconnected bool) bool {
	if stored == nil {
		return false
	}
	cfg = cfg.withDefaults()
	f := &stored.Fresh
	ttl := f.Lifetime - f.CurrentAge(stored.ResponseTime, now)
	if ttl > 0 && !f.NoCache {
		return true
	}
	if f.NoStale {
		return false
	}
	staleness := -ttl
	window := f.StaleIfError
	if req.Dir.StaleIfError != Unset {
		window = max(window, req.Dir.StaleIfError)
	}
	if window != Unset && staleness <= window {
		return true
	}
	return disconnected && !f.ImpliedNoStale && staleness <= int64(cfg.StaleIfDisconnected/time.Second)
}

// ErrorStatus reports the statuses RFC 5861 §4 counts as errors for
// stale-if-error.
func ErrorStatus(status int) bool {
	return status == 500 || status == 502 || status == 503 || status == 504
}
