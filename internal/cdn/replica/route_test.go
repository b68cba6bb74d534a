package replica

import (
	"slices"
	"testing"
	"time"
)

// TestPlan: the order a miss tries, hand-derived for each case.
func TestPlan(t *testing.T) {
	ms := time.Millisecond
	live := func(id uint64, score float64) Candidate { return Candidate{ID: id, Alive: true, Score: score} }
	cfg := DefaultConfig() // ShieldStretch 1.5
	for _, tc := range []struct {
		name string
		m    Miss
		want []Step
	}{
		{"nobody holds it, home elsewhere: shield then origin",
			Miss{Self: 1, Home: live(2, 0.5)},
			[]Step{{Shield, 2}, {Origin, 0}}},
		{"holders best score first, self and dead ones skipped, then shield",
			Miss{Self: 1, Home: live(2, 0.5), Holders: []Candidate{live(3, 0.4), live(1, 0.9), {ID: 4, Score: 0.99}, live(5, 0.8)}},
			[]Step{{Remote, 5}, {Remote, 3}, {Shield, 2}, {Origin, 0}}},
		{"self is the home: no shield", Miss{Self: 2, Home: live(2, 0.5)}, []Step{{Origin, 0}}},
		{"home dead in the view: no shield", Miss{Self: 1, Home: Candidate{ID: 2}}, []Step{{Origin, 0}}},
		{"lookup failed: no home", Miss{Self: 1, Holders: []Candidate{live(3, 0.1)}}, []Step{{Remote, 3}, {Origin, 0}}},
		{"the shield's own request goes to the origin only",
			Miss{Self: 2, Home: live(2, 0.5), Holders: []Candidate{live(3, 0.4)}, ForShield: true}, []Step{{Origin, 0}}},
		// 20 + 20 = 40 ≤ 1.5 × 30 = 45: through the shield.
		{"short detour", Miss{Self: 1, Home: live(2, 0), SelfOrigin: 30 * ms, SelfHome: 20 * ms, HomeOrigin: 20 * ms},
			[]Step{{Shield, 2}, {Origin, 0}}},
		// 30 + 20 = 50 > 45: straight to the origin.
		{"long detour", Miss{Self: 1, Home: live(2, 0), SelfOrigin: 30 * ms, SelfHome: 30 * ms, HomeOrigin: 20 * ms},
			[]Step{{Origin, 0}}},
		{"unknown RTT: shield", Miss{Self: 1, Home: live(2, 0), SelfOrigin: 30 * ms, SelfHome: 300 * ms},
			[]Step{{Shield, 2}, {Origin, 0}}},
	} {
		if got := cfg.Plan(tc.m); !slices.Equal(got, tc.want) {
			t.Errorf("%s: plan %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPlanNearerOrigin: with NearerOrigin a holder farther than the
// origin is left out; one of unknown RTT, or any when the origin's RTT is
// unknown, stays; without it every holder is asked.
func TestPlanNearerOrigin(t *testing.T) {
	ms := time.Millisecond
	h := func(id uint64, score float64, rtt time.Duration) Candidate {
		return Candidate{ID: id, Alive: true, Score: score, RTT: rtt}
	}
	holders := []Candidate{h(3, 0.9, 80*ms), h(4, 0.8, 20*ms), h(5, 0.7, 0)}
	cfg := DefaultConfig()
	for _, tc := range []struct {
		on     bool
		origin time.Duration
		want   []Step
	}{
		{false, 50 * ms, []Step{{Remote, 3}, {Remote, 4}, {Remote, 5}, {Origin, 0}}},
		{true, 50 * ms, []Step{{Remote, 4}, {Remote, 5}, {Origin, 0}}}, // 3 is 80 ms away, the origin 50
		{true, 0, []Step{{Remote, 3}, {Remote, 4}, {Remote, 5}, {Origin, 0}}},
	} {
		cfg.NearerOrigin = tc.on
		if got := cfg.Plan(Miss{Self: 1, Holders: holders, SelfOrigin: tc.origin}); !slices.Equal(got, tc.want) {
			t.Errorf("NearerOrigin=%v, origin %v: plan %v, want %v", tc.on, tc.origin, got, tc.want)
		}
	}
}

func TestBetter(t *testing.T) {
	self := Candidate{ID: 1, Alive: true, Score: 0.6}
	for _, tc := range []struct {
		hs   []Candidate
		want uint64
		ok   bool
	}{
		{[]Candidate{{ID: 2, Alive: true, Score: 0.7}, {ID: 3, Alive: true, Score: 0.8}}, 3, true},
		{[]Candidate{{ID: 2, Alive: true, Score: 0.5}}, 2, false},
		{[]Candidate{{ID: 2, Alive: false, Score: 0.9}}, 0, false},
		{[]Candidate{{ID: 1, Alive: true, Score: 0.9}, {ID: 2, Alive: true, Score: 0.61}}, 2, true},
		{nil, 0, false},
	} {
		got, ok := Better(self, tc.hs)
		if got.ID != tc.want || ok != tc.ok {
			t.Errorf("Better(%v) = %d %v, want %d %v", tc.hs, got.ID, ok, tc.want, tc.ok)
		}
	}
}

// TestHoldings: register once, nothing until half the TTL, refresh then,
// move with an unregister at the old home, unregister on removal; a dead
// home's copies come back due at once.
func TestHoldings(t *testing.T) {
	cfg := DefaultConfig() // DirTTL 2 h: refresh at 1 h
	h, _ := NewTable[string](cfg, t0)
	reg := func(op Op, u string, home uint64) Reg[string] { return Reg[string]{Op: op, Key: u, Home: home} }
	check := func(what string, got []Reg[string], want ...Reg[string]) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	check("not held", h.Hold(t0, "/z", 7))
	h.Add(t0, "/a", false)
	h.Add(t0, "/b", false)
	check("first hold", h.Hold(t0, "/a", 7), reg(Register, "/a", 7))
	check("held again at once", h.Hold(t0.Add(time.Minute), "/a", 7))
	check("unknown home", h.Hold(t0, "/b", 0))
	if got := h.RegDue(t0.Add(59 * time.Minute)); !slices.Equal(got, []string{"/b"}) {
		t.Errorf("due before the hour: %v, want [/b] (never registered)", got)
	}
	if got := h.RegDue(t0.Add(time.Hour)); !slices.Equal(got, []string{"/a", "/b"}) {
		t.Errorf("due at the hour: %v", got)
	}
	check("refresh", h.Hold(t0.Add(time.Hour), "/a", 7), reg(Register, "/a", 7))
	check("moved", h.Hold(t0.Add(time.Hour), "/a", 9), reg(Unregister, "/a", 7), reg(Register, "/a", 9))
	check("b registered", h.Hold(t0.Add(time.Hour), "/b", 9), reg(Register, "/b", 9))
	if got := h.At(9); !slices.Equal(got, []string{"/a", "/b"}) {
		t.Errorf("at 9: %v", got)
	}
	h.Forget("/a")
	if got := h.RegDue(t0.Add(time.Hour + time.Second)); !slices.Equal(got, []string{"/a"}) || h.Home("/a") != 0 {
		t.Errorf("after forget: due %v, home %d; want [/a], 0", got, h.Home("/a"))
	}
	check("registered anew, no unregister at the old home", h.Hold(t0.Add(time.Hour), "/a", 3), reg(Register, "/a", 3))
	regs, _ := h.Remove("/b")
	check("remove", regs, reg(Unregister, "/b", 9))
	regs, _ = h.Remove("/b")
	check("remove again", regs)
	if h.Has("/b") || !h.Has("/a") || h.Len() != 1 {
		t.Errorf("held: /a %v /b %v len %d", h.Has("/a"), h.Has("/b"), h.Len())
	}
}
