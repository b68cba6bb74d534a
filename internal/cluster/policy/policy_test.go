package policy

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// newCluster builds nodes named a, b, c, … with the given weights, all up.
func newCluster(weights ...int) *Cluster {
	c := &Cluster{Version: 1}
	for i, w := range weights {
		c.Nodes = append(c.Nodes, Node{Name: string(rune('a' + i)), Weight: w, Up: true})
	}
	return c
}

func mustNew(t testing.TB, name string, cfg Config) Policy {
	t.Helper()
	p, err := New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// seq runs k picks and spells the chosen nodes' names ("-" for none).
func seq(p Policy, c *Cluster, k int) string {
	var b strings.Builder
	for range k {
		d := p.Pick(c, &Request{URL: "/", Size: -1, Holder: -1})
		if d.Node < 0 {
			b.WriteByte('-')
		} else {
			b.WriteString(c.Nodes[d.Node].Name)
		}
	}
	return b.String()
}

func TestWRRSequences(t *testing.T) {
	down := func(c *Cluster, i int) *Cluster { c.Nodes[i].Up = false; return c }
	removed := func(c *Cluster, i int) *Cluster { c.Nodes[i].Removed = true; return c }
	tests := []struct {
		name string
		c    *Cluster
		want string
	}{
		// Seed 004 §4 traced by hand: cw 4 → a; 3 → a b; 2 → a b c; 1 → a b c.
		{"4-3-2", newCluster(4, 3, 2), "aababcabc" + "aababcabc"},
		{"equal", newCluster(1, 1, 1), "abcabc"},
		{"gcd 2", newCluster(4, 2), "aabaab"},
		{"weight 0 never", newCluster(2, 0, 1), "aacaacaac"},
		{"down is weight 0", down(newCluster(1, 1, 1), 1), "acacac"},
		{"removed is weight 0", removed(newCluster(1, 1, 1), 0), "bcbc"},
		{"all weights 0", newCluster(0, 0, 0), "---"},
		{"all down", down(down(newCluster(1, 1), 0), 1), "---"},
		{"no nodes", newCluster(), "--"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := seq(mustNew(t, "wrr", Config{}), tt.c, len(tt.want)); got != tt.want {
				t.Errorf("wrr = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWRRFollowsVersion(t *testing.T) {
	c := newCluster(4, 3, 2)
	p := mustNew(t, "wrr", Config{})
	if got := seq(p, c, 3); got != "aab" {
		t.Fatalf("start = %q", got)
	}
	c.Nodes[0].Weight = 0 // drain a
	c.Version++
	got := seq(p, c, 60)
	if strings.Contains(got, "a") || !strings.Contains(got, "c") {
		t.Errorf("after draining a: %q", got)
	}
	// Health lost without a Version bump: the guard must still answer None
	// instead of spinning or choosing a down node.
	for i := range c.Nodes {
		c.Nodes[i].Up = false
	}
	if got := seq(p, c, 3); got != "---" {
		t.Errorf("all down without version bump: %q", got)
	}
}

func TestWRRWeightZeroNeverChosen(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		w := make([]int, 2+rng.IntN(6))
		for i := range w {
			w[i] = rng.IntN(5)
		}
		c := newCluster(w...)
		p := mustNew(t, "wrr", Config{})
		counts := make([]int, len(w))
		sum := 0
		for _, x := range w {
			sum += x
		}
		for range sum * 10 {
			d := p.Pick(c, &Request{})
			if sum == 0 {
				if d.Node != -1 {
					t.Fatalf("trial %d: weights %v: got node %d, want none", trial, w, d.Node)
				}
				continue
			}
			counts[d.Node]++
		}
		// Over whole cycles WRR gives each node exactly weight/Σ of picks.
		for i, x := range w {
			if counts[i] != x*10 {
				t.Fatalf("trial %d: weights %v: counts %v", trial, w, counts)
			}
		}
	}
}

func TestRR(t *testing.T) {
	c := newCluster(1, 5, 0, 1)
	if got := seq(mustNew(t, "rr", Config{}), c, 6); got != "abdabd" {
		t.Errorf("rr = %q, want abdabd", got)
	}
}

func TestGWRR(t *testing.T) {
	group := func(c *Cluster, gs ...string) *Cluster {
		for i, g := range gs {
			c.Nodes[i].Group = g
		}
		return c
	}
	tests := []struct {
		name string
		c    *Cluster
		cfg  Config
		want string
	}{
		// Groups weigh 3 and 1 → g1 g1 g1 g2; inside g1 (a=2, b=1): a a b.
		{"sum weights", group(newCluster(2, 1, 1), "g1", "g1", "g2"), Config{}, "aabc" + "aabc"},
		// g2 configured to 3: groups alternate; inside g1 still a a b.
		{"configured", group(newCluster(2, 1, 1), "g1", "g1", "g2"), Config{GroupWeights: map[string]int{"g2": 3}}, "acacbc" + "acacbc"},
		// Members interleave by group: b is not starved behind a's weight.
		{"two groups of two", group(newCluster(1, 1, 1, 1), "x", "y", "x", "y"), Config{}, "abcdabcd"},
		{"all drained", group(newCluster(0, 0), "x", "y"), Config{}, "--"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := seq(mustNew(t, "gwrr", tt.cfg), tt.c, len(tt.want)); got != tt.want {
				t.Errorf("gwrr = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLCAndWLC(t *testing.T) {
	tests := []struct {
		policy  string
		weights []int
		active  []int
		down    int // -1 none
		want    int
	}{
		{"lc", []int{1, 1, 1}, []int{3, 1, 1}, -1, 1},
		{"lc", []int{1, 1, 1}, []int{3, 1, 1}, 1, 2},
		{"lc", []int{1, 0, 1}, []int{3, 0, 1}, -1, 2},  // drained node skipped
		{"lc", []int{9, 1, 1}, []int{2, 1, 3}, -1, 1},  // weights ignored
		{"wlc", []int{4, 2, 1}, []int{4, 3, 1}, -1, 0}, // 1, 1.5, 1 → tie → lowest
		{"wlc", []int{4, 2, 1}, []int{5, 3, 1}, -1, 2}, // 1.25, 1.5, 1
		{"wlc", []int{9, 1, 1}, []int{2, 1, 3}, -1, 0}, // 0.22, 1, 3
		{"wlc", []int{3, 2}, []int{2, 1}, -1, 1},       // 2·2=4 > 1·3=3 → b
		{"wlc", []int{0, 0}, []int{0, 0}, -1, -1},      // all drained
		{"lc", []int{1}, []int{0}, 0, -1},              // all down
	}
	for _, tt := range tests {
		c := newCluster(tt.weights...)
		for i, a := range tt.active {
			c.Nodes[i].Active = a
		}
		if tt.down >= 0 {
			c.Nodes[tt.down].Up = false
		}
		if got := mustNew(t, tt.policy, Config{}).Pick(c, &Request{}).Node; got != tt.want {
			t.Errorf("%s weights %v active %v down %d: got %d, want %d", tt.policy, tt.weights, tt.active, tt.down, got, tt.want)
		}
	}
}

func TestDFWRR(t *testing.T) {
	c := newCluster(10, 10, 0)
	c.Nodes[0].Load = 0.1 // under target: gains weight
	c.Nodes[1].Load = 1.0 // over target: loses weight
	p := mustNew(t, "dfwrr", Config{Period: 5 * time.Second}).(*DFWRR)
	p.Pick(c, &Request{Now: 0})
	if got := p.Weights(); !slices.Equal(got, []int{10, 10, 0}) {
		t.Fatalf("before the first period: %v", got)
	}
	p.Pick(c, &Request{Now: 4 * time.Second})
	if got := p.Weights(); !slices.Equal(got, []int{10, 10, 0}) {
		t.Fatalf("before the period elapsed: %v", got)
	}
	// 10 + 5·cbrt(0.85) = 14.74 → 15;  10 + 5·cbrt(−0.05) = 8.16 → 8.
	p.Pick(c, &Request{Now: 5 * time.Second})
	if got := p.Weights(); !slices.Equal(got, []int{15, 8, 0}) {
		t.Fatalf("after one period: %v, want [15 8 0]", got)
	}
	// Bounded to [1, 10·base]; weight-0 node stays out.
	for k := 2; k < 200; k++ {
		p.Pick(c, &Request{Now: time.Duration(k) * 5 * time.Second})
	}
	if got := p.Weights(); !slices.Equal(got, []int{100, 1, 0}) {
		t.Fatalf("after many periods: %v, want [100 1 0]", got)
	}
	// The schedule follows the weights: 100 a per 1 b.
	n := 0
	for range 101 {
		if p.Pick(c, &Request{Now: 1000 * time.Second}).Node == 1 {
			n++
		}
	}
	if n != 1 {
		t.Errorf("b chosen %d times in a 101-pick cycle, want 1", n)
	}
	// A new configured weight resets the dynamic weight.
	c.Nodes[1].Weight = 3
	c.Version++
	p.Pick(c, &Request{Now: 1001 * time.Second})
	if got := p.Weights(); got[1] != 3 {
		t.Errorf("after reconfiguring b to 3: %v", got)
	}
}

// ceilDiv is ⌈a/b⌉ for positive integers.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

func TestCHBLBound(t *testing.T) {
	urls := zipfURLs(20000, 500, 7)
	for _, eps := range []float64{0.25, 0.5, 1} {
		c := newCluster(1, 1, 1, 1, 1, 1, 1, 1)
		c.Nodes[5].Up = false // 7 usable nodes
		p := mustNew(t, "chbl", Config{Epsilon: eps})
		rng := rand.New(rand.NewPCG(3, 4))
		var inflight []int
		num := int(math.Round((1 + eps) * 4)) // (1+ε) = num/4 exactly for these ε
		for step, u := range urls {
			// Finish a random number of requests, biased to keep ~40 in flight.
			for len(inflight) > 0 && rng.IntN(80) < len(inflight) {
				k := rng.IntN(len(inflight))
				c.Finish(inflight[k])
				inflight[k] = inflight[len(inflight)-1]
				inflight = inflight[:len(inflight)-1]
			}
			d := p.Pick(c, &Request{URL: u})
			if d.Node < 0 || d.Node == 5 {
				t.Fatalf("ε %v step %d: node %d", eps, step, d.Node)
			}
			c.Start(d.Node)
			inflight = append(inflight, d.Node)
			limit := ceilDiv(num*len(inflight), 4*7)
			if a := c.Nodes[d.Node].Active; a > limit {
				t.Fatalf("ε %v step %d: node %d holds %d > ⌈(1+ε)·%d/7⌉ = %d", eps, step, d.Node, a, len(inflight), limit)
			}
		}
	}
}

func TestCHBLAffinityAndStability(t *testing.T) {
	c := newCluster(1, 1, 1, 1)
	p1 := mustNew(t, "chbl", Config{})
	p2 := mustNew(t, "chbl", Config{})
	before := map[string]int{}
	for i := range 1000 {
		u := "/f" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		d1, d2 := p1.Pick(c, &Request{URL: u}), p1.Pick(c, &Request{URL: u})
		if d1 != d2 || d1 != p2.Pick(c, &Request{URL: u}) {
			t.Fatalf("%s: unstable placement %v %v", u, d1, d2)
		}
		before[u] = d1.Node
	}
	// Consistent hashing: removing d moves only d's URLs.
	c.Nodes[3].Removed = true
	c.Version++
	moved := 0
	for u, n := range before {
		got := p1.Pick(c, &Request{URL: u}).Node
		if n != 3 && got != n {
			moved++
		}
		if got == 3 {
			t.Fatalf("%s placed on removed node", u)
		}
	}
	if moved != 0 {
		t.Errorf("%d URLs not on the removed node moved", moved)
	}
}

func TestURLHashStability(t *testing.T) {
	c := newCluster(1, 1, 1, 1)
	p1, p2 := mustNew(t, "urlhash", Config{}), mustNew(t, "urlhash", Config{})
	counts := make([]int, 4)
	for i := range 4000 {
		u := "/doc/" + string(rune('A'+i%50)) + string(rune('A'+i/50))
		a := p1.Pick(c, &Request{URL: u})
		if a != p1.Pick(c, &Request{URL: u}) || a != p2.Pick(c, &Request{URL: u}) {
			t.Fatalf("%s: unstable", u)
		}
		counts[a.Node]++
	}
	for i, n := range counts {
		if n < 700 || n > 1300 {
			t.Errorf("node %d got %d of 4000 URLs: %v", i, n, counts)
		}
	}
	// The fixed hash: FNV-1a("/") then splitmix64 — pinned so a silent change
	// of hash (and thus of every placement) fails here.
	if got := hashString("/"); got != hashString("/") || hashString("/a") == hashString("/b") {
		t.Errorf("hashString not deterministic")
	}
	c.Nodes[0].Up, c.Nodes[1].Up, c.Nodes[2].Up = false, false, false
	c.Version++
	if got := p1.Pick(c, &Request{URL: "/x"}).Node; got != 3 {
		t.Errorf("only d up: got %d", got)
	}
}

func TestP2C(t *testing.T) {
	c := newCluster(1, 1, 1, 1, 1, 1, 1, 1)
	run := func(seed uint64) []int {
		p := mustNew(t, "p2c", Config{Seed: seed})
		var out []int
		for range 500 {
			d := p.Pick(c, &Request{})
			out = append(out, d.Node)
			c.Start(d.Node)
			if len(out)%3 == 0 {
				c.Finish(out[len(out)-3])
			}
		}
		for i := range c.Nodes {
			c.Nodes[i].Active = 0
		}
		return out
	}
	a, b, other := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different sequences")
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 42 and 43 gave the same 500 decisions")
	}
	// Two usable nodes: p2c always compares both, so the idle one wins.
	c2 := newCluster(1, 1, 1)
	c2.Nodes[1].Up = false
	c2.Nodes[0].Active = 100
	p := mustNew(t, "p2c", Config{Seed: 1})
	for range 50 {
		if got := p.Pick(c2, &Request{}).Node; got != 2 {
			t.Fatalf("got %d, want idle node 2", got)
		}
	}
}

// setActive sets the nodes' in-flight counts.
func setActive(c *Cluster, a ...int) {
	for i := range a {
		c.Nodes[i].Active = a[i]
	}
}

func TestLARDRules(t *testing.T) {
	tests := []struct {
		name   string
		active []int // loads when the second request for /x arrives; /x is on b
		want   int
	}{
		{"not above T_high", []int{0, 65, 0}, 1},
		{"above T_high, some node below T_low", []int{30, 66, 24}, 2},
		{"above T_high, none below T_low", []int{30, 66, 25}, 1},
		{"just below 2·T_high, none below T_low", []int{140, 129, 150}, 1},
		{"at 2·T_high", []int{140, 130, 100}, 2},
		{"at 2·T_high, but it is the least loaded", []int{140, 130, 150}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(1, 1, 1)
			p := mustNew(t, "lard", Config{})
			setActive(c, 5, 2, 9)
			if got := p.Pick(c, &Request{URL: "/x"}).Node; got != 1 {
				t.Fatalf("first request: got %d, want least loaded 1", got)
			}
			setActive(c, tt.active...)
			if got := p.Pick(c, &Request{URL: "/x"}).Node; got != tt.want {
				t.Fatalf("got %d, want %d", got, tt.want)
			}
			// The reassignment sticks once loads are even again.
			setActive(c, 0, 0, 0)
			if got := p.Pick(c, &Request{URL: "/x"}).Node; got != tt.want {
				t.Fatalf("after: got %d, want %d", got, tt.want)
			}
		})
	}
	// A down node's targets are placed afresh.
	c := newCluster(1, 1, 1)
	p := mustNew(t, "lard", Config{})
	p.Pick(c, &Request{URL: "/y"}) // → a
	c.Nodes[0].Up = false
	c.Version++
	setActive(c, 0, 3, 1)
	if got := p.Pick(c, &Request{URL: "/y"}).Node; got != 2 {
		t.Errorf("after a went down: %d, want 2", got)
	}
	if tb := p.(Tabler).Tables(10).(LARDTables); tb.Targets != 1 || tb.Rows["/y"] != 2 {
		t.Errorf("tables: %+v", tb)
	}
}

func TestLARDRGrowsAndShrinks(t *testing.T) {
	c := newCluster(1, 1, 1)
	p := mustNew(t, "lardr", Config{}).(*LARDR)
	s := time.Second
	steps := []struct {
		now    time.Duration
		active []int
		want   int
		set    []int
	}{
		{0, []int{0, 0, 0}, 0, []int{0}},
		{1 * s, []int{60, 30, 10}, 0, []int{0}},        // not overloaded
		{2 * s, []int{70, 30, 10}, 2, []int{0, 2}},     // > T_high and c < T_low: grow
		{12 * s, []int{70, 30, 10}, 2, []int{0, 2}},    // unchanged for 10 s < K
		{22 * s, []int{70, 30, 10}, 2, []int{0, 2}},    // exactly K: not yet (> K)
		{23 * s, []int{70, 30, 12}, 2, []int{2}},       // unchanged > K: drop most loaded a
		{24 * s, []int{0, 200, 131}, 0, []int{2, 0}},   // ≥ 2·T_high: grow with a
		{26 * s, []int{140, 200, 131}, 2, []int{2, 0}}, // c overloaded but least loaded anywhere: stays
	}
	for i, st := range steps {
		setActive(c, st.active...)
		if got := p.Pick(c, &Request{URL: "/x", Now: st.now}).Node; got != st.want {
			t.Fatalf("step %d: node %d, want %d", i, got, st.want)
		}
		if got := p.Set("/x"); !slices.Equal(got, st.set) {
			t.Fatalf("step %d: set %v, want %v", i, got, st.set)
		}
	}
}

func TestRegistry(t *testing.T) {
	want := []string{"chbl", "dfwrr", "gwrr", "lard", "lardr", "lc", "p2c", "rr", "tbccrd", "urlhash", "weblins", "wlc", "wrr"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v", got)
	}
	for _, n := range want {
		p := mustNew(t, n, Config{})
		if p.Name() != n {
			t.Errorf("New(%q).Name() = %q", n, p.Name())
		}
		// Every policy answers None on an empty and on an all-down cluster.
		if d := p.Pick(&Cluster{}, &Request{URL: "/", Holder: -1}); d != None {
			t.Errorf("%s on empty cluster: %+v", n, d)
		}
		c := newCluster(1, 1)
		c.Nodes[0].Up, c.Nodes[1].Up = false, false
		if d := p.Pick(c, &Request{URL: "/", Holder: -1}); d != None {
			t.Errorf("%s on all-down cluster: %+v", n, d)
		}
	}
	if _, err := New("nope", Config{}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown policy: %v", err)
	}
	if _, err := New("lard", Config{TLow: 70, THigh: 65}); err == nil || !strings.Contains(err.Error(), "T_low 70") {
		t.Errorf("bad thresholds: %v", err)
	}
	if d := DefaultConfig(); d.Epsilon != 0.25 || d.THigh != 65 || d.K != 20*time.Second || d.OverloadConns != 130 {
		t.Errorf("defaults: %+v", d)
	}
}

// zipfURLs returns n requests over a catalogue of m URLs with Zipf(1.1)
// popularity, deterministic for seed.
func zipfURLs(n, m int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	z := rand.NewZipf(rng, 1.1, 1, uint64(m-1))
	names := make([]string, m)
	for i := range names {
		names[i] = "/site/page" + itoa(i) + ".html"
	}
	out := make([]string, n)
	for i := range out {
		out[i] = names[z.Uint64()]
	}
	return out
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
