package store

import (
	"math/rand/v2"
	"testing"
)

// The index against a map: random inserts, removes and touches, with
// hashes chosen to collide in the table (few distinct low bits), keep
// every lookup, the counts and the LRU order right through growth and
// backward-shift deletion.
func TestIndexAgainstMap(t *testing.T) {
	x, err := newIndex()
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[uint64]uint64{} // hash -> id
	var order []uint64          // LRU, most recent first
	moveFront := func(h uint64) {
		for i, o := range order {
			if o == h {
				order = append(order[:i], order[i+1:]...)
				break
			}
		}
		order = append([]uint64{h}, order...)
	}
	var blocks int64
	for step := range 20000 {
		// Hashes with few distinct low bits pile up in clusters.
		h := uint64(rng.IntN(3000))<<20 | uint64(rng.IntN(4)) + 1
		r := x.find(h)
		if (r != 0) != (want[h] != 0) {
			t.Fatalf("step %d: find(%x) = %d, want present %v", step, h, r, want[h] != 0)
		}
		switch {
		case r != 0 && rng.IntN(3) == 0:
			x.touch(r)
			moveFront(h)
		case r != 0:
			if got := x.at(r).id; got != want[h] {
				t.Fatalf("step %d: id %d, want %d", step, got, want[h])
			}
			blocks -= int64(x.at(r).blocks)
			x.remove(r)
			delete(want, h)
			for i, o := range order {
				if o == h {
					order = append(order[:i], order[i+1:]...)
					break
				}
			}
		default:
			id := uint64(step + 1)
			if _, err := x.insert(h, id, uint32(step%7+1), 0); err != nil {
				t.Fatal(err)
			}
			want[h] = id
			blocks += int64(step%7 + 1)
			order = append([]uint64{h}, order...)
		}
	}
	if x.len() != len(want) || x.blocks != blocks {
		t.Fatalf("n %d blocks %d, want %d and %d", x.len(), x.blocks, len(want), blocks)
	}
	for h, id := range want {
		if r := x.find(h); r == 0 || x.at(r).id != id {
			t.Fatalf("find(%x) lost", h)
		}
	}
	i := 0
	for r := x.head; r != 0; r = x.at(r).next {
		if x.hashOf(r) != order[i] {
			t.Fatalf("LRU position %d: %x, want %x", i, x.hashOf(r), order[i])
		}
		i++
	}
	if i != len(order) || (x.tail != 0 && x.hashOf(x.tail) != order[len(order)-1]) {
		t.Fatalf("LRU list has %d records, want %d", i, len(order))
	}
}
