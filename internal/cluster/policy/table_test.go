package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestLRUOrder(t *testing.T) {
	l := NewLRU()
	if _, ok := l.Victim(); ok {
		t.Fatal("empty LRU has a victim")
	}
	l.Add(5, 0, 0)
	l.Add(0, 0, 0)
	l.Add(9, 0, 0)
	l.Hit(5, 0) // order, most recent first: 5 9 0
	l.Hit(7, 0) // not cached: ignored
	l.Remove(3) // not cached: ignored
	var got []int32
	for {
		v, ok := l.Victim()
		if !ok {
			break
		}
		got = append(got, v)
		l.Remove(v)
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 9 || got[2] != 5 {
		t.Errorf("eviction order %v, want [0 9 5]", got)
	}
}

// TestMirrorInvariants drives tbccrd and weblins with random requests, sizes,
// size corrections and node failures, and checks after every step that each
// node's mirrored bytes equal the sizes of the URLs flagged cache_hit there,
// stay within the budget, and hold nothing above the no-cache threshold,
// also while a small URL bound evicts rows and 404s drop them.
func TestMirrorInvariants(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxURLs int
	}{{"tbccrd", 0}, {"weblins", 0}, {"tbccrd", 20}, {"weblins", 20}} {
		name := tc.name
		c := newCluster(1, 1, 1, 1)
		p := mustNew(t, name, Config{CacheBytes: 2000, NodeCacheBytes: []int64{0, 500}, MaxURLs: tc.maxURLs})
		var tb *urlTable
		var noCache int64
		switch q := p.(type) {
		case *TBCCRD:
			tb, noCache = q.t, 500<<10
		case *Weblins:
			tb, noCache = q.t, 100<<10
		}
		rng := rand.New(rand.NewPCG(9, 9))
		for step := range 5000 {
			u := "/u" + itoa(rng.IntN(60))
			size := int64(rng.IntN(400))
			switch rng.IntN(20) {
			case 0:
				size = -1
			case 1:
				size = noCache + 1
			}
			if rng.IntN(200) == 0 {
				i := rng.IntN(4)
				c.Nodes[i].Up = !c.Nodes[i].Up
				c.Version++
			}
			r := &Request{URL: u, Size: size, Conn: uint64(rng.IntN(30)), Holder: -1, Now: time.Duration(step) * time.Millisecond}
			d := p.Pick(c, r)
			if d.Node >= 0 && rng.IntN(3) == 0 {
				r.Size = int64(rng.IntN(600))
				if rng.IntN(10) == 0 {
					r.Status = 404
				}
				p.Done(c, d.Node, r)
			}
			if tc.maxURLs > 0 && tb.idx.len() > tc.maxURLs {
				t.Fatalf("%s step %d: %d URLs held, bound %d", name, step, tb.idx.len(), tc.maxURLs)
			}
			for u, id := range tb.idx.ids {
				if tb.rows[id].url != u {
					t.Fatalf("%s step %d: id %d is %q in the index, %q in the rows", name, step, id, u, tb.rows[id].url)
				}
			}
			for n := range tb.caches {
				var sum int64
				objs := 0
				for _, row := range tb.rows {
					if n < len(row.cells) && row.cells[n].cache {
						if row.size > noCache {
							t.Fatalf("%s step %d: %s (%d bytes) cached on %d", name, step, row.url, row.size, n)
						}
						sum += max(row.size, 0)
						objs++
					}
				}
				nc := tb.caches[n]
				if nc.used != sum || nc.objects != objs || nc.used > nc.limit {
					t.Fatalf("%s step %d node %d: used %d objects %d limit %d, flags say %d bytes in %d",
						name, step, n, nc.used, nc.objects, nc.limit, sum, objs)
				}
				if !c.Nodes[n].Up && objs > 0 {
					t.Fatalf("%s step %d: down node %d still caches %d objects", name, step, n, objs)
				}
			}
		}
	}
}
