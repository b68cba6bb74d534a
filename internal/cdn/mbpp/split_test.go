package mbpp

import (
	"slices"
	"testing"
	"time"
)

// split drops every message between PoPs of different sides (side absent:
// 0) until heal is called.
func (v *vnet) split(side map[ID]int) (heal func()) {
	v.hook = func(m Msg) (int, bool) {
		to := m.To
		if _, ok := v.nodes[to]; !ok || to == 0 {
			to = v.addrs[m.ToAddr]
		}
		if side[m.From] != side[to] {
			return 0, false
		}
		return 1, false
	}
	return func() { v.hook = nil }
}

// A ring cut in two turns as two rings; when the links return, the smaller
// dissolves into the larger (ties: the one with the lowest ID stays) and one
// ring of every PoP forms again, within the bound heal.go states: a probe
// reaches each PoP of the smaller ring within (dead PoPs in its view) ×
// HealEvery, its join takes one more round, and the ring's failure
// detection drops it from its old ring meanwhile.
func TestSplitRingHeals(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		cut  []int // indexes of the PoPs on side 1
	}{
		{"2|3", 5, []int{2, 3, 4}},
		{"3|3", 6, []int{0, 2, 4}},
		{"1|5", 6, []int{3}},
		{"4|4", 8, []int{4, 5, 6, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVnet(t)
			ids := v.ring(tc.n, 30*time.Second)
			side := map[ID]int{}
			var a, b []ID
			for i, id := range ids {
				if slices.Contains(tc.cut, i) {
					side[id] = 1
					b = append(b, id)
				} else {
					a = append(a, id)
				}
			}
			heal := v.split(side)
			v.run(v.now.Add(20 * time.Second))
			if !v.formed(a) || !v.formed(b) {
				v.dump()
				t.Fatal("the two sides did not each form a ring during the split")
			}
			heal()
			cfg := testConfig(1)
			limit := time.Duration(tc.n)*cfg.HealEvery + cfg.JoinTimeout + 3*cfg.Round(tc.n, cfg.AckTimeout) +
				time.Duration(cfg.Retries+1)*cfg.AckTimeout
			start := v.now
			for !v.formed(ids) {
				if v.now.Sub(start) > limit {
					v.dump()
					t.Fatalf("one ring not formed again %v after the heal", limit)
				}
				v.run(v.now.Add(50 * time.Millisecond))
			}
			merges := v.sum(func(s Stats) uint64 { return s.Merges })
			if merges == 0 {
				t.Fatal("healed without a merge: the sides were never two rings")
			}
			t.Logf("one ring again %v after the heal (limit %v), %d merges", v.now.Sub(start), limit, merges)
			// And it stays one: no PoP is declared dead or rejoins after.
			before := v.sum(func(s Stats) uint64 { return s.Declared + s.Rejoins })
			v.run(v.now.Add(30 * time.Second))
			if !v.formed(ids) || v.sum(func(s Stats) uint64 { return s.Declared + s.Rejoins }) != before {
				v.dump()
				t.Fatal("the healed ring did not stay whole")
			}
		})
	}
}

// A PoP that really died is probed once per HealEvery by the ring (its
// lowest ID), whatever else is dead: the probes cost one message a period,
// of a size that does not grow with the ring.
func TestProbesOnePerPeriod(t *testing.T) {
	v := newVnet(t)
	ids := v.ring(24, 60*time.Second)
	v.down[ids[1]], v.down[ids[3]] = true, true
	v.run(v.now.Add(20 * time.Second))
	probes := func(s Stats) uint64 { return s.Probes }
	p0 := v.sum(probes)
	v.run(v.now.Add(20 * time.Second))
	got := v.sum(probes) - p0 // the ring's lowest ID probes, no one else
	want := uint64(20 * time.Second / testConfig(1).HealEvery)
	if got < want-1 || got > want+1 {
		t.Fatalf("%d probes in 20 s, want %d (one per period)", got, want)
	}
	if size := v.bytes[KindProbe] / max(v.msgs[KindProbe], 1); size > 128 {
		t.Fatalf("a probe is %d bytes: it should not grow with the ring", size)
	}
}

func TestWins(t *testing.T) {
	for _, tc := range []struct {
		mine, theirs ringSig
		want         bool
	}{
		{ringSig{3, 5}, ringSig{2, 1}, true},
		{ringSig{2, 1}, ringSig{3, 5}, false},
		{ringSig{2, 1}, ringSig{2, 5}, true},
		{ringSig{2, 5}, ringSig{2, 1}, false},
		{ringSig{2, 1}, ringSig{2, 1}, false},
		{ringSig{}, ringSig{}, false},
	} {
		if got := wins(tc.mine, tc.theirs); got != tc.want {
			t.Errorf("wins(%v, %v) = %v, want %v", tc.mine, tc.theirs, got, tc.want)
		}
	}
}
