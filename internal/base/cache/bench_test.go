package cache

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// benchKeys returns n keys and a Zipf-ish access sequence over them.
func benchKeys(n, seq int) ([]string, []int) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "/k/" + strconv.Itoa(i)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	z := rand.NewZipf(rng, 1.1, 1, uint64(n-1))
	idx := make([]int, seq)
	for i := range idx {
		idx[i] = int(z.Uint64())
	}
	return keys, idx
}

// BenchmarkGet measures a hit-only Get (the hot path): no allocation.
func BenchmarkGet(b *testing.B) {
	for _, pol := range []string{LRU, GDSF, CGDSF} {
		b.Run(pol, func(b *testing.B) {
			keys, idx := benchKeys(10000, 1<<16)
			c, _ := New(Config[int]{Policy: pol, Capacity: 1 << 40,
				CachedElsewhere: func(string) bool { return false }})
			for i, k := range keys {
				c.Add(k, i, int64(100+i%5000))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := c.Get(keys[idx[i&(len(idx)-1)]]); !ok {
					b.Fatal("miss")
				}
				i++
			}
		})
	}
}

// BenchmarkGetAdd replays Get-then-Add-on-miss with evictions (cache holds
// about a tenth of the bytes), the pattern of a server or the simulator.
func BenchmarkGetAdd(b *testing.B) {
	for _, pol := range []string{LRU, GDSF, CGDSF} {
		b.Run(pol, func(b *testing.B) {
			keys, idx := benchKeys(100000, 1<<20)
			c, _ := New(Config[int]{Policy: pol, Capacity: 100000 * 2600 / 10,
				CachedElsewhere: func(k string) bool { return len(k)&1 == 0 }})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				j := idx[i&(len(idx)-1)]
				if _, ok := c.Get(keys[j]); !ok {
					c.Add(keys[j], j, int64(100+j%5000))
				}
				i++
			}
			b.ReportMetric(c.Stats().ObjectHitRatio(), "hit-ratio")
		})
	}
}

// BenchmarkAdd measures Add of always-new keys, each evicting an older one.
func BenchmarkAdd(b *testing.B) {
	for _, pol := range []string{LRU, GDSF, CGDSF} {
		b.Run(pol, func(b *testing.B) {
			keys, _ := benchKeys(1<<16, 1)
			c, _ := New(Config[int]{Policy: pol, Capacity: 1000 * 1000})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.Add(keys[i&(len(keys)-1)], i, 1000)
				i++
			}
		})
	}
}

func BenchmarkSyncGet(b *testing.B) {
	keys, idx := benchKeys(10000, 1<<16)
	c0, _ := New(Config[int]{Policy: GDSF, Capacity: 1 << 40})
	c := NewSync(c0)
	for i, k := range keys {
		c.Add(k, i, 100)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Get(keys[idx[i&(len(idx)-1)]])
		i++
	}
}
