package chord

import (
	"testing"
	"time"
)

// Two Chord rings, as a partition leaves them once each side has forgotten
// the other, become one when every node is told the members of both
// (Consider, fed from MBPP's healed view): successors, predecessors and
// every lookup are then those of one ring.
func TestConsiderJoinsTwoRings(t *testing.T) {
	v := newVnet(t, 7)
	ring := func(ids []ID) {
		n, err := Create(cfg(ids[0]), v.now)
		if err != nil {
			t.Fatal(err)
		}
		v.add(n, nil)
		for _, id := range ids[1:] {
			j, ms, err := Join(cfg(id), []Peer{n.cfg.Self}, v.now)
			if err != nil {
				t.Fatal(err)
			}
			v.add(j, ms)
		}
	}
	a := []ID{0x1000, 0x5000, 0x9000, 0xd000}
	b := []ID{0x3000, 0x7000, 0xb000, 0xf000}
	ring(a)
	ring(b)
	v.run(20 * time.Second)
	for _, id := range a {
		if s := v.nodes[id].Successor().ID; s&0x2000 != 0 {
			t.Fatalf("node %x's successor %x is in the other ring before the heal", id, s)
		}
	}
	if v.ringOK() == nil {
		t.Fatal("two rings look like one before the heal: the test proves nothing")
	}
	for _, id := range v.live() {
		for _, p := range v.live() {
			v.nodes[id].Consider(v.nodes[p].cfg.Self)
		}
	}
	v.converge(30 * time.Second)
	ids := v.live()
	for _, k := range v.keys(50) {
		want := owner(ids, k)
		for _, id := range ids {
			if o := v.nodes[id].Owns(k); o != (id == want) {
				t.Fatalf("node %x Owns(%x) = %v; the owner is %x", id, k, o, want)
			}
		}
	}
	v.lookups(v.keys(50))
}
