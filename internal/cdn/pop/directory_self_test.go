package pop

import (
	"slices"
	"testing"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/replica"
)

// TestHomeListsOwnCopy: the home of a key that fetched it as shield lists
// its own copy, so that another PoP ranks it among the holders (before
// the plan's shield step, which comes after every holder). The home
// itself, missing, never asks itself.
func TestHomeListsOwnCopy(t *testing.T) {
	_, ps, origin := fakeRing(t, 3, replica.DefaultConfig())
	key := "s/own"
	home, a, b := roles(t, ps, key)
	home.score, a.score, b.score = 0.9, 0.2, 0.5
	a.get(key) // a's miss: the home fetches it as shield and keeps it
	listed := func() bool {
		home.m.mu.Lock()
		defer home.m.mu.Unlock()
		var ids []uint64
		for _, h := range home.m.dir.Holders(time.Now(), chord.ContentKey("", key)) {
			id, _, _ := parseHolder(h)
			ids = append(ids, id)
		}
		return slices.Contains(ids, home.id) && slices.Contains(ids, a.id)
	}
	eventually(t, "home and a listed at the home", listed)
	before := home.node.hitsOf(key)
	if _, how := b.get(key); how != "MISS" || origin.count("/own") != 1 {
		t.Fatalf("GET at b: %s, origin %d (want a holder's copy)", how, origin.count("/own"))
	}
	if home.node.hitsOf(key) != before+1 || b.m.stats.RemoteFetches.Load() != 1 {
		t.Fatalf("home hits %d→%d, b's remote fetches %d: want the best-scoring holder, the home, to serve",
			before, home.node.hitsOf(key), b.m.stats.RemoteFetches.Load())
	}
}
