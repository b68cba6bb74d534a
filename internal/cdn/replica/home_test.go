package replica

import (
	"slices"
	"testing"
	"time"

	"shoal/internal/cdn/chord"
)

func TestHomeApply(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := DefaultConfig()
	h := NewHome(cfg)
	k := chord.ID(42)
	steps := []struct {
		op          Op
		holder      string
		self, owns  bool
		wantMine    bool
		wantHolders []string
	}{
		{Register, "a", false, true, true, []string{"a"}},
		{Register, "home", true, true, true, []string{"a"}},    // the home's own: from what it holds (List)
		{Register, "b", false, false, false, []string{"a"}},    // not its key: notmine
		{Register, "c", false, true, true, []string{"a", "c"}}, // another holder
		{Unregister, "a", false, false, true, []string{"c"}},   // an unregister needs no ownership
		{Register, "c", false, true, true, []string{"c"}},      // a refresh: listed once
	}
	for i, s := range steps {
		if mine := h.Apply(t0, s.op, k, s.holder, s.self, s.owns); mine != s.wantMine {
			t.Fatalf("step %d: mine %v, want %v", i, mine, s.wantMine)
		}
		if got := h.Holders(t0, k); !slices.Equal(got, s.wantHolders) {
			t.Fatalf("step %d: holders %v, want %v", i, got, s.wantHolders)
		}
	}
	if got := h.List(t0, k, "b-home", true); !slices.Equal(got, []string{"b-home", "c"}) {
		t.Fatalf("List with the home's copy: %v", got)
	}
	if got := h.List(t0, k, "b-home", false); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("List without the home's copy: %v", got)
	}
	if got := h.Holders(t0.Add(cfg.DirTTL+time.Second), k); len(got) != 0 {
		t.Fatalf("after the TTL: %v", got)
	}
	h.Apply(t0, Register, k, "d|x", false, true)
	h.Apply(t0, Register, k+1, "d|x", false, true)
	h.Apply(t0, Register, k+1, "e|y", false, true)
	if n := h.Lost(func(s string) bool { return s[0] == 'd' }); n != 2 {
		t.Fatalf("Lost dropped %d entries, want 2", n)
	}
	if got := h.Holders(t0, k+1); !slices.Equal(got, []string{"e|y"}) {
		t.Fatalf("after Lost: %v", got)
	}
}
