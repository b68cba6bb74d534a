package control

import (
	"slices"
	"testing"
	"time"
)

// TestHoldKeepsHandedConnectionsCounted steps Hold/Release/ReleaseNode
// through a sequence and checks each node's Active (what lc, p2c, lard
// read) and Held after every step: a handed-off connection counts until it
// is released, a connection moved to another node counts once, and a
// broken node socket releases all of that node's connections.
func TestHoldKeepsHandedConnectionsCounted(t *testing.T) {
	c, _ := newTest(t, "http://127.0.0.1:1", "http://127.0.0.1:2")
	bs := c.Backends()
	active := func() []int {
		var out []int
		for _, n := range c.Nodes() {
			out = append(out, n.Active)
		}
		return out
	}
	steps := []struct {
		name string
		do   func()
		want []int
	}{
		{"hold conn 1 on node 0", func() { c.Hold(bs[0], 1) }, []int{1, 0}},
		{"hold conn 2 on node 0", func() { c.Hold(bs[0], 2) }, []int{2, 0}},
		{"conn 0 is not tracked", func() { c.Hold(bs[1], 0) }, []int{2, 0}},
		{"conn 2 moves to node 1", func() { c.Hold(bs[1], 2) }, []int{1, 1}},
		{"release conn 1", func() {
			if !c.Release(1) {
				t.Error("Release(1) = false")
			}
		}, []int{0, 1}},
		{"release unknown conn", func() {
			if c.Release(9) {
				t.Error("Release(9) = true")
			}
		}, []int{0, 1}},
		{"hold 3, 4 on node 1", func() { c.Hold(bs[1], 3); c.Hold(bs[1], 4) }, []int{0, 3}},
		{"node 1's socket breaks", func() {
			if n := c.ReleaseNode(1); n != 3 {
				t.Errorf("ReleaseNode(1) = %d, want 3", n)
			}
		}, []int{0, 0}},
		{"released conn 2 again", func() { c.Release(2) }, []int{0, 0}},
	}
	for _, s := range steps {
		s.do()
		if got := active(); !slices.Equal(got, s.want) {
			t.Fatalf("%s: Active %v, want %v", s.name, got, s.want)
		}
		if h := []int{int(bs[0].Held.Load()), int(bs[1].Held.Load())}; !slices.Equal(h, s.want) {
			t.Fatalf("%s: Held %v, want %v", s.name, h, s.want)
		}
	}
}

// TestReconcileHeldDropsStaleHolds: holds older than the previous report
// beyond the node's own active count are released, oldest first; younger
// holds (the node may not have received them yet) and other nodes' stay.
func TestReconcileHeldDropsStaleHolds(t *testing.T) {
	now := time.Duration(0)
	c, err := New(&firstUsable{}, []NodeSpec{{URL: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:2"}},
		Options{Clock: func() time.Duration { return now }})
	if err != nil {
		t.Fatal(err)
	}
	bs := c.Backends()
	for i, at := range []time.Duration{1, 2, 3, 10} { // conns 1..4 on node 0
		now = at
		c.Hold(bs[0], uint64(i+1))
	}
	c.Hold(bs[1], 9)
	// Report at 12 of a round that began at 11; the previous began at 5:
	// conns 1, 2, 3 are that old, the node has 1 open (plus conn 4 maybe).
	if n := c.reconcileHeld(0, 1, 5); n != 2 {
		t.Errorf("released %d, want 2", n)
	}
	for conn, want := range map[uint64]bool{1: false, 2: false, 3: true, 4: true, 9: true} {
		_, held := c.held[conn]
		if held != want {
			t.Errorf("conn %d held %v, want %v", conn, held, want)
		}
	}
	if a := []int{c.Nodes()[0].Active, c.Nodes()[1].Active}; a[0] != 2 || a[1] != 1 {
		t.Errorf("Active %v, want [2 1]", a)
	}
	if n := c.reconcileHeld(0, 5, 100); n != 0 {
		t.Errorf("a node with more open than held: released %d", n)
	}
}
