package pop

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/replica"
)

// roles picks, for key, its home PoP and two others.
func roles(t *testing.T, ps []*fakePoP, key string) (home, a, b *fakePoP) {
	t.Helper()
	o, _ := ps[0].lookup(t.Context(), chord.ContentKey("", key))
	var others []*fakePoP
	for _, p := range ps {
		if p.id == uint64(o.ID) {
			home = p
		} else {
			others = append(others, p)
		}
	}
	return home, others[0], others[1]
}

func holders(p *fakePoP, key string) []uint64 {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	var ids []uint64
	for _, h := range p.m.dir.Holders(time.Now(), chord.ContentKey("", key)) {
		id, _, _ := parseHolder(h)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func sorted(ids ...uint64) []uint64 { slices.Sort(ids); return ids }

// TestMissChain: a miss nobody holds goes through the key's home (shield)
// to the origin, and both copies are registered at the home; a miss at a
// third PoP is then fetched from a holder, never the origin; the third
// request is a hit. An eviction unregisters the copy.
func TestMissChain(t *testing.T) {
	_, ps, origin := fakeRing(t, 3, replica.DefaultConfig())
	key := "site.example/x?v=1"
	home, a, b := roles(t, ps, key)
	if body, how := a.get(key); body != "body of /x?v=1" || how != "MISS" {
		t.Fatalf("first GET at a: %q %s", body, how)
	}
	if origin.count("/x?v=1") != 1 || a.m.stats.ShieldFetches.Load() != 1 || home.m.stats.ShieldServed.Load() != 1 {
		t.Fatalf("first GET: origin %d, a's shield fetches %d, home's shield served %d (want 1 each)",
			origin.count("/x?v=1"), a.m.stats.ShieldFetches.Load(), home.m.stats.ShieldServed.Load())
	}
	eventually(t, "a and the home listed at the home", func() bool { return slices.Equal(holders(home, key), sorted(a.id, home.id)) })
	if _, how := b.get(key); how != "MISS" || origin.count("/x?v=1") != 1 || b.m.stats.RemoteFetches.Load() != 1 {
		t.Fatalf("GET at b: %s, origin %d, b's remote fetches %d (want a holder's copy)", how, origin.count("/x?v=1"), b.m.stats.RemoteFetches.Load())
	}
	if _, how := b.get(key); how != "HIT" {
		t.Fatalf("second GET at b: %s, want HIT", how)
	}
	eventually(t, "b listed too", func() bool { return slices.Equal(holders(home, key), sorted(a.id, b.id, home.id)) })
	a.m.Evicted(key)
	eventually(t, "a unlisted after its eviction", func() bool { return slices.Equal(holders(home, key), sorted(b.id, home.id)) })
	if a.m.store.Has(key) || a.m.stats.Evictions.Load() != 1 {
		t.Fatalf("a still counts %s", key)
	}
}

// TestRemoteFetchByScore: of two holders the better-scoring one serves.
func TestRemoteFetchByScore(t *testing.T) {
	_, ps, _ := fakeRing(t, 4, replica.DefaultConfig())
	key := "s/y"
	home, _, _ := roles(t, ps, key)
	var others []*fakePoP
	for _, p := range ps {
		if p != home {
			others = append(others, p)
		}
	}
	lo, hi, asker := others[0], others[1], others[2]
	home.score, lo.score, hi.score, asker.score = 0.1, 0.3, 0.6, 0.2
	lo.get(key)
	hi.get(key)
	eventually(t, "both listed", func() bool { return len(holders(home, key)) == 3 })
	before := [2]int{lo.node.hitsOf(key), hi.node.hitsOf(key)}
	asker.get(key)
	if lo.node.hitsOf(key) != before[0] || hi.node.hitsOf(key) != before[1]+1 {
		t.Fatalf("hits lo %d→%d hi %d→%d: want the better-scoring holder (%.2f > %.2f) to serve",
			before[0], lo.node.hitsOf(key), before[1], hi.node.hitsOf(key), hi.score, lo.score)
	}
}

func (nd *fakeNode) hitsOf(key string) int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.hits[key]
}

// TestDirectoryMoves: a PoP that joins as a key's new home receives the
// old home's entries (hand-over); a holder refreshing at the old home is
// told the key moved and registers at the new one.
func TestDirectoryMoves(t *testing.T) {
	fn, ps, _ := fakeRing(t, 3, replica.DefaultConfig())
	// A key whose home is ps[0], and a newcomer placed just before it on
	// the ring, between the key and ps[0]: it takes the key over.
	var key string
	for i := 0; ; i++ {
		key = fmt.Sprintf("s/k%d", i)
		if h, _, _ := roles(t, ps, key); h == ps[0] {
			ids := fn.live()
			k := uint64(chord.ContentKey("", key))
			j, _ := slices.BinarySearch(ids, ps[0].id)
			prev := ids[(j+len(ids)-1)%len(ids)]
			if k != ps[0].id && (prev < k || prev > ps[0].id) && k < ps[0].id {
				break
			}
		}
	}
	_, a, _ := roles(t, ps, key)
	a.get(key)
	eventually(t, "a listed at ps[0]", func() bool { return slices.Contains(holders(ps[0], key), a.id) })
	// The newcomer's ID is the key itself: it owns the key.
	nc := fn.addWithID("newcomer", uint64(chord.ContentKey("", key)), 0.5, replica.DefaultConfig(), nil)
	ps[0].m.handOver(time.Now())
	eventually(t, "entries handed over", func() bool { return slices.Contains(holders(nc, key), a.id) })
	if len(holders(ps[0], key)) != 0 {
		t.Fatalf("old home still lists %v", holders(ps[0], key))
	}
	// a's registration is due (refresh) and goes to ps[0], which answers
	// notmine: a looks the home up again and registers at the newcomer.
	nc.m.mu.Lock()
	nc.m.dir.Remove(chord.ContentKey("", key), a.m.holderID())
	nc.m.mu.Unlock()
	a.m.mu.Lock()
	a.m.hold.Forget(key)
	a.m.hold.Hold(time.Now(), key, ps[0].id) // registered at the old home, as before the join
	a.m.mu.Unlock()
	a.m.refresh(t.Context(), time.Now().Add(2*time.Hour))
	eventually(t, "a registered at the new home", func() bool { return slices.Contains(holders(nc, key), a.id) })
	if h := a.m.hold.Home(key); h != nc.id {
		t.Fatalf("a's holding says home %016x, want the newcomer", h)
	}
}
