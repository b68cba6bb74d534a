// Package cachecmp compares internal/base/cache's hit ratios on the NASA trace
// with three popular Go caches. It is a module of its own so that those
// libraries, needed by this comparison only, stay out of shoal's go.mod.
package cachecmp

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/ristretto/v2"
	lru2 "github.com/hashicorp/golang-lru/v2"
	"github.com/maypok86/otter/v2"

	"shoal/internal/base/cache"
	"shoal/internal/base/trace"
)

const nasaTrace = "../../../shared/data/traces/nasa_aug95_19950801_fullday_derived.log.gz"

// req is one replayed request: URL, object size and the client (for routing).
type req struct {
	url, host string
	size      int64
}

// replayer is the small surface the comparison needs from every cache.
type replayer interface {
	get(key string) bool
	add(key string, size int64)
}

type ours struct{ c cache.Cache[struct{}] }

func (o ours) get(k string) bool { _, ok := o.c.Get(k); return ok }

// add always offers the object: ours refuses sizes above Capacity itself.
func (o ours) add(k string, size int64) { o.c.Add(k, struct{}{}, size) }

// The third-party adapters do not offer objects above the budget (a
// count-based cache would take them; ours refuse them by themselves).

type hashicorp struct {
	c      *lru2.Cache[string, struct{}]
	budget int64
}

func (h hashicorp) get(k string) bool { _, ok := h.c.Get(k); return ok }
func (h hashicorp) add(k string, size int64) {
	if size <= h.budget {
		h.c.Add(k, struct{}{})
	}
}

type rist struct {
	c      *ristretto.Cache[string, int64]
	budget int64
}

func (r rist) get(k string) bool { _, ok := r.c.Get(k); return ok }
func (r rist) add(k string, size int64) {
	if size <= r.budget {
		r.c.Set(k, size, size)
		r.c.Wait() // apply the Set before the next request, as ours do
	}
}

type ott struct {
	c      *otter.Cache[string, int64]
	budget int64
}

func (o ott) get(k string) bool { _, ok := o.c.GetIfPresent(k); return ok }
func (o ott) add(k string, size int64) {
	if size <= o.budget {
		o.c.Set(k, size)
		o.c.CleanUp() // run pending maintenance (eviction) now
	}
}

// result counts a replay; peer* are local misses found in another node's
// memory (cluster rows only): the cooperative-cache hits Weblins aims for.
type result struct{ hits, reqs, hitBytes, bytes, peerHits, peerHitBytes int64 }

func (r result) obj() float64 { return float64(r.hits) / float64(r.reqs) }
func (r result) byt() float64 { return float64(r.hitBytes) / float64(r.bytes) }
func (r result) memObj() float64 {
	return float64(r.hits+r.peerHits) / float64(r.reqs)
}
func (r result) memByt() float64 {
	return float64(r.hitBytes+r.peerHitBytes) / float64(r.bytes)
}

// replayAll runs Get, and Add on a miss, for every request.
func replayAll(reqs []req, pick func(r req) replayer) result {
	var res result
	for _, r := range reqs {
		c := pick(r)
		res.reqs++
		res.bytes += r.size
		if c.get(r.url) {
			res.hits++
			res.hitBytes += r.size
		} else {
			c.add(r.url, r.size)
		}
	}
	return res
}

// replayCluster routes each request to node route(r): Get there; on a local
// miss, count a peer hit if another node's memory holds the URL (Peek), then
// Add locally (the node keeps the copy it fetched).
func replayCluster(reqs []req, nodes []cache.Cache[struct{}], route func(r req) int) result {
	var res result
	for _, r := range reqs {
		i := route(r)
		res.reqs++
		res.bytes += r.size
		if _, ok := nodes[i].Get(r.url); ok {
			res.hits++
			res.hitBytes += r.size
			continue
		}
		for j, o := range nodes {
			if _, ok := o.Peek(r.url); ok && j != i {
				res.peerHits++
				res.peerHitBytes += r.size
				break
			}
		}
		nodes[i].Add(r.url, struct{}{}, r.size)
	}
	return res
}

func fnv32(s string) int {
	h := fnv.New32a()
	io.WriteString(h, s)
	return int(h.Sum32())
}

// newCluster builds n caches of policy pol, budget/n bytes each, whose
// CachedElsewhere consults the other nodes' memory (Peek: no side effects).
func newCluster(t *testing.T, pol string, n int, budget int64) []cache.Cache[struct{}] {
	nodes := make([]cache.Cache[struct{}], n)
	for i := range nodes {
		c, err := cache.New(cache.Config[struct{}]{Policy: pol, Capacity: budget / int64(n),
			CachedElsewhere: func(key string) bool {
				for j, o := range nodes {
					if j != i {
						if _, ok := o.Peek(key); ok {
							return true
						}
					}
				}
				return false
			}})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = c
	}
	return nodes
}

// TestNASAHitRatios replays the NASA trace (1 Aug 1995) through every cache at
// 1, 4 and 16 MB and writes the table to testdata/nasa_hit_ratios.md.
func TestNASAHitRatios(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 34k requests through 11 caches at 3 budgets; skipped under -short")
	}
	if _, err := os.Stat(nasaTrace); err != nil {
		t.Skipf("NASA trace not found at %s (%v); the comparison needs /work/shared/data/traces", nasaTrace, err)
	}
	sizes, err := trace.Sizes(nasaTrace)
	if err != nil {
		t.Fatal(err)
	}
	r, err := trace.Open(nasaTrace)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []req
	skipped := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		size, ok := sizes[rec.URL]
		if !ok {
			skipped++ // never answered 200 (404s, redirects): not a cacheable object
			continue
		}
		reqs = append(reqs, req{url: rec.URL, host: rec.Host, size: size})
	}
	r.Close()
	var total int64
	for _, s := range sizes {
		total += s
	}
	mean := total / int64(len(sizes))
	var reqBytes int64
	for _, r := range reqs {
		reqBytes += r.size
	}

	const nodes = 4
	budgets := []int64{1 << 20, 4 << 20, 16 << 20}
	type row struct {
		name string
		run  func(budget int64) result
	}
	single := func(pol string) func(int64) result {
		return func(b int64) result {
			c, err := cache.New(cache.Config[struct{}]{Policy: pol, Capacity: b,
				CachedElsewhere: func(string) bool { return false }})
			if err != nil {
				t.Fatal(err)
			}
			res := replayAll(reqs, func(req) replayer { return ours{c} })
			// Our own Stats must agree with the harness's count.
			st := c.Stats()
			if st.Hits != res.hits || st.HitBytes != res.hitBytes || st.MissBytes != res.bytes-res.hitBytes {
				t.Errorf("%s %d: Stats %+v disagree with replay %+v", pol, b, st, res)
			}
			return res
		}
	}
	multi := func(pol string, byHost bool) func(int64) result {
		return func(b int64) result {
			cs := newCluster(t, pol, nodes, b)
			return replayCluster(reqs, cs, func(r req) int {
				if byHost {
					return fnv32(r.host) % nodes
				}
				return fnv32(r.url) % nodes
			})
		}
	}
	rows := []row{
		{"shoal lru", single(cache.LRU)},
		{"shoal gdsf", single(cache.GDSF)},
		{"shoal cgdsf (CachedElsewhere always false)", single(cache.CGDSF)},
		{"4 nodes × budget/4, URL-hash routing: gdsf", multi(cache.GDSF, false)},
		{"4 nodes × budget/4, URL-hash routing: cgdsf", multi(cache.CGDSF, false)},
		{"4 nodes × budget/4, client-hash routing: gdsf", multi(cache.GDSF, true)},
		{"4 nodes × budget/4, client-hash routing: cgdsf", multi(cache.CGDSF, true)},
		{fmt.Sprintf("hashicorp/golang-lru/v2 (count = budget / %d B)", mean), func(b int64) result {
			c, err := lru2.New[string, struct{}](int(max(b/mean, 1)))
			if err != nil {
				t.Fatal(err)
			}
			return replayAll(reqs, func(req) replayer { return hashicorp{c, b} })
		}},
		{"dgraph-io/ristretto/v2 (MaxCost = bytes) †", func(b int64) result {
			c, err := ristretto.NewCache(&ristretto.Config[string, int64]{
				NumCounters: 10 * int64(len(sizes)), MaxCost: b, BufferItems: 64, IgnoreInternalCost: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			return replayAll(reqs, func(req) replayer { return rist{c, b} })
		}},
		{"maypok86/otter/v2 (MaximumWeight = bytes) †", func(b int64) result {
			c := otter.Must(&otter.Options[string, int64]{MaximumWeight: uint64(b),
				Weigher: func(_ string, v int64) uint32 { return uint32(v) }})
			defer c.StopAllGoroutines()
			return replayAll(reqs, func(req) replayer { return ott{c, b} })
		}},
	}

	var md strings.Builder
	fmt.Fprintf(&md, "# NASA trace hit ratios\n\n")
	fmt.Fprintf(&md, "Generated by `go test -run TestNASAHitRatios . (in bench/cachecmp)` from `%s`.\n", filepath.Base(nasaTrace))
	fmt.Fprintf(&md, "%d requests replayed (%d skipped: URL never answered 200), %d distinct objects, "+
		"%d bytes in all, mean object size %d B (size = largest 200 response, trace.Sizes).\n", len(reqs), skipped, len(sizes), total, mean)
	fmt.Fprintf(&md, "Each request: Get; on a miss, Add with the object's size (objects above the budget are not offered). "+
		"Cluster rows: 4 caches of budget/4 each (same total memory), hit = local hit; cgdsf's CachedElsewhere "+
		"peeks at the other 3 caches (peer cost = disk cost / 10). With URL-hash routing a URL only ever reaches one node, "+
		"so CachedElsewhere is never true and cgdsf equals gdsf (asserted); client-hash routing (a layer-4 switch) "+
		"creates the duplicates cgdsf is about. golang-lru counts objects, so it gets budget / mean object size "+
		"entries (the mean over distinct objects; the request-weighted mean is %d B). "+
		"Cells: object hit ratio / byte hit ratio.\n\n", reqBytes/int64(len(reqs)))
	md.WriteString("| cache |")
	for _, b := range budgets {
		fmt.Fprintf(&md, " %d MB |", b>>20)
	}
	md.WriteString("\n|---|")
	for range budgets {
		md.WriteString("---:|")
	}
	md.WriteString("\n")
	got := map[string][]result{}
	var spread strings.Builder
	for _, rw := range rows {
		fmt.Fprintf(&md, "| %s |", rw.name)
		runs := 1
		if strings.HasSuffix(rw.name, "†") {
			runs = 5 // sampled / buffered policies: not deterministic run to run
			fmt.Fprintf(&spread, "- %s object hit ratio over %d runs:", strings.TrimSuffix(rw.name, " †"), runs)
		}
		for _, b := range budgets {
			var sum result
			lo, hi := 1.0, 0.0
			for range runs {
				res := rw.run(b)
				lo, hi = min(lo, res.obj()), max(hi, res.obj())
				sum.hits += res.hits
				sum.reqs += res.reqs
				sum.hitBytes += res.hitBytes
				sum.bytes += res.bytes
				sum.peerHits += res.peerHits
				sum.peerHitBytes += res.peerHitBytes
			}
			if runs > 1 {
				fmt.Fprintf(&spread, " %d MB %.4f–%.4f;", b>>20, lo, hi)
			}
			got[rw.name] = append(got[rw.name], sum)
			fmt.Fprintf(&md, " %.4f / %.4f |", sum.obj(), sum.byt())
		}
		md.WriteString("\n")
		if runs > 1 {
			spread.WriteString("\n")
		}
	}
	md.WriteString("\n† not deterministic (sampled eviction, lossy access buffers): mean of 5 runs.\n")
	md.WriteString(spread.String())
	md.WriteString("\nCluster rows, counting a local miss found in another node's memory as a memory hit " +
		"(cooperative caching: no disk read). Cells: memory object hit ratio / memory byte hit ratio.\n\n| cluster |")
	for _, b := range budgets {
		fmt.Fprintf(&md, " %d MB |", b>>20)
	}
	md.WriteString("\n|---|")
	for range budgets {
		md.WriteString("---:|")
	}
	md.WriteString("\n")
	for _, rw := range rows {
		if !strings.HasPrefix(rw.name, "4 nodes") {
			continue
		}
		fmt.Fprintf(&md, "| %s |", rw.name)
		for _, res := range got[rw.name] {
			fmt.Fprintf(&md, " %.4f / %.4f |", res.memObj(), res.memByt())
		}
		md.WriteString("\n")
	}
	t.Log("\n" + md.String())
	// The committed table is refreshed on request only, so a test run never
	// dirties the checkout: SHOAL_WRITE_TABLES=1 go test -run NASA ./internal/base/cache
	if os.Getenv("SHOAL_WRITE_TABLES") != "" {
		if err := os.WriteFile(filepath.Join("testdata", "nasa_hit_ratios.md"), []byte(md.String()), 0o644); err != nil {
			t.Errorf("write table: %v", err)
		}
	}

	lruR, gdsfR := got["shoal lru"][0], got["shoal gdsf"][0]
	if gdsfR.obj() <= lruR.obj() {
		t.Errorf("at 1 MB GDSF object hit ratio %.4f does not beat LRU's %.4f", gdsfR.obj(), lruR.obj())
	}
	for i := range budgets {
		if a, b := got["shoal gdsf"][i], got["shoal cgdsf (CachedElsewhere always false)"][i]; a != b {
			t.Errorf("budget %d: cgdsf alone %+v differs from gdsf %+v", budgets[i], b, a)
		}
		// Weblins' point: evicting duplicates first keeps more distinct files
		// in the cluster's memory, so more local misses are served by a peer.
		if a, b := got["4 nodes × budget/4, client-hash routing: gdsf"][i], got["4 nodes × budget/4, client-hash routing: cgdsf"][i]; b.memObj() <= a.memObj() {
			t.Errorf("budget %d: client-routed cgdsf memory hit ratio %.4f does not beat gdsf's %.4f", budgets[i], b.memObj(), a.memObj())
		}
		// With URL-hash routing a URL only ever reaches one node, so no copy
		// is ever cached elsewhere and cgdsf must equal gdsf.
		if a, b := got["4 nodes × budget/4, URL-hash routing: gdsf"][i], got["4 nodes × budget/4, URL-hash routing: cgdsf"][i]; a != b {
			t.Errorf("budget %d: URL-routed cgdsf %+v differs from gdsf %+v", budgets[i], b, a)
		}
	}
}
