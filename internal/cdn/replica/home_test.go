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
		owns        bool
		wantMine    bool
		wantHolders []string
	}{
		{Register, "a", true, true, []string{"a"}},
		{Register, "home", true, true, []string{"a", "home"}}, // the home lists its own copy too
		{Register, "b", false, false, []string{"a", "home"}},  // not its key: notmine
		{Unregister, "a", false, true, []string{"home"}},      // an unregister needs no ownership
		{Register, "home", true, true, []string{"home"}},      // a refresh: listed once
	}
	for i, s := range steps {
		if mine := h.Apply(t0, s.op, k, s.holder, s.owns); mine != s.wantMine {
			t.Fatalf("step %d: mine %v, want %v", i, mine, s.wantMine)
		}
		if got := h.Holders(t0, k); !slices.Equal(got, s.wantHolders) {
			t.Fatalf("step %d: holders %v, want %v", i, got, s.wantHolders)
		}
	}
	if got := h.Holders(t0.Add(cfg.DirTTL+time.Second), k); len(got) != 0 {
		t.Fatalf("after the TTL: %v", got)
	}
	h.Apply(t0, Register, k, "d|x", true)
	h.Apply(t0, Register, k+1, "d|x", true)
	h.Apply(t0, Register, k+1, "e|y", true)
	if n := h.Lost(func(s string) bool { return s[0] == 'd' }); n != 2 {
		t.Fatalf("Lost dropped %d entries, want 2", n)
	}
	if got := h.Holders(t0, k+1); !slices.Equal(got, []string{"e|y"}) {
		t.Fatalf("after Lost: %v", got)
	}
}
