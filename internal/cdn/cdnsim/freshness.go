package cdnsim

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"shoal/internal/base/httpcache"
)

// What a PoP stores and for how long is decided by internal/base/httpcache,
// the code the live nodes run: Storable and the freshness lifetime when a
// response arrives, Decide when a request finds a copy. The origin answers
// each URL with the Cache-Control of one class of Config.CacheControl,
// drawn per URL by a seeded hash (the same URL, the same class), with a
// Date of the moment it answers and a validator; a copy passed from PoP
// to PoP (a holder's, the shield's, a push) carries its age in Age, so it
// expires at the same moment everywhere, as live copies do. A stale copy
// is fetched again along the miss chain (a revalidation costs the round
// trip a fetch does: the simulator counts time, not bytes), unless
// stale-while-revalidate lets it answer while that happens.

// CacheControlShare is one class of the origin's responses: the URLs it
// answers with Value, in proportion to Weight.
type CacheControlShare struct {
	Weight float64
	Value  string
}

// DefaultCacheControl is the origin of DefaultConfig: every response fresh
// for a year, so that what a PoP holds stays usable until replication
// drops it (what the simulator assumed before it asked httpcache).
var DefaultCacheControl = []CacheControlShare{{Weight: 1, Value: "max-age=31536000"}}

// ParseCacheControlMix reads classes written WEIGHT:VALUE and separated by
// "|" (a Cache-Control value has commas), as in
// "70:max-age=3600|20:max-age=60, stale-while-revalidate=30|10:no-store".
func ParseCacheControlMix(s string) ([]CacheControlShare, error) {
	var out []CacheControlShare
	for part := range strings.SplitSeq(s, "|") {
		w, v, ok := strings.Cut(strings.TrimSpace(part), ":")
		weight, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
		if !ok || err != nil || weight <= 0 {
			return nil, fmt.Errorf("cache-control class %q: want WEIGHT:VALUE with a weight > 0", part)
		}
		out = append(out, CacheControlShare{Weight: weight, Value: strings.TrimSpace(v)})
	}
	return out, nil
}

// origin is the simulated origin's answers: the class boundaries, and a
// Stored header per class with everything but Date and Age.
type origin struct {
	cfg    httpcache.Config
	cum    []float64 // cumulative weights
	values []string
	seed   uint64
	get    httpcache.Request // a client's GET
	asked  httpcache.Request // a PoP asking a holder: only-if-cached
	stored http.Header       // what Decide reads of every copy: a validator
}

func newOrigin(cfg Config) (*origin, error) {
	mix := cfg.CacheControl
	if len(mix) == 0 {
		return nil, fmt.Errorf("cdnsim: no cache-control class")
	}
	o := &origin{cfg: cfg.HTTP, seed: cfg.Seed, stored: http.Header{"Etag": {`"v"`}},
		get:   httpcache.ParseRequest(http.MethodGet, nil),
		asked: httpcache.ParseRequest(http.MethodGet, http.Header{"Cache-Control": {"only-if-cached"}})}
	total := 0.0
	for _, c := range mix {
		if c.Weight <= 0 {
			return nil, fmt.Errorf("cdnsim: cache-control class %q: weight %v", c.Value, c.Weight)
		}
		total += c.Weight
		o.cum = append(o.cum, total)
		o.values = append(o.values, c.Value)
	}
	return o, nil
}

// class is url's Cache-Control.
func (o *origin) class(url string) string {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(o.seed >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(url))
	x := float64(mix64(h.Sum64())>>11) / (1 << 53) * o.cum[len(o.cum)-1]
	for i, c := range o.cum {
		if x < c {
			return o.values[i]
		}
	}
	return o.values[len(o.values)-1]
}

// copyState is a PoP's copy of one URL as httpcache sees it: when it
// arrived and what its header said about its freshness.
type copyState struct {
	at    time.Time
	fresh httpcache.Freshness
}

// answer is what a PoP receiving url at now with the given age (0 from the
// origin) may keep: the copy, or false when httpcache says not to store
// it (no-store, private, nothing that could make it reusable).
func (o *origin) answer(url string, age int64, now time.Time) (copyState, bool) {
	h := http.Header{"Date": {now.Add(-time.Duration(age) * time.Second).UTC().Format(http.TimeFormat)}, "Etag": {`"v"`}}
	if v := o.class(url); v != "" {
		h.Set("Cache-Control", v)
	}
	if age > 0 {
		h.Set("Age", strconv.FormatInt(age, 10))
	}
	f := httpcache.ComputeFreshness(o.cfg, http.StatusOK, h, now, now)
	if ok, _ := httpcache.Storable(o.cfg, &o.get, http.StatusOK, h, &f); !ok {
		return copyState{}, false
	}
	return copyState{at: now, fresh: f}, true
}

// decide is Decide for req and c at now.
func (o *origin) decide(req *httpcache.Request, c copyState, now time.Time) httpcache.Decision {
	st := httpcache.Stored{Status: http.StatusOK, Header: o.stored, RequestTime: c.at, ResponseTime: c.at, Fresh: c.fresh}
	return httpcache.Decide(req, &st, now)
}

// usable reports whether PoP i's copy of url may answer req now, and
// whether it may only while being revalidated (stale-while-revalidate),
// with the copy's current age.
func (s *sim) usable(i int, url string, req *httpcache.Request) (ok, revalidate bool, age int64) {
	c, held := s.pops[i].copies[url]
	if !held {
		return false, false, 0
	}
	d := s.org.decide(req, c, s.now)
	return d.Action == httpcache.Serve || d.Action == httpcache.ServeStale, d.Action == httpcache.ServeStale, d.Age
}

// mix64 is splitmix64's finaliser: FNV-1a's high bits follow short keys
// that differ in their last bytes too closely for a uniform draw.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
