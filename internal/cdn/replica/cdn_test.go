package replica

import (
	"cmp"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestRollEvictsAndFindsHot: with M = 2 and the top 2 hot when asked ≥ 3
// times, a window of requests (hand-counted below) evicts the old objects
// asked fewer than twice, keeps the copy stored inside the window, names
// the two most asked, and unregisters the evicted copies that were
// registered. The same with URLs (a Go map, as the simulator keeps them)
// and with 64-bit keys (off the heap, as a live PoP keeps them).
func TestRollEvictsAndFindsHot(t *testing.T) {
	t.Run("string", func(t *testing.T) { rollCase(t, func(u string) string { return u }) })
	t.Run("uint64", func(t *testing.T) {
		// Keys that sort as the URLs do.
		rollCase(t, func(u string) uint64 { return uint64(u[1])<<8 | uint64(len(u)) })
	})
}

func rollCase[K cmp.Ordered](t *testing.T, key func(string) K) {
	cfg := DefaultConfig()
	cfg.Window, cfg.MinRequests, cfg.HotTop, cfg.HotMin, cfg.DirTTL = time.Minute, 2, 2, 3, time.Hour
	s, err := NewTable[K](cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys := func(us ...string) []K {
		var ks []K
		for _, u := range us {
			ks = append(ks, key(u))
		}
		return ks
	}
	for _, u := range []string{"/a", "/b", "/c", "/d"} {
		s.Add(t0.Add(-time.Second), key(u), false) // stored before the window
	}
	s.Hold(t0, key("/b"), 7)
	s.Add(t0.Add(30*time.Second), key("/new"), false) // stored inside it
	reqs := map[string]int{"/a": 5, "/b": 1, "/c": 3, "/d": 0, "/new": 0, "/missing": 2}
	for u, n := range reqs {
		for range n {
			s.Request(key(u))
		}
	}
	if ev, hot, _ := s.Roll(t0.Add(59 * time.Second)); ev != nil || hot != nil {
		t.Fatalf("roll before the window ended: evicted %v hot %v", ev, hot)
	}
	ev, hot, regs := s.Roll(t0.Add(time.Minute))
	if want := keys("/b", "/d"); !slices.Equal(ev, want) {
		t.Errorf("evicted %v, want %v", ev, want)
	}
	if want := keys("/a", "/c"); !slices.Equal(hot, want) {
		t.Errorf("hot %v, want %v", hot, want)
	}
	if want := []Reg[K]{{Op: Unregister, Key: key("/b"), Home: 7}}; !slices.Equal(regs, want) {
		t.Errorf("regs %v, want %v", regs, want)
	}
	if !s.Has(key("/new")) || !s.Has(key("/a")) || s.Has(key("/b")) {
		t.Errorf("after roll: /new %v /a %v /b %v", s.Has(key("/new")), s.Has(key("/a")), s.Has(key("/b")))
	}
	if st := s.Stats(); st.Hits != 9 || st.Misses != 2 || st.Evicted != 2 {
		t.Errorf("stats %+v, want 9 hits, 2 misses, 2 evicted", st)
	}
	// Next window: nothing asked, so /new (now old) and the rest go.
	ev, _, _ = s.Roll(t0.Add(2 * time.Minute))
	if want := keys("/a", "/c", "/new"); !slices.Equal(ev, want) {
		t.Errorf("second roll evicted %v, want %v", ev, want)
	}
}

func TestRemove(t *testing.T) {
	s, _ := NewTable[uint64](DefaultConfig(), t0)
	s.Add(t0, 1, false)
	s.Add(t0, 2, false)
	s.Hold(t0, 2, 9)
	if regs, ok := s.Remove(1); !ok || regs != nil {
		t.Fatalf("remove unregistered: %v %v", regs, ok)
	}
	if regs, ok := s.Remove(2); !ok || !slices.Equal(regs, []Reg[uint64]{{Op: Unregister, Key: 2, Home: 9}}) {
		t.Fatalf("remove registered: %v %v", regs, ok)
	}
	if _, ok := s.Remove(2); ok || s.Len() != 0 {
		t.Fatalf("remove twice: %v, len %d", ok, s.Len())
	}
}

func TestRank(t *testing.T) {
	cs := []Candidate{{ID: 4, Alive: true, Score: 0.5}, {ID: 2, Alive: false, Score: 0.9},
		{ID: 3, Alive: true, Score: 0.7}, {ID: 1, Alive: true, Score: 0.5}}
	var got []uint64
	for _, c := range Rank(cs) {
		got = append(got, c.ID)
	}
	if want := []uint64{3, 1, 4}; !slices.Equal(got, want) {
		t.Fatalf("rank %v, want %v", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {Window: time.Hour, DirTTL: time.Minute}, {Window: time.Hour, DirTTL: time.Hour, MinRequests: -1}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestCountIsRequests: hits counted by the nodes and handed over in bulk
// keep a copy and make it hot exactly as that many Requests would; a count
// for a copy not held is dropped.
func TestCountIsRequests(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Window, cfg.MinRequests, cfg.HotTop, cfg.HotMin = time.Minute, 2, 1, 4
	s, _ := NewTable[string](cfg, t0)
	s.Add(t0.Add(-time.Second), "/kept", false)
	s.Add(t0.Add(-time.Second), "/gone", false)
	s.Count("/kept", 4)
	s.Count("/gone", 1)
	s.Count("/never", 9)
	ev, hot, _ := s.Roll(t0.Add(time.Minute))
	if !slices.Equal(ev, []string{"/gone"}) || !slices.Equal(hot, []string{"/kept"}) || s.Has("/never") {
		t.Fatalf("evicted %v hot %v", ev, hot)
	}
	if st := s.Stats(); st.Hits != 5 {
		t.Fatalf("hits %d, want 5", st.Hits)
	}
}

// TestTableSeconds: times are kept in whole seconds, a copy's age rounded
// so it looks younger: one stored 0.5 s before a window is not old enough
// to be evicted at that window's end, one stored 1.5 s before is.
func TestTableSeconds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Window, cfg.MinRequests = time.Minute, 1
	s, _ := NewTable[string](cfg, t0)
	s.Add(t0.Add(-500*time.Millisecond), "/young", false)
	s.Add(t0.Add(-1500*time.Millisecond), "/old", false)
	ev, _, _ := s.Roll(t0.Add(time.Minute))
	if !slices.Equal(ev, []string{"/old"}) {
		t.Fatalf("evicted %v, want [/old]", ev)
	}
}
