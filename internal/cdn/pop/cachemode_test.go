package pop

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/replica"
)

// cacheRing starts n PoPs whose nodes are caches in front of one origin
// that counts its requests per path (and takes 100 ms, so concurrent
// misses overlap); its responses are fresh for a minute.
func cacheRing(t *testing.T, n int, tune func(*Config)) ([]*PoP, func(string) int) {
	t.Helper()
	var mu sync.Mutex
	hits := map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		w.Header().Set("Cache-Control", "max-age=60")
		fmt.Fprintf(w, "body of %s", r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	dir := t.TempDir()
	seed := writeSeed(t, dir, "seed", "0123456789abcdef0123456789abcdef")
	pops := startPoPs(t, n, "m", seed, filepath.Join(dir, "data"), func(c *Config) {
		c.Origins = []string{origin.URL}
		c.Cluster.Nodes = 2
		if tune != nil {
			tune(c)
		}
	})
	waitRing(t, pops)
	return pops, func(path string) int { mu.Lock(); defer mu.Unlock(); return hits[path] }
}

// waitRing waits for one MBPP view and one Chord ring over pops.
func waitRing(t *testing.T, pops []*PoP) {
	t.Helper()
	n := len(pops)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, p := range pops {
			if p.Pops().Members != n || len(p.Chord().Successors) == 0 {
				ok = false
			}
		}
		seen := map[uint64]bool{}
		cur := pops[0]
		for range n {
			seen[cur.ID] = true
			if s := cur.Chord().Successors; len(s) > 0 {
				for _, q := range pops {
					if q.ID == uint64(s[0].ID) {
						cur = q
					}
				}
			}
		}
		if ok && len(seen) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("ring not formed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gwGet GETs path at p's gateway and returns the body and X-Cache.
func gwGet(t *testing.T, p *PoP, path string) (string, string) {
	t.Helper()
	r, err := http.Get(strings.TrimSuffix(p.Cluster.URL, "/") + path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 {
		t.Fatalf("GET %s at %s: %s %s", path, p.cfg.Name, r.Status, b)
	}
	return string(b), r.Header.Get("X-Cache")
}

// TestCacheModeAcrossPoPs: the PoPs' nodes store; a file fetched at one
// PoP is then fetched by another from a PoP holding it (not the origin)
// and hit there the third time; 50 concurrent misses cost one origin
// fetch; a purge is confirmed by every PoP and the next GET goes to the
// origin.
func TestCacheModeAcrossPoPs(t *testing.T) {
	pops, origin := cacheRing(t, 3, nil)
	owner, err := pops[0].lookup(t.Context(), chord.ContentKey("", Key("127.0.0.1", "/x")))
	if err != nil {
		t.Fatal(err)
	}
	var a, b *PoP
	for _, p := range pops {
		if p.ID != uint64(owner.ID) {
			if a == nil {
				a = p
			} else {
				b = p
			}
		}
	}
	if body, how := gwGet(t, a, "/x"); body != "body of /x" || how != "MISS" || origin("/x") != 1 {
		t.Fatalf("first GET at %s: %q %s, origin %d", a.cfg.Name, body, how, origin("/x"))
	}
	// The node registers its copy once stored, which may be just after
	// the client has its answer: wait until the home lists a.
	var home *PoP
	for _, p := range pops {
		if p.ID == uint64(owner.ID) {
			home = p
		}
	}
	eventually(t, "a listed at the home", func() bool {
		home.cm.m.mu.Lock()
		defer home.cm.m.mu.Unlock()
		return len(home.cm.m.dir.Holders(time.Now(), chord.ID(HashKey(Key("127.0.0.1", "/x"))))) == 1
	})
	if _, how := gwGet(t, b, "/x"); how != "MISS" || origin("/x") != 1 {
		t.Fatalf("GET at %s: %s, origin asked %d times", b.cfg.Name, how, origin("/x"))
	}
	if st := b.ContentStats().Counts; st["remote_fetches"] != 1 {
		t.Fatalf("%s: %v (want one remote fetch)", b.cfg.Name, st)
	}
	if _, how := gwGet(t, b, "/x"); how != "HIT" {
		t.Fatalf("third GET at %s: %s, want HIT", b.cfg.Name, how)
	}
	c := pops[2]
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := http.Get(strings.TrimSuffix(c.Cluster.URL, "/") + "/hot"); err == nil {
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
		}()
	}
	wg.Wait()
	if n := origin("/hot"); n != 1 {
		t.Fatalf("50 concurrent misses: %d origin fetches, want 1", n)
	}
	res, err := a.cm.m.issuePurge(t.Context(), parsePurgeQuery(t, "url=/x"))
	if err != nil || len(res.Confirmed) != 3 || len(res.Missing) != 0 {
		t.Fatalf("purge: %+v %v", res, err)
	}
	if _, how := gwGet(t, b, "/x"); how != "MISS" || origin("/x") != 2 {
		t.Fatalf("after purge: %s, origin %d (want a fresh origin fetch)", how, origin("/x"))
	}
}

func parsePurgeQuery(t *testing.T, q string) replica.Purge {
	t.Helper()
	r := httptest.NewRequest("POST", "/purge?"+q, nil)
	p, err := parsePurge(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestContentMetrics: a PoP's /metrics carries its content figures by
// name: hits and misses at this PoP, and the bytes its misses took from the
// origin ("body of /m", 10 bytes, fetched by whichever PoP is the key's
// home); its dashboard.json has a CDN part.
func TestContentMetrics(t *testing.T) {
	pops, _ := cacheRing(t, 2, nil)
	p := pops[0]
	gwGet(t, p, "/m")
	gwGet(t, p, "/m")
	metric := func(q *PoP, series string) float64 {
		t.Helper()
		r, err := http.Get(q.AdminURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, series+" "); ok {
				var f float64
				fmt.Sscan(v, &f)
				return f
			}
		}
		t.Fatalf("%s: no %s in /metrics", q.cfg.Name, series)
		return 0
	}
	if h := metric(p, `shoal_pop_content_total{event="hits",pop="m0"}`); h != 1 {
		t.Errorf("hits %v, want 1", h)
	}
	if m := metric(p, `shoal_pop_content_total{event="misses",pop="m0"}`); m < 1 {
		t.Errorf("misses %v, want ≥ 1", m)
	}
	if o := metric(p, `shoal_pop_content_held{pop="m0",what="objects"}`); o != 1 {
		t.Errorf("objects held %v, want 1", o)
	}
	ob := metric(pops[0], `shoal_pop_content_total{event="origin_bytes",pop="m0"}`) +
		metric(pops[1], `shoal_pop_content_total{event="origin_bytes",pop="m1"}`)
	if ob != 10 {
		t.Errorf("bytes from the origin: %v in all, want 10", ob)
	}
	var snap struct {
		CDN *struct {
			PoP    string            `json:"pop"`
			Counts map[string]uint64 `json:"counts"`
		} `json:"cdn"`
	}
	getJSON(t, p.AdminURL+"/dashboard.json", &snap)
	if snap.CDN == nil || snap.CDN.PoP != "m0" || snap.CDN.Counts["hits"] != 1 {
		t.Fatalf("dashboard.json CDN part: %+v", snap.CDN)
	}
}

// TestPeerNodeFirst: a node's miss goes first to the other nodes of its
// PoP. A response stored on one node (through the gateway) and then asked
// at the other node comes from the first node's store once its cache
// digest has reached the other (Cache-Status names it), not from the
// origin.
func TestPeerNodeFirst(t *testing.T) {
	pops, origin := cacheRing(t, 1, nil)
	p := pops[0]
	if body, how := gwGet(t, p, "/peer"); body != "body of /peer" || how != "MISS" {
		t.Fatalf("first GET: %q %s", body, how)
	}
	gw := strings.TrimPrefix(strings.TrimSuffix(p.Cluster.URL, "/"), "http://")
	nodes := p.Cluster.Nodes()
	holder := -1
	eventually(t, "a node stores /peer", func() bool {
		for i, n := range nodes {
			if n.EdgeHas(n.EdgeKey(gw, "/peer")) {
				holder = i
			}
		}
		return holder >= 0
	})
	other := nodes[1-holder]
	// Two digest rounds after the store: the other node knows.
	seen := other.PeerStats().DigestsReceived
	deadline := time.Now().Add(10 * time.Second)
	for other.PeerStats().DigestsReceived < seen+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	req, _ := http.NewRequest("GET", strings.TrimSuffix(p.Cluster.NodeURLs[1-holder], "/")+"/peer", nil)
	req.Host = gw
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cs := resp.Header.Get("Cache-Status")
	if string(b) != "body of /peer" || origin("/peer") != 1 || !strings.HasPrefix(cs, fmt.Sprintf("m0; hit; detail=node-%d, m0; fwd=uri-miss", holder)) {
		t.Fatalf("at the other node: %q, origin asked %d times, Cache-Status %q", b, origin("/peer"), cs)
	}
	if n := p.ContentStats().Counts["peer_hits"]; n != 1 {
		t.Errorf("the PoP counts %d peer hits, want 1", n)
	}
}

// TestPoPWithoutContentTierAnswers: in a ring where one PoP runs no
// content tier (no origin), a miss at the other whose key's home is that
// PoP gets an answer to its directory query at once (no holders, no
// shield) instead of waiting out the query timeout silently, and a purge
// counts that PoP as confirmed (it holds nothing).
func TestPoPWithoutContentTierAnswers(t *testing.T) {
	pops, origin := cacheRing(t, 2, func(c *Config) {
		if c.Name == "m1" {
			c.Origins = nil
		}
	})
	cache, plain := pops[0], pops[1]
	if cache.cm == nil || plain.cm != nil {
		t.Fatalf("m0 should cache and m1 not: %v %v", cache.cm != nil, plain.cm != nil)
	}
	path := ""
	for i := 0; i < 200 && path == ""; i++ {
		p := fmt.Sprintf("/k%d", i)
		owner, err := cache.lookup(t.Context(), chord.ContentKey("", Key("127.0.0.1", p)))
		if err != nil {
			t.Fatal(err)
		}
		if uint64(owner.ID) == plain.ID {
			path = p
		}
	}
	if path == "" {
		t.Fatal("no key of 200 has m1 as its home")
	}
	if body, how := gwGet(t, cache, path); body != "body of "+path || how != "MISS" || origin(path) != 1 {
		t.Fatalf("GET %s at m0: %q %s, origin %d", path, body, how, origin(path))
	}
	if st := cache.ContentStats().Counts; st["home_query_failures"] != 0 || st["shield_fetches"] != 0 {
		t.Fatalf("m0's counters %v: the home's answer was not had (or m1 was taken as a shield)", st)
	}
	res, err := cache.cm.m.issuePurge(t.Context(), parsePurgeQuery(t, "url="+path))
	if err != nil || len(res.Confirmed) != 2 || len(res.Missing) != 0 {
		t.Fatalf("purge: %+v %v", res, err)
	}
}
