package pop

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
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
	ck := chord.ContentKey("", key)
	// What p answers as the key's home: its own copy counts while it is.
	for _, h := range p.m.dir.List(time.Now(), ck, p.m.holderID(), p.m.store.Has(HashKey(key)) && p.owns(ck)) {
		id, _, _ := parseHolder(h)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func sorted(ids ...uint64) []uint64 { slices.Sort(ids); return ids }

// TestMissChain: a miss nobody holds goes through the key's home (shield)
// to the origin, and the asker's copy is registered at the home (which
// lists its own copy too); a miss at a
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
	eventually(t, "a and the home (its shield copy) listed at the home", func() bool { return slices.Equal(holders(home, key), sorted(a.id, home.id)) })
	if _, how := b.get(key); how != "MISS" || origin.count("/x?v=1") != 1 || b.m.stats.RemoteFetches.Load() != 1 {
		t.Fatalf("GET at b: %s, origin %d, b's remote fetches %d (want a holder's copy)", how, origin.count("/x?v=1"), b.m.stats.RemoteFetches.Load())
	}
	if _, how := b.get(key); how != "HIT" {
		t.Fatalf("second GET at b: %s, want HIT", how)
	}
	eventually(t, "b listed too", func() bool { return slices.Equal(holders(home, key), sorted(a.id, b.id, home.id)) })
	a.m.Evicted(key)
	eventually(t, "a unlisted after its eviction", func() bool { return slices.Equal(holders(home, key), sorted(b.id, home.id)) })
	if a.m.store.Has(HashKey(key)) || a.m.stats.Evictions.Load() != 1 || !home.m.store.Has(HashKey(key)) {
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
	eventually(t, "both listed, and the home's shield copy", func() bool { return len(holders(home, key)) == 3 })
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
	a.m.store.Forget(HashKey(key))
	a.m.store.Hold(time.Now(), HashKey(key), ps[0].id) // registered at the old home, as before the join
	a.m.mu.Unlock()
	a.m.refresh(t.Context(), time.Now().Add(2*time.Hour))
	eventually(t, "a registered at the new home", func() bool { return slices.Contains(holders(nc, key), a.id) })
	if h := a.m.store.Home(HashKey(key)); h != nc.id {
		t.Fatalf("a's holding says home %016x, want the newcomer", h)
	}
}

// TestPurgeEveryPoPConfirms: a hard purge by URL issued at one PoP is
// applied at every PoP, confirmed by all, the copies leave the directory,
// and the next request goes to the origin.
func TestPurgeEveryPoPConfirms(t *testing.T) {
	_, ps, origin := fakeRing(t, 3, replica.DefaultConfig())
	key := "s/p"
	home, a, b := roles(t, ps, key)
	a.get(key)
	b.get(key)
	eventually(t, "two holders and the home", func() bool { return len(holders(home, key)) == 3 })
	res, err := b.m.issuePurge(t.Context(), replica.Purge{URL: "/p"})
	if err != nil || len(res.Confirmed) != 3 || len(res.Missing) != 0 || res.Local != 1 {
		t.Fatalf("purge: %+v %v", res, err)
	}
	for _, p := range ps {
		if p.node.has(key) || p.m.store.Has(HashKey(key)) {
			t.Fatalf("%s still holds %s", p.name, key)
		}
	}
	eventually(t, "directory emptied", func() bool { return len(holders(home, key)) == 0 })
	if _, how := a.get(key); how != "MISS" || origin.count("/p") != 2 {
		t.Fatalf("after purge: %s, origin %d (want a fresh origin fetch)", how, origin.count("/p"))
	}
}

// TestPurgeReachesAPoPThatWasAway: with one PoP cut off, a purge answers
// with that PoP missing; a copy it still holds is refused by the others
// (tombstone); when it is back, a sync applies the purge there too.
func TestPurgeReachesAPoPThatWasAway(t *testing.T) {
	fn, ps, origin := fakeRing(t, 3, replica.DefaultConfig())
	key := "s/away"
	home, a, away := roles(t, ps, key)
	away.get(key)
	eventually(t, "away listed", func() bool { return slices.Contains(holders(home, key), away.id) })
	fn.mu.Lock()
	fn.cut[[2]uint64{away.id, a.id}], fn.cut[[2]uint64{away.id, home.id}] = true, true
	fn.mu.Unlock()
	time.Sleep(10 * time.Millisecond) // the copy must be older than the purge (margin 0 below)
	a.m.cfg.PurgeMargin, home.m.cfg.PurgeMargin = 0, 0
	a.m.confirm = 200 * time.Millisecond
	res, err := a.m.issuePurge(t.Context(), replica.Purge{Prefix: "/aw"})
	if err != nil || !slices.Equal(res.Missing, []string{away.name}) || len(res.Confirmed) != 2 {
		t.Fatalf("purge with %s away: %+v %v", away.name, res, err)
	}
	// The directory (at the home, which applied the purge) still lists
	// away, whose copy predates the purge: a refuses it and asks the origin.
	home.node.Drop([]uint64{HashKey(key)})
	home.m.Evicted(key)
	n := origin.count("/away")
	if _, how := a.get(key); how != "MISS" || origin.count("/away") != n+1 || a.m.stats.Tombstoned.Load() != 1 {
		t.Fatalf("a's miss: %s, origin %d→%d, tombstoned %d (want the old copy refused)", how, n, origin.count("/away"), a.m.stats.Tombstoned.Load())
	}
	if !away.node.has(key) {
		t.Fatal("away lost its copy while cut off")
	}
	fn.mu.Lock()
	clear(fn.cut)
	fn.mu.Unlock()
	away.m.syncPurges(a.id, "", time.Now())
	eventually(t, "the purge applied at away after the sync", func() bool { return !away.node.has(key) })
}

// TestPurgeByTagAndSoft: a soft purge by surrogate key marks the tagged
// copies stale everywhere and leaves the others.
func TestPurgeByTagAndSoft(t *testing.T) {
	_, ps, origin := fakeRing(t, 2, replica.DefaultConfig())
	origin.tags["/t1"], origin.tags["/t2"] = "shop product-1", "product-2"
	for _, p := range ps {
		p.get("s/t1")
		p.get("s/t2")
	}
	time.Sleep(10 * time.Millisecond)
	ps[0].m.cfg.PurgeMargin = 0
	ps[1].m.cfg.PurgeMargin = 0
	res, err := ps[0].m.issuePurge(t.Context(), replica.Purge{Tag: "shop", Soft: true})
	if err != nil || len(res.Confirmed) != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	for _, p := range ps {
		if p.node.has("s/t1") || !p.node.has("s/t2") {
			t.Fatalf("%s: t1 fresh %v (want stale), t2 fresh %v (want fresh)", p.name, p.node.has("s/t1"), p.node.has("s/t2"))
		}
	}
}

// TestRollPushesHotAndEvictsCold: at the end of a window the nodes' hits
// count; the copy asked at least HotMin times is pushed to, and fetched
// by, the PoP that lacks it (from the holder, not the origin); a copy
// asked fewer than M times in the window is dropped and unregistered.
func TestRollPushesHotAndEvictsCold(t *testing.T) {
	cfg := replica.DefaultConfig()
	cfg.MinRequests, cfg.HotMin = 2, 3
	_, ps, origin := fakeRing(t, 2, cfg)
	p, q := ps[0], ps[1]
	p.get("s/hot")
	p.get("s/cold")
	for range 3 {
		p.get("s/hot") // node hits: counted at the roll
	}
	p.m.roll(time.Now().Add(time.Hour)) // the copies' first window: they stay
	if !p.node.has("s/cold") || !p.m.store.Has(HashKey("s/cold")) {
		t.Fatal("a copy in its first window was evicted")
	}
	eventually(t, "hot pushed and fetched", func() bool { return q.node.has("s/hot") })
	if origin.count("/hot") != 1 || q.m.stats.PushesReceived.Load() != 1 {
		t.Fatalf("origin asked %d times for /hot, q received %d pushes", origin.count("/hot"), q.m.stats.PushesReceived.Load())
	}
	p.get("s/hot")
	p.get("s/hot")
	p.m.roll(time.Now().Add(2 * time.Hour))
	if p.node.has("s/cold") || p.m.store.Has(HashKey("s/cold")) || !p.node.has("s/hot") {
		t.Fatalf("after the second window: cold held %v, hot held %v", p.node.has("s/cold"), p.node.has("s/hot"))
	}
	o, _ := p.lookup(t.Context(), chord.ContentKey("", "s/cold"))
	home := p
	if uint64(o.ID) == q.id {
		home = q
	}
	eventually(t, "cold unregistered", func() bool { return !slices.Contains(holders(home, "s/cold"), p.id) })
}

// TestWatchView: a PoP seen alive again is asked for purges; one that died
// has its keys registered at their new homes.
func TestWatchView(t *testing.T) {
	fn, ps, _ := fakeRing(t, 3, replica.DefaultConfig())
	key := "s/w"
	home, a, _ := roles(t, ps, key)
	a.get(key)
	eventually(t, "a listed", func() bool { return slices.Contains(holders(home, key), a.id) })
	alive := map[uint64]bool{}
	a.m.watchView(time.Now(), alive) // first sight: a sync with each other PoP
	if n := a.m.stats.Syncs.Load(); n != 2 {
		t.Fatalf("syncs at first sight: %d, want 2", n)
	}
	fn.mu.Lock()
	fn.down[home.id] = true
	fn.mu.Unlock()
	a.m.watchView(time.Now(), alive)
	newHome, _ := a.lookup(t.Context(), chord.ContentKey("", key))
	nh := fn.pops[uint64(newHome.ID)]
	eventually(t, "a registered at the new home", func() bool { return slices.Contains(holders(nh, key), a.id) })
	fn.mu.Lock()
	fn.down[home.id] = false
	fn.mu.Unlock()
	a.m.watchView(time.Now(), alive)
	if n := a.m.stats.Syncs.Load(); n != 3 {
		t.Fatalf("syncs after the home came back: %d, want 3", n)
	}
}

// TestPurgeAnswer: POST /purge answers 200 when every live PoP confirmed,
// 504 naming the ones that did not, and 400 for a purge that names
// nothing.
func TestPurgeAnswer(t *testing.T) {
	fn, ps, _ := fakeRing(t, 3, replica.DefaultConfig())
	p := &PoP{cm: &cacheMode{m: ps[0].m}}
	ps[0].m.confirm = 200 * time.Millisecond
	post := func(q string) (int, PurgeResult) {
		w := httptest.NewRecorder()
		p.servePurge(w, httptest.NewRequest("POST", "/purge?"+q, nil))
		var res PurgeResult
		json.Unmarshal(w.Body.Bytes(), &res)
		return w.Code, res
	}
	if code, res := post("prefix=/a/&soft=1"); code != 200 || len(res.Confirmed) != 3 || !res.Purge.Soft {
		t.Fatalf("all up: %d %+v", code, res)
	}
	fn.mu.Lock()
	fn.cut[[2]uint64{ps[0].id, ps[2].id}] = true
	fn.mu.Unlock()
	if code, res := post("tag=shop"); code != 504 || !slices.Equal(res.Missing, []string{ps[2].name}) {
		t.Fatalf("one cut off: %d %+v, want 504 naming %s", code, res, ps[2].name)
	}
	if code, _ := post("host=x.com"); code != 400 {
		t.Fatalf("nothing named: %d, want 400", code)
	}
}

// TestShieldDetourLive: the live plan weighs the shield's detour as the
// simulator's does (replica.Config.ShieldStretch, 1.5): the home's answer
// carries its time to the origin. self→origin 100 ms, self→home 20 ms:
// through a home 10 ms from the origin (30 ms ≤ 150) the shield is taken;
// through one 200 ms from it (220 > 150) the miss goes straight to the
// origin.
func TestShieldDetourLive(t *testing.T) {
	fn, ps, _ := fakeRing(t, 3, replica.DefaultConfig())
	fn.rtt = 20 * time.Millisecond
	key := "s/detour"
	home, a, _ := roles(t, ps, key)
	a.m.originRTT.Store(int64(100 * time.Millisecond))
	for _, tc := range []struct {
		homeOrigin time.Duration
		shield     bool
	}{{10 * time.Millisecond, true}, {200 * time.Millisecond, false}} {
		home.m.originRTT.Store(int64(tc.homeOrigin))
		rt := a.m.route(t.Context(), key)
		got := slices.ContainsFunc(rt.steps, func(s replica.Step) bool { return s.Source == replica.Shield })
		if got != tc.shield {
			t.Errorf("home %v from the origin: plan %v, shield %v, want %v", tc.homeOrigin, rt.steps, got, tc.shield)
		}
	}
}
