package sim

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestDigestStaleness: with digests (Config.DigestPeriod), cgdsf's
// CachedElsewhere on node 0 learns of node 1's copy only at the first
// digest round after node 1 cached it, and forgets it only at the first
// round after node 1 dropped it, as a live node does with its peers'
// digests; with DigestPeriod < 0 it sees node 1's cache at once. A node
// never counts its own copy. Period 2 s; node 1 caches /a at 0.5 s and
// drops it at 4.5 s.
func TestDigestStaleness(t *testing.T) {
	const s = int64(time.Second)
	steps := []struct {
		at     int64
		action string // "add", "remove" or "" (just ask)
		// want: node 0's CachedElsewhere("/a") with digests and exactly;
		// self: node 1's own (always false).
		digest, exact bool
	}{
		{0, "", false, false},
		{s / 2, "add", false, true},
		{s * 19 / 10, "", false, true},
		{2 * s, "", true, true}, // the round at 2 s sees it
		{3 * s, "", true, true},
		{s * 9 / 2, "remove", true, false}, // the digest of 4 s still has it
		{s * 59 / 10, "", true, false},
		{6 * s, "", false, false}, // the round at 6 s drops it
	}
	for _, mode := range []struct {
		name   string
		period time.Duration
	}{{"digest", 2 * time.Second}, {"exact", -1}} {
		sm, err := newSim(Config{Policy: "wrr", Nodes: 2, Cache: "cgdsf", CacheBytes: 1 << 20, DigestPeriod: mode.period},
			NewSliceSource(nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range steps {
			sm.advance(st.at)
			switch st.action {
			case "add":
				sm.nodes[1].cache.Add("/a", struct{}{}, 100)
			case "remove":
				sm.nodes[1].cache.Remove("/a")
			}
			want := st.exact
			if mode.period > 0 {
				want = st.digest
			}
			if got := sm.cachedElsewhere(0, "/a"); got != want {
				t.Errorf("%s at %v (%s): node 0 sees /a elsewhere = %v, want %v", mode.name, time.Duration(st.at), st.action, got, want)
			}
			if sm.cachedElsewhere(1, "/a") {
				t.Errorf("%s at %v: node 1 counts its own copy as elsewhere", mode.name, time.Duration(st.at))
			}
		}
	}
}

// TestDigestDefault: DigestPeriod 0 is the nodes' default period (2 s).
func TestDigestDefault(t *testing.T) {
	sm, err := newSim(Config{Policy: "wrr", Nodes: 2, Cache: "cgdsf", CacheBytes: 1 << 20}, NewSliceSource(nil))
	if err != nil {
		t.Fatal(err)
	}
	if sm.digests == nil || sm.digestEvery != int64(2*time.Second) {
		t.Errorf("digests %v every %v, want digests every 2s", sm.digests != nil, time.Duration(sm.digestEvery))
	}
}

// TestGDSFCost: which object a node's cache evicts under each cost model.
// Capacity 410 B; node 1 caches /a (10 B); node 0 caches /a (10 B) and /b
// (400 B), then /c (10 B) needs room (nothing is refused as too large).
// H = F·C/S with F = 1, L = 0; the node cost is cache.DiskCost, 1 + S/41666:
//
//	node cost, cgdsf: /a is a duplicate, C ≈ 1/10: H ≈ 0.01; /b: 1.01/400 ≈ 0.0025 → /b goes
//	disk cost, cgdsf: /a C = 2·40 µs = 0.08 ms: H = 0.008; /b C = Disk(400) = 28.41 ms: H = 0.071 → /a goes
//	node cost, gdsf: /a H ≈ 1/10 = 0.1; /b ≈ 0.0025 → /b goes
//	disk cost, gdsf: /a H = 28.41/10 = 2.841; /b 0.071 → /b goes
func TestGDSFCost(t *testing.T) {
	cases := []struct {
		cache, cost, evicted string
	}{
		{"cgdsf", GDSFNode, "/b"},
		{"cgdsf", GDSFDisk, "/a"},
		{"gdsf", GDSFNode, "/b"},
		{"gdsf", GDSFDisk, "/b"},
	}
	for _, c := range cases {
		costs := DefaultCosts()
		costs.NoCacheAbove = 1 << 20
		sm, err := newSim(Config{Policy: "wrr", Nodes: 2, Cache: c.cache, CacheBytes: 410, GDSFCost: c.cost, DigestPeriod: -1, Costs: &costs},
			NewSliceSource(nil))
		if err != nil {
			t.Fatal(err)
		}
		n0 := sm.nodes[0].cache
		sm.nodes[1].cache.Add("/a", struct{}{}, 10)
		n0.Add("/a", struct{}{}, 10)
		n0.Add("/b", struct{}{}, 400)
		n0.Add("/c", struct{}{}, 10)
		for _, k := range []string{"/a", "/b", "/c"} {
			_, ok := n0.Peek(k)
			if want := k != c.evicted; ok != want {
				t.Errorf("%s, cost %q: %s cached = %v, want %v", c.cache, c.cost, k, ok, want)
			}
		}
	}
	if _, err := newSim(Config{Policy: "wrr", Nodes: 1, Cache: "gdsf", GDSFCost: "time"}, NewSliceSource(nil)); err == nil {
		t.Error(`GDSFCost "time" accepted`)
	}
}

// TestHitRatios: the hit ratios are requests and requested bytes served
// from a memory. One node; /a (8 KiB) twice, /b (600 KiB, above the 500 KiB
// cache threshold, so from disk) once: 1 hit of 3 requests, and 8,192 of
// 2·8,192 + 614,400 = 630,784 bytes from memory.
func TestHitRatios(t *testing.T) {
	acc := append(repeat("/a", 8<<10, 2), Access{URL: "/b", Size: 600 << 10})
	res, err := Run(Config{Policy: "wrr", Nodes: 1, PerNode: 1}, NewSliceSource(acc))
	if err != nil {
		t.Fatal(err)
	}
	if !near(res.HitRatio, 1.0/3, 1e-12) || !near(res.ByteHitRatio, 8192.0/630784, 1e-12) {
		t.Errorf("hit ratio %v, byte hit ratio %v; want 1/3, 8192/630784", res.HitRatio, res.ByteHitRatio)
	}
}

// TestFetchBytes: fetch_bytes_per_request is the objects moved between
// nodes' memories alone. weblins behind its layer-4 switch also pays a
// location query and reply (84 + 72 B) per request, so internal − fetch
// bytes is exactly 156 B; with 1,000-byte objects the fetch bytes are
// whole objects and some are fetched (small files go to the owner's
// memory: 21 files, so the layer-4 switch puts each on every node in
// turn). lard moves nothing between nodes.
func TestFetchBytes(t *testing.T) {
	var acc []Access
	for i := range 200 {
		acc = append(acc, Access{URL: fmt.Sprintf("/f%d", i%21), Size: 1000})
	}
	for _, c := range []struct {
		policy   string
		overhead float64
	}{{"weblins", 156}, {"lard", 0}} {
		res, err := Run(Config{Policy: c.policy, Nodes: 4, PerNode: 2}, NewSliceSource(acc))
		if err != nil {
			t.Fatal(err)
		}
		fetched := res.FetchBytesPerRequest * float64(res.Requests)
		if !near(res.InternalBytesPerRequest-res.FetchBytesPerRequest, c.overhead, 1e-9) ||
			math.Mod(fetched+0.5, 1000) > 1 {
			t.Errorf("%s: internal %v, fetch %v B/request (%v B in all)", c.policy, res.InternalBytesPerRequest, res.FetchBytesPerRequest, fetched)
		}
		if (c.policy == "weblins") != (fetched > 0) {
			t.Errorf("%s: %v bytes fetched", c.policy, fetched)
		}
	}
}
