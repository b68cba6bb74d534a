package pop

import (
	"testing"

	"shoal/internal/cdn/replica"
)

// TestHomeAnswersOwnCopy: a key's home that holds a copy (it fetched it
// as shield for a's miss) names itself in its answer to a directory
// query, so that b ranks it among the holders, where its score wins,
// rather than after every other holder as the plan's shield step.
func TestHomeAnswersOwnCopy(t *testing.T) {
	_, ps, origin := fakeRing(t, 3, replica.DefaultConfig())
	key := "s/own"
	home, a, b := roles(t, ps, key)
	home.score, a.score, b.score = 0.9, 0.2, 0.5
	a.get(key) // a's miss: the home fetches it as shield and keeps it
	// holders is the home's answer: a, and the home's own copy.
	eventually(t, "a listed at the home", func() bool { return len(holders(home, key)) == 2 })
	before := [2]int{home.node.hitsOf(key), a.node.hitsOf(key)}
	if _, how := b.get(key); how != "MISS" || origin.count("/own") != 1 {
		t.Fatalf("GET at b: %s, origin %d (want a holder's copy)", how, origin.count("/own"))
	}
	after := [2]int{home.node.hitsOf(key), a.node.hitsOf(key)}
	if after != [2]int{before[0] + 1, before[1]} || b.m.stats.RemoteFetches.Load() != 1 || b.m.stats.ShieldFetches.Load() != 0 {
		t.Fatalf("hits home, a %v→%v; b's remote %d, shield %d fetches: want the home, the best-scoring holder, asked as holder",
			before, after, b.m.stats.RemoteFetches.Load(), b.m.stats.ShieldFetches.Load())
	}
}
