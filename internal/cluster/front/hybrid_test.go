package front

import "testing"

// TestRelayShareUpdate: the connections the front wants to relay in tag
// mode follow target/CPU, below the target growing by at least one and at
// most doubling (plus one) from the larger of the last want and the
// connections relayed, but never past twice every connection there is
// (relayed, and held by the nodes), above it falling to at most half the connections
// relayed. Expectations worked by hand for a target of 30 % and 100
// connections at the nodes unless said.
func TestRelayShareUpdate(t *testing.T) {
	for _, c := range []struct {
		relayed, prev int64
		pct           float64
		want, room    int64
		held          int64
	}{
		{0, 0, 9, 1, 1, 0},        // nothing relayed: start with one
		{1, 1, 10, 3, 2, 0},       // 1×30/10 = 3, within 2×1+1
		{10, 10, 20, 15, 5, 0},    // 10×30/20 = 15
		{3, 3, 0, 7, 4, 0},        // 3×30/1 = 90, capped at 2×3+1
		{10, 10, 30, 10, 0, 0},    // at the target: as is
		{10, 12, 60, 5, 0, 0},     // 10×30/60 = 5
		{10, 10, 200, 5, 0, 0},    // 1.5, floored at half
		{20, 20, 29, 21, 1, 0},    // 20.7 rounds up, and at least one more
		{0, 0, 100, 0, 0, 0},      // loaded with nothing relayed: nothing
		{2, 40, 10, 41, 39, 0},    // room offered and not taken: one more
		{2, 40, 100, 1, 0, 0},     // loaded: from what is relayed, 0.6, floored at half
		{5, 40, 10, 17, 12, 3},    // not past twice the 5 relayed and 3 held, plus one
		{0, 0, 10, 1, 1, -1},      // nothing held (or not known yet): one
		{4, 1 << 62, 1, 11, 7, 1}, // no overflow
	} {
		var r relayShare
		r.relayed.Store(c.relayed)
		r.want.Store(c.prev)
		held := int64(100)
		if c.held != 0 {
			held = c.held
		}
		room := r.update(c.pct, 30, held)
		if got := r.want.Load(); got != c.want || room != c.room {
			t.Errorf("relayed %d at %.0f %%: want %d room %d, got want %d room %d", c.relayed, c.pct, c.want, c.room, got, room)
		}
	}
}

// TestRelayShareKeep: new connections are relayed while fewer than wanted
// are; a counted one is let go (and uncounted) while more are counted than
// wanted; an ended one leaves the count.
func TestRelayShareKeep(t *testing.T) {
	var r relayShare
	r.want.Store(2)
	var a, b, c bool
	if !r.keep(&a) || !r.keep(&b) || r.keep(&c) {
		t.Fatalf("want 2: kept a %v b %v c %v, want true true false", a, b, c)
	}
	if n := r.relayed.Load(); n != 2 || !a || !b || c {
		t.Fatalf("relayed %d, counted %v %v %v", n, a, b, c)
	}
	r.want.Store(1)
	if r.keep(&a) || a {
		t.Fatal("a kept with 2 relayed and 1 wanted")
	}
	if !r.keep(&b) || !b || r.relayed.Load() != 1 {
		t.Fatalf("b let go with 1 relayed and 1 wanted (relayed %d)", r.relayed.Load())
	}
	r.drop(&b)
	r.drop(&b)
	if n := r.relayed.Load(); n != 0 || b {
		t.Fatalf("after b ended: relayed %d, counted %v", n, b)
	}
}
