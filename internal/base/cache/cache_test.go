package cache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// checkInvariants verifies the byte count, the budget and the heap order.
func checkInvariants[V any](t *testing.T, c Cache[V]) {
	t.Helper()
	var sum int64
	var m map[string]*entry[V]
	switch x := c.(type) {
	case *lru[V]:
		m = x.m
		n := 0
		for e := x.root.next; e != &x.root; e = e.next {
			n++
		}
		if n != len(m) {
			t.Fatalf("list holds %d entries, map %d", n, len(m))
		}
	case *gdsf[V]:
		m = x.m
		if len(x.heap) != len(m) {
			t.Fatalf("heap holds %d entries, map %d", len(x.heap), len(m))
		}
		for i, e := range x.heap {
			if e.idx != i {
				t.Fatalf("heap[%d].idx = %d", i, e.idx)
			}
			if i > 0 && x.less(e, x.heap[(i-1)/4]) {
				t.Fatalf("heap order broken at %d", i)
			}
			if e.h < x.clock {
				t.Fatalf("H(%s) = %v below the clock %v", e.key, e.h, x.clock)
			}
		}
	}
	for _, e := range m {
		sum += e.size
	}
	if sum != c.Bytes() || c.Bytes() > c.Capacity() {
		t.Fatalf("Bytes() = %d, sum of entries %d, capacity %d", c.Bytes(), sum, c.Capacity())
	}
}

func keys[V any](c Cache[V]) []string {
	var out []string
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		if _, ok := c.Peek(k); ok {
			out = append(out, k)
		}
	}
	return out
}

func TestEvictionOrder(t *testing.T) {
	cost64 := func(string, int64) float64 { return 64 }
	tests := []struct {
		name      string
		cfg       Config[int]
		elsewhere func(step int) map[string]bool // which keys peers hold, by op index
		ops       []string
		evicted   []string
		left      []string
		clock     float64
	}{
		{
			// Budget 16. a8 b4 c2 → 14 bytes, recency (old→new) b c a after ?a.
			// +d4: 18 > 16, evict LRU b → 14.  +e8: 22, evict c → 20, evict a → 12.
			name: "lru", cfg: Config[int]{Policy: LRU, Capacity: 16},
			ops:     []string{"+a:8", "+b:4", "+c:2", "?a", "?a", "+d:4", "+e:8"},
			evicted: []string{"b", "c", "a"}, left: []string{"d", "e"},
		},
		{
			// C = 64, H = L + F·64/S, L starts at 0.
			// +a8: H=8  +b4: H=16  +c2: H=32 (14 bytes)  ?a ?a: F=3, H=0+3·64/8=24
			// +d4: 18 > 16 → evict min b(16), L=16; H(d)=16+64/4=32
			// +e8: 22 > 16 → evict min a(24), L=24; H(e)=24+64/8=32
			// ?c: F=2, H=24+2·64/2=88
			// +f4: 18 > 16 → min is d(32) and e(32): tie, d accessed earlier → evict d, L=32; H(f)=32+16=48
			name: "gdsf", cfg: Config[int]{Policy: GDSF, Capacity: 16, Cost: cost64},
			ops:     []string{"+a:8", "+b:4", "+c:2", "?a", "?a", "+d:4", "+e:8", "?c", "+f:4"},
			evicted: []string{"b", "a", "d"}, left: []string{"c", "e", "f"}, clock: 32,
		},
		{
			// Same ops, cgdsf with nobody else caching anything: identical to gdsf.
			name: "cgdsf alone = gdsf", cfg: Config[int]{Policy: CGDSF, Capacity: 16, Cost: cost64},
			elsewhere: func(int) map[string]bool { return nil },
			ops:       []string{"+a:8", "+b:4", "+c:2", "?a", "?a", "+d:4", "+e:8", "?c", "+f:4"},
			evicted:   []string{"b", "a", "d"}, left: []string{"c", "e", "f"}, clock: 32,
		},
		{
			// Disk cost 64, peer cost 8.  Peers hold a (ops 0..), then b (from op 4), then nothing (from op 5).
			// +a4 (dup): H=0+8/4=2   +b4: H=64/4=16   +c8: H=64/8=8   (16 bytes)
			// +d4: 20 > 16 → evict min a(2): the duplicate goes although c(8) is the
			//      worse singlet under plain GDSF; L=2, H(d)=2+64/4=18
			// ?b (now dup): F=2, H=2+2·8/4=6
			// +e4 (peer dropped b): 20 > 16 → min b(6) is re-checked, now the last copy:
			//      H=2+2·64/4=34; min is then c(8) → evict c, L=8, H(e)=8+64/4=24
			name: "cgdsf duplicates first", cfg: Config[int]{Policy: CGDSF, Capacity: 16, Cost: cost64,
				PeerCost: func(string, int64) float64 { return 8 }},
			elsewhere: func(step int) map[string]bool {
				switch {
				case step < 4:
					return map[string]bool{"a": true}
				case step == 4:
					return map[string]bool{"b": true}
				}
				return nil
			},
			ops:     []string{"+a:4", "+b:4", "+c:8", "+d:4", "?b", "+e:4"},
			evicted: []string{"a", "c"}, left: []string{"b", "d", "e"}, clock: 8,
		},
		{
			// Same ops under plain GDSF (C = 64 for all): a(16) b(16) c(8);
			// +d4: 20 > 16 → evict the lowest H, the 8-byte c, L=8, H(d)=8+16=24, 12 bytes;
			// ?b: F=2, H=8+2·64/4=40; +e4: 16 ≤ 16, nothing to evict.
			name: "gdsf same ops", cfg: Config[int]{Policy: GDSF, Capacity: 16, Cost: cost64},
			ops:     []string{"+a:4", "+b:4", "+c:8", "+d:4", "?b", "+e:4"},
			evicted: []string{"c"}, left: []string{"a", "b", "d", "e"}, clock: 8,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			step := 0
			if tt.elsewhere != nil {
				tt.cfg.CachedElsewhere = func(k string) bool { return tt.elsewhere(step)[k] }
			}
			// Run op by op so that elsewhere can change between ops.
			var all []string
			cfg := tt.cfg
			cfg.OnEvict = func(k string, _ int, _ int64) { all = append(all, k) }
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, op := range tt.ops {
				step = i
				replay(t, c, op)
			}
			if !slices.Equal(all, tt.evicted) {
				t.Errorf("evicted %v, want %v", all, tt.evicted)
			}
			if got := keys(c); !slices.Equal(got, tt.left) {
				t.Errorf("left %v, want %v", got, tt.left)
			}
			if g, ok := c.(*gdsf[int]); ok && g.clock != tt.clock {
				t.Errorf("clock L = %v, want %v", g.clock, tt.clock)
			}
			if st := c.Stats(); st.Evictions != int64(len(tt.evicted)) {
				t.Errorf("Stats.Evictions = %d, want %d", st.Evictions, len(tt.evicted))
			}
		})
	}
}

func replay(t *testing.T, c Cache[int], op string) {
	t.Helper()
	switch op[0] {
	case '+':
		var key string
		var size int64
		if _, err := fmt.Sscanf(op[1:], "%1s:%d", &key, &size); err != nil {
			t.Fatalf("bad op %q: %v", op, err)
		}
		if !c.Add(key, 0, size) {
			t.Fatalf("%s: Add refused", op)
		}
	case '?':
		if _, ok := c.Get(op[1:]); !ok {
			t.Fatalf("%s: Get missed", op)
		}
	case '-':
		if !c.Remove(op[1:]) {
			t.Fatalf("%s: Remove found nothing", op)
		}
	}
	checkInvariants(t, c)
}

func TestAdmissionAndStats(t *testing.T) {
	for _, pol := range []string{LRU, GDSF, CGDSF} {
		t.Run(pol, func(t *testing.T) {
			c, err := New(Config[string]{Policy: pol, Capacity: 100, MaxObject: 60})
			if err != nil {
				t.Fatal(err)
			}
			if c.Add("big", "x", 61) || c.Add("neg", "x", -1) || c.Len() != 0 {
				t.Fatal("admitted an object above MaxObject or with a negative size")
			}
			if _, ok := c.Get("a"); ok {
				t.Fatal("hit on an empty cache")
			}
			if !c.Add("a", "v1", 50) || !c.Add("z", "", 0) {
				t.Fatal("Add refused")
			}
			if v, ok := c.Get("a"); !ok || v != "v1" {
				t.Fatalf("Get(a) = %q, %v", v, ok)
			}
			// Replacement changes value and size, not a miss.
			if !c.Add("a", "v2", 40) || c.Bytes() != 40 || c.Len() != 2 {
				t.Fatalf("after replace: Bytes %d Len %d, want 40 2", c.Bytes(), c.Len())
			}
			if v, ok := c.Peek("a"); !ok || v != "v2" {
				t.Fatalf("Peek(a) = %q, %v", v, ok)
			}
			// Replacing with an oversized value drops the stale entry.
			if c.Add("a", "v3", 70) {
				t.Fatal("oversized replacement admitted")
			}
			if _, ok := c.Peek("a"); ok || c.Bytes() != 0 {
				t.Fatal("stale entry kept after oversized replacement")
			}
			if c.Remove("a") || !c.Remove("z") || c.Len() != 0 {
				t.Fatal("Remove results wrong")
			}
			// Misses: Get(a) on empty; MissBytes: big 61 + a 50 + z 0 (neg counts 0).
			want := Stats{Hits: 1, Misses: 1, HitBytes: 50, MissBytes: 111}
			if st := c.Stats(); st != want {
				t.Fatalf("Stats = %+v, want %+v", st, want)
			}
			if r := c.Stats().ObjectHitRatio(); r != 0.5 {
				t.Fatalf("ObjectHitRatio = %v, want 0.5", r)
			}
			if r := c.Stats().ByteHitRatio(); r != 50.0/161 {
				t.Fatalf("ByteHitRatio = %v, want 50/161", r)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, cfg := range []Config[int]{
		{Policy: "lru", Capacity: 0},
		{Policy: "fifo", Capacity: 10},
		{Policy: "gdsf", Capacity: 10, MaxObject: -1},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) error = %v, want ErrConfig", cfg, err)
		}
	}
}

// With CachedElsewhere always false, cgdsf must make exactly gdsf's choices.
func TestCGDSFAloneEqualsGDSF(t *testing.T) {
	var ev [2][]string
	var cs [2]Cache[int]
	for i, pol := range []string{GDSF, CGDSF} {
		cs[i], _ = New(Config[int]{Policy: pol, Capacity: 5000,
			CachedElsewhere: func(string) bool { return false },
			OnEvict:         func(k string, _ int, _ int64) { ev[i] = append(ev[i], k) }})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		k := fmt.Sprint(rng.IntN(300))
		size := int64(1 + rng.IntN(400))
		for _, c := range cs {
			if _, ok := c.Get(k); !ok {
				c.Add(k, 0, size)
			}
		}
	}
	checkInvariants(t, cs[0])
	checkInvariants(t, cs[1])
	if len(ev[0]) < 1000 || !slices.Equal(ev[0], ev[1]) {
		t.Fatalf("gdsf evicted %d, cgdsf %d, sequences equal: %v", len(ev[0]), len(ev[1]), slices.Equal(ev[0], ev[1]))
	}
}

// Random operations keep the structures consistent for every policy.
func TestRandomInvariants(t *testing.T) {
	for _, pol := range []string{LRU, GDSF, CGDSF} {
		rng := rand.New(rand.NewPCG(3, 4))
		c, _ := New(Config[int]{Policy: pol, Capacity: 3000, MaxObject: 1000,
			CachedElsewhere: func(k string) bool { return len(k)%2 == 0 }})
		for i := range 20000 {
			k := fmt.Sprint(rng.IntN(500))
			switch rng.IntN(10) {
			case 0:
				c.Remove(k)
			case 1, 2, 3:
				c.Add(k, i, int64(rng.IntN(1200)))
			default:
				c.Get(k)
			}
			if i%97 == 0 {
				checkInvariants(t, c)
			}
		}
		checkInvariants(t, c)
	}
}

func TestNewSync(t *testing.T) {
	c0, _ := New(Config[int]{Policy: GDSF, Capacity: 1 << 20})
	c := NewSync(c0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprint(g, "/", i%100)
				if _, ok := c.Get(k); !ok {
					c.Add(k, i, 100)
				}
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	// 4 goroutines × 100 distinct keys, each missed exactly once (nothing is evicted).
	if st.Hits+st.Misses != 8000 || st.Misses != 400 || c.Len() != 400 || c.Bytes() != 40000 {
		t.Fatalf("stats %+v, Len %d, Bytes %d", st, c.Len(), c.Bytes())
	}
}
