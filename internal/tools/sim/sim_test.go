package sim

import (
	"math"
	"runtime"
	"testing"
	"time"

	"shoal/internal/base/trace"
)

func repeat(url string, size int64, n int) []Access {
	a := make([]Access, n)
	for i := range a {
		a[i] = Access{URL: url, Size: size}
	}
	return a
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

// TestTwoRequestsByHand follows two requests for one 8 KiB file through one
// node with one request in the system (l4 front, 40 µs):
//
//	#1: front 0–40 µs; setup 145 → 185 µs; miss: disk 28.82 ms → 29.005 ms;
//	    transmit 640 + teardown 145 → done 29.790 ms.
//	#2: enters at 29.790; front → 29.830; hit: 145+640+145 → 30.760 ms.
func TestTwoRequestsByHand(t *testing.T) {
	res, err := Run(Config{Policy: "wrr", Nodes: 1, PerNode: 1}, NewSliceSource(repeat("/a", 8<<10, 2)))
	if err != nil {
		t.Fatal(err)
	}
	us := time.Microsecond
	if res.Elapsed != 30760*us {
		t.Errorf("elapsed %v, want 30.76ms", res.Elapsed)
	}
	if res.Requests != 2 || res.DiskReads != 1 || res.MemHits != 1 || res.MissRatio != 0.5 || res.ByteMissRatio != 0.5 {
		t.Errorf("counters %+v", res)
	}
	if want := (29790.0 + 970.0) / 2 / 1000; !near(res.MeanLatencyMS, want, 1e-9) {
		t.Errorf("mean latency %v ms, want %v", res.MeanLatencyMS, want)
	}
	if want := 1860.0 / 30760; !near(res.NodeCPUUtil, want, 1e-9) {
		t.Errorf("node cpu %v, want %v", res.NodeCPUUtil, want)
	}
	if want := 28820.0 / 30760; !near(res.NodeDiskUtil, want, 1e-9) {
		t.Errorf("node disk %v, want %v", res.NodeDiskUtil, want)
	}
	if want := 80.0 / 30760; !near(res.FrontCPUUtil, want, 1e-9) {
		t.Errorf("front cpu %v, want %v", res.FrontCPUUtil, want)
	}
	if res.HandoffsPerRequest != 0 || res.InternalBytesPerRequest != 0 {
		t.Errorf("wrr behind l4: handoffs %v, internal bytes %v", res.HandoffsPerRequest, res.InternalBytesPerRequest)
	}
}

// TestLatencyMode replays three requests 1 s apart: each finds the node idle,
// the first misses (40+145+28820+785 µs), the others hit (40+930 µs).
func TestLatencyMode(t *testing.T) {
	a := repeat("/a", 8<<10, 3)
	a[0].At, a[1].At, a[2].At = 5*time.Second, 6*time.Second, 7*time.Second
	res, err := Run(Config{Policy: "wrr", Nodes: 1, TimeScale: 1}, NewSliceSource(a))
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*time.Second + 970*time.Microsecond; res.Elapsed != want {
		t.Errorf("elapsed %v, want %v", res.Elapsed, want)
	}
	if want := (29.79 + 0.97 + 0.97) / 3; !near(res.MeanLatencyMS, want, 1e-9) {
		t.Errorf("latency %v ms, want %v", res.MeanLatencyMS, want)
	}
	// Half speed: the gaps double.
	res, _ = Run(Config{Policy: "wrr", Nodes: 1, TimeScale: 2}, NewSliceSource(a))
	if want := 4*time.Second + 970*time.Microsecond; res.Elapsed != want {
		t.Errorf("scaled elapsed %v, want %v", res.Elapsed, want)
	}
}

// TestNodeCostCheck is SPEC §6's check: an 8 KiB file from memory gives
// about 1075 requests/s on one node (145+16·40+145 = 930 µs).
func TestNodeCostCheck(t *testing.T) {
	res, err := Run(Config{Policy: "wrr", Nodes: 1}, NewSliceSource(repeat("/8k", 8<<10, 20000)))
	if err != nil {
		t.Fatal(err)
	}
	if !near(res.ThroughputRPS, 1075, 0.02) {
		t.Errorf("throughput %.1f req/s, want 1075 ± 2%%", res.ThroughputRPS)
	}
	if res.MaxNodeCPU < 0.97 {
		t.Errorf("node CPU %.3f, want saturated", res.MaxNodeCPU)
	}
}

// TestBigFilesAlwaysDisk: an object above NoCacheAbove is read from disk on
// every request however large the cache; one just below it is cached. By
// default the threshold is the live nodes' (an eighth of the cache, 8 MiB
// here); seed 000's 500 KB is set explicitly.
func TestBigFilesAlwaysDisk(t *testing.T) {
	costs := DefaultCosts()
	costs.NoCacheAbove = 500 << 10
	for _, pol := range []string{"wrr", "lard", "tbccrd", "weblins"} {
		a := append(repeat("/big", 500<<10+1, 10), repeat("/ok", 500<<10, 10)...)
		res, err := Run(Config{Policy: pol, Nodes: 2, CacheBytes: 64 << 20, Costs: &costs}, NewSliceSource(a))
		if err != nil {
			t.Fatal(err)
		}
		if res.BigToDisk != 10 {
			t.Errorf("%s: BigToDisk %d, want 10", pol, res.BigToDisk)
		}
		// /big: 10 disk reads; /ok: at most one per node.
		if res.DiskReads < 10 || res.DiskReads > 12 {
			t.Errorf("%s: disk reads %d, want 10 + (1 or 2)", pol, res.DiskReads)
		}
		// The default threshold (8 MiB) caches /big too.
		res, err = Run(Config{Policy: pol, Nodes: 2, CacheBytes: 64 << 20}, NewSliceSource(a))
		if err != nil {
			t.Fatal(err)
		}
		if res.BigToDisk != 0 || res.DiskReads > 4 {
			t.Errorf("%s, default threshold: BigToDisk %d, disk reads %d; want 0 and at most 4", pol, res.BigToDisk, res.DiskReads)
		}
	}
}

// TestMemoryBytes: a node given its memory caches what a live node plans
// from it (its own overhead left out), and admits up to an eighth of that.
func TestMemoryBytes(t *testing.T) {
	sm, err := newSim(Config{Policy: "wrr", Nodes: 1, MemoryBytes: 36 << 20}, NewSliceSource(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c := sm.nodes[0].cache.Capacity(); c != 26<<20 {
		t.Errorf("cache %d MiB, want 26 (36 less the 10 MiB process overhead)", c>>20)
	}
	if sm.c.NoCacheAbove != 26<<20/8 {
		t.Errorf("no-cache threshold %d, want 3.25 MiB", sm.c.NoCacheAbove)
	}
}

func TestConfigErrors(t *testing.T) {
	src := func() Source { return NewSliceSource(repeat("/a", 1, 1)) }
	for name, cfg := range map[string]Config{
		"no nodes":     {Policy: "wrr"},
		"bad policy":   {Policy: "nope", Nodes: 1},
		"bad cache":    {Policy: "wrr", Nodes: 1, Cache: "fifo"},
		"neg window":   {Policy: "wrr", Nodes: 1, PerNode: -1},
		"neg cost":     {Policy: "wrr", Nodes: 1, Costs: &Costs{ConnSetup: -1}},
		"neg cache mb": {Policy: "wrr", Nodes: 1, CacheBytes: -5},
	} {
		if _, err := Run(cfg, src()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestFrontSaturation: with every object in memory (8 KiB files) nodes do
// 1075 req/s each, so a relay/LARD front (T1 = 266 µs, 3759 req/s) caps the
// cluster near 4 nodes while a TB-CCRD front (T2 = 50 µs) keeps scaling.
func TestFrontSaturation(t *testing.T) {
	var a []Access
	for i := range 40000 {
		a = append(a, Access{URL: "/f" + string(rune('a'+i%20)), Size: 8 << 10})
	}
	run := func(p Path, n int) Result {
		res, err := Run(Config{Policy: "tbccrd", Nodes: n, Path: p}, NewSliceSource(a))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	saturates := func(p Path) int {
		for _, n := range []int{1, 2, 4, 8, 16} {
			if run(p, n).FrontCPUUtil > 0.95 {
				return n
			}
		}
		return 1 << 30
	}
	l7, tag := saturates(PathL7), saturates(PathTag)
	if l7 > 8 || tag <= 16 {
		t.Errorf("front saturates at %d nodes (l7) and %d (tag); want l7 ≤ 8 < 16 < tag", l7, tag)
	}
	r7, rt := run(PathL7, 16), run(PathTag, 16)
	if rt.ThroughputRPS < 2*r7.ThroughputRPS {
		t.Errorf("16 nodes: tag %.0f req/s, l7 %.0f; want tag ≥ 2× l7", rt.ThroughputRPS, r7.ThroughputRPS)
	}
	perReq := func(r Result) float64 { return r.FrontCPUUtil / r.ThroughputRPS }
	if ratio := perReq(r7) / perReq(rt); ratio < 5 {
		t.Errorf("front CPU per request l7/tag = %.2f, want ≥ 5", ratio)
	}
}

// TestMemoryFlatInRequests streams a synthetic workload of 500 URLs: ten
// times more requests must not allocate meaningfully more (the simulator's
// state grows with URLs × nodes, not with requests).
func TestMemoryFlatInRequests(t *testing.T) {
	alloc := func(n int) uint64 {
		g, err := trace.Synth{Files: 500, Requests: n, Seed: 2, MaxSize: 400 << 10}.New()
		if err != nil {
			t.Fatal(err)
		}
		src := NewTraceSource(g, g.Sizes())
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		if _, err := Run(Config{Policy: "tbccrd", Nodes: 4, CacheBytes: 1 << 20}, src); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	small, big := alloc(20000), alloc(200000)
	perReq := float64(int64(big)-int64(small)) / 180000 // signed: the longer run may allocate less
	t.Logf("allocated %d B for 20k requests, %d B for 200k: %.2f B per extra request", small, big, perReq)
	if perReq > 8 {
		t.Errorf("%.2f bytes allocated per extra request; want ≈ 0", perReq)
	}
}
