package policy

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkPick measures one decision (plus the table upkeep a caller's
// Start/Finish/CloseConn cause) for every policy on 8 nodes and a
// pre-generated Zipf(1.1) request stream over 10 000 URLs, with 64 requests
// in flight, 512 client connections of 8 requests each, 100 µs of virtual
// time per request and 4 MiB node caches (so tbccrd and weblins evict).
// The tables are warmed with one pass over the stream first. "harness" runs
// the same loop with a policy that returns node 0: subtract it to get the
// policy's own cost.
func BenchmarkPick(b *testing.B) {
	const nreq, inflight, nconn, perConn = 1 << 16, 64, 512, 8
	urls := zipfURLs(nreq, 10000, 1)
	sizes := make([]int64, nreq)
	for i, u := range urls {
		h := hashString(u)
		sizes[i] = int64(500 + h%(48<<10))
		if h%50 == 0 {
			sizes[i] = 200 << 10 // a few large files (handoff, no-cache paths)
		}
	}
	for _, name := range append([]string{"harness"}, Names()...) {
		b.Run(name, func(b *testing.B) {
			c := newCluster(3, 3, 2, 2, 2, 1, 1, 1)
			for i := range c.Nodes {
				c.Nodes[i].Group = string(rune('x' + i%2))
				c.Nodes[i].Load = float64(i) / 8
			}
			var p Policy = firstUsable{}
			if name != "harness" {
				p = mustNew(b, name, Config{CacheBytes: 4 << 20, Seed: 1})
			}
			closer, _ := p.(ConnCloser)
			var ring [inflight]int
			for i := range ring {
				ring[i] = -1
			}
			holder := make([]int, nconn)
			for i := range holder {
				holder[i] = -1
			}
			var r Request
			step := func(i int) {
				k := i % nreq
				conn := i % nconn
				r = Request{URL: urls[k], Size: sizes[k], Conn: uint64(conn) + 1, Holder: holder[conn],
					Now: time.Duration(i) * 100 * time.Microsecond}
				d := p.Pick(c, &r)
				if old := ring[i%inflight]; old >= 0 {
					c.Finish(old)
					p.Done(c, old, &r)
				}
				ring[i%inflight] = d.Node
				if d.Node >= 0 {
					c.Start(d.Node)
				}
				holder[conn] = d.Node
				if (i/nconn)%perConn == perConn-1 && closer != nil {
					closer.CloseConn(uint64(conn) + 1)
					holder[conn] = -1
				}
			}
			for i := range nreq {
				step(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step(nreq + i)
			}
		})
	}
}

// firstUsable is the benchmark's do-nothing baseline policy.
type firstUsable struct{}

func (firstUsable) Name() string                         { return "harness" }
func (firstUsable) Pick(c *Cluster, r *Request) Decision { return decide(0) }
func (firstUsable) Done(*Cluster, int, *Request)         {}

// BenchmarkScan is a URL scanner against each table policy: every request
// names a URL never seen before, on 4 nodes, with the tables bounded at
// 4,096 URLs and already full, so each Pick evicts one URL and reuses its
// id. The URL strings are made beforehand (the front makes them while
// parsing, once per request): the policy's own cost must be 0 allocs/op.
func BenchmarkScan(b *testing.B) {
	const pool = 1 << 17
	urls := make([]string, pool)
	for i := range urls {
		urls[i] = "/scan/" + itoa(i)
	}
	for _, name := range tablePolicies {
		b.Run(name, func(b *testing.B) {
			p := mustNew(b, name, Config{MaxURLs: 4096})
			c := newCluster(1, 1, 1, 1)
			var r Request // outside step: passed to the interface it escapes
			step := func(i int) {
				r = Request{URL: urls[i%pool], Size: -1, Conn: uint64(i%512) + 1, Holder: -1,
					Now: time.Duration(i) * time.Microsecond}
				if d := p.Pick(c, &r); d.Node >= 0 {
					p.Done(c, d.Node, &r)
				}
			}
			for i := range 2 * 4096 {
				step(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step(8192 + i)
			}
		})
	}
}

// BenchmarkTableBytes fills each table policy's per-URL table to its
// default bound (65,536 URLs of 16 bytes, 4 nodes) and reports the live
// heap it holds per URL, which is what the MaxURLs default was chosen by.
func BenchmarkTableBytes(b *testing.B) {
	const n = 65536
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("/scan/%010d", i) // 16 bytes
	}
	for _, name := range tablePolicies {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				p := mustNew(b, name, Config{})
				c := newCluster(1, 1, 1, 1)
				for i, u := range urls {
					r := Request{URL: u, Size: 1000, Conn: uint64(i%512) + 1, Holder: -1}
					p.Pick(c, &r)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/url")
				runtime.KeepAlive(p)
			}
		})
	}
}
