// Package httpcache holds a shared HTTP cache's decisions once, as pure
// functions of the messages and a clock passed in (no I/O), so that the live
// nodes in cache mode and the CDN simulator decide alike.
//
// What it answers, and where each rule comes from:
//
//   - the cache key (Key, VariantKey): scheme, host, path and query, plus the
//     values of the request fields a response's Vary names, normalised so
//     that equivalent requests share a variant (RFC 9111 §4.1);
//   - whether a response may be stored (Storable, RFC 9111 §3 and §3.5):
//     no-store, private, Authorization, must-understand, Vary: *, and which
//     status codes are understood and heuristically cacheable
//     (RFC 9110 §15.1);
//   - its freshness lifetime (Lifetime, RFC 9111 §4.2.1): a targeted field
//     (CDN-Cache-Control, RFC 9213; Surrogate-Control, W3C Edge Architecture
//     1.0) when present, otherwise s-maxage, max-age, Expires − Date, and a
//     heuristic of Config.HeuristicFraction of the Last-Modified age only
//     where §4.2.2 allows one;
//   - its current age (Age, §4.2.3), with an Age field that is not exactly
//     one non-negative integer taken as "infinitely old";
//   - what to do with a request given a stored response (Decide): serve it
//     fresh, serve it stale while revalidating (RFC 5861), revalidate it
//     (§4.3.1, If-None-Match / If-Modified-Since), or fetch — honouring the
//     request's no-cache, max-age, max-stale, min-fresh and only-if-cached
//     (§5.2.1), and whether a stale response may stand in for an error
//     (StaleOnError: RFC 5861 stale-if-error, or RFC 9111 §4.2.4 when the
//     upstream is unreachable; must-revalidate, proxy-revalidate and
//     no-cache forbid it, s-maxage too unless stale-if-error allows it);
//   - the stored header (StoreHeader): hop-by-hop fields and those named by
//     Connection removed (RFC 9110 §7.6.1), as well as those a qualified
//     private or no-cache names; and how a 304 updates it (Update, §4.3.4);
//   - which URLs an unsafe method's success invalidates (Invalidations, §4.4);
//   - a client's conditional request answered from a stored response
//     (Precondition, RFC 9110 §13.2.2);
//   - the Cache-Status field (RFC 9211) describing what the cache did.
//
// Cache-Control directives are parsed here (ParseDirectives) rather than by
// pquerna/cachecontrol, the usual Go library, because of what it does with
// the inputs the cache-tests suite sends: it returns an error for the whole
// field at the first malformed directive (RFC 9111 §5.2 wants only that
// directive ignored), matches directive names case-sensitively
// ("MaX-AgE" becomes an extension), lets a later max-age overwrite an
// earlier one (§4.2.1: use the first, or treat as stale), and knows neither
// stale-while-revalidate, stale-if-error nor must-understand. The parser is
// a small tokenizer over RFC 9110 §5.6's list syntax, fuzzed by
// FuzzParseDirectives.
package httpcache

import "time"

// Config holds a cache's choices where the RFCs leave one. Zero fields take
// DefaultConfig's values (see Config.withDefaults).
type Config struct {
	// Device names this cache in Surrogate-Control targeting
	// ("max-age=60;shoal") and in the Surrogate-Capability it announces.
	// Default "shoal".
	Device string
	// HeuristicFraction is the share of a response's Last-Modified age
	// taken as its heuristic freshness lifetime (RFC 9111 §4.2.2 suggests
	// 10 %). Default 0.1.
	HeuristicFraction float64
	// HeuristicMax caps a heuristic lifetime, so that a file unchanged for
	// years is still rechecked daily (Squid and Traffic Server cap it too).
	// Default 24 h.
	HeuristicMax time.Duration
	// StaleIfDisconnected is how stale a stored response may be and still
	// answer when the upstream cannot be reached at all (RFC 9111 §4.2.4
	// allows a disconnected cache to serve stale unless a directive
	// forbids it). Default 24 h.
	StaleIfDisconnected time.Duration
}

// Defaults for Config.
const (
	DefaultDevice              = "shoal"
	DefaultHeuristicFraction   = 0.1
	DefaultHeuristicMax        = 24 * time.Hour
	DefaultStaleIfDisconnected = 24 * time.Hour
)

// DefaultConfig is the Config a node uses unless told otherwise.
func DefaultConfig() Config {
	return Config{Device: DefaultDevice, HeuristicFraction: DefaultHeuristicFraction, HeuristicMax: DefaultHeuristicMax,
		StaleIfDisconnected: DefaultStaleIfDisconnected}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Device == "" {
		c.Device = d.Device
	}
	if c.HeuristicFraction <= 0 {
		c.HeuristicFraction = d.HeuristicFraction
	}
	if c.HeuristicMax <= 0 {
		c.HeuristicMax = d.HeuristicMax
	}
	if c.StaleIfDisconnected == 0 {
		c.StaleIfDisconnected = d.StaleIfDisconnected
	}
	return c
}
