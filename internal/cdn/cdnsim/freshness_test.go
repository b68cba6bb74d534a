package cdnsim

import (
	"testing"
	"time"
)

// What a PoP keeps, and for how long, is httpcache's decision: one PoP,
// one URL asked at 0, 30, 90 and 100 s (hand-checked below), under four
// origins.
func TestFreshnessDecides(t *testing.T) {
	m, err := Generate(DefaultGenConfig(4))
	if err != nil {
		t.Fatal(err)
	}
	var w Workload
	for _, s := range []int{0, 30, 90, 100} {
		w.Requests = append(w.Requests, Request{At: time.Duration(s) * time.Second, URL: "/a", Size: 100})
	}
	w.Clients = 1
	for _, c := range []struct {
		cc                string
		hits, stale, nots uint64
		origin            float64
	}{
		// A year: a miss, then three hits.
		{"max-age=31536000", 3, 0, 0, 0.25},
		// A minute: a miss, a hit at 30 s, stale at 90 s (fetched again,
		// fresh until 150 s), a hit at 100 s.
		{"max-age=60", 2, 1, 0, 0.5},
		// Stale at 90 s but within stale-while-revalidate: answered, and
		// refreshed behind the answer.
		{"max-age=60, stale-while-revalidate=60", 3, 0, 0, 0.25},
		// Never stored: every request goes to the origin.
		{"no-store", 0, 0, 4, 1},
	} {
		cfg := DefaultConfig()
		cfg.PoPs, cfg.KillAt, cfg.CacheControl = 1, 0, []CacheControlShare{{Weight: 1, Value: c.cc}}
		r, err := Run(cfg, m, &w)
		if err != nil {
			t.Fatal(err)
		}
		hits := uint64(r.HitRatio*4 + 0.5)
		if hits != c.hits || r.StaleMisses != c.stale || r.NotStored != c.nots || r.OriginFetchRatio != c.origin {
			t.Errorf("%s: %d hits, %d stale misses, %d not stored, origin ratio %v; want %d, %d, %d, %v",
				c.cc, hits, r.StaleMisses, r.NotStored, r.OriginFetchRatio, c.hits, c.stale, c.nots, c.origin)
		}
	}
}

// The classes are drawn per URL, in proportion to their weights, and the
// same URL always gets the same class.
func TestCacheControlMix(t *testing.T) {
	mix, err := ParseCacheControlMix("3:max-age=60, public|1:no-store")
	if err != nil || len(mix) != 2 || mix[0].Value != "max-age=60, public" || mix[1].Weight != 1 {
		t.Fatalf("parse: %+v %v", mix, err)
	}
	for _, bad := range []string{"", "max-age=60", "0:no-store", "x:no-store"} {
		if _, err := ParseCacheControlMix(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	cfg := DefaultConfig()
	cfg.CacheControl = mix
	o, err := newOrigin(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 4000 {
		u := "/f" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		c := o.class(u)
		if c == "no-store" {
			n++
		}
		if o.class(u) != c {
			t.Fatal("a URL changed class")
		}
	}
	if n < 850 || n > 1150 { // a quarter of 4,000, give or take 5 σ (σ ≈ 27)
		t.Errorf("%d of 4000 URLs no-store, want about 1000", n)
	}
}
