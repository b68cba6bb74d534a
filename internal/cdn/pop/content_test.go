package pop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/replica"
)

// The content tier's tests from before the nodes stored the copies, on
// the new path: the PoPs' gateways are the edge, their nodes the store.

// contentRing starts n PoPs in cache mode over one counting origin.
func contentRing(t *testing.T, n int, tune func(*Config)) ([]*PoP, func(string) int) {
	return cacheRing(t, n, tune)
}

// gateway is p's gateway URL without the trailing slash.
func gateway(p *PoP) string { return strings.TrimSuffix(p.Cluster.URL, "/") }

func get(t *testing.T, p *PoP, path string) (string, string) { return gwGet(t, p, path) }

// holds reports whether p holds path (its window table and a node).
func holds(p *PoP, path string) bool {
	key := Key("127.0.0.1", path)
	p.cm.m.mu.Lock()
	held := p.cm.m.store.Has(HashKey(key))
	p.cm.m.mu.Unlock()
	return held && p.cm.cache.heldAnywhere("http://"+strings.TrimPrefix(gateway(p), "http://")+path)
}

// drop removes p's copy of path from its nodes and its table.
func drop(p *PoP, path string) {
	key := Key("127.0.0.1", path)
	p.cm.cache.Drop([]uint64{HashKey(key)})
	p.cm.m.Evicted(key)
}

// TestContentAcrossPoPs: content fetched at one PoP is then served by
// another from that PoP (not the origin) and kept there (passive copy);
// 50 concurrent misses for one URL cost one origin fetch; a purge reaches
// every PoP, is confirmed by all, and the next request goes to the origin.
func TestContentAcrossPoPs(t *testing.T) {
	pops, origin := contentRing(t, 3, nil)
	a, c := pops[0], pops[2]
	// b is a PoP that is neither a nor /x's home (the home keeps a copy
	// as shield when a fetches through it).
	owner, err := a.lookup(t.Context(), chord.ContentKey("", Key("127.0.0.1", "/x")))
	if err != nil {
		t.Fatal(err)
	}
	var b *PoP
	for _, p := range pops[1:] {
		if p.ID != uint64(owner.ID) {
			b = p
		}
	}
	if body, how := get(t, a, "/x"); body != "body of /x" || how != "MISS" || origin("/x") != 1 {
		t.Fatalf("first GET: %q %s, origin %d", body, how, origin("/x"))
	}
	if _, how := get(t, b, "/x"); how != "MISS" || origin("/x") != 1 {
		t.Fatalf("second PoP: %s, origin asked %d times", how, origin("/x"))
	}
	if _, how := get(t, b, "/x"); how != "HIT" {
		t.Fatalf("second PoP again: %s, want HIT (passive copy)", how)
	}
	if st := b.ContentStats().Counts; st["remote_fetches"]+st["shield_fetches"] != 1 {
		t.Fatalf("b: %v", st)
	}

	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := http.Get(gateway(c) + "/hot")
			if err == nil {
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
		}()
	}
	wg.Wait()
	if n := origin("/hot"); n != 1 {
		t.Fatalf("50 concurrent misses: %d origin fetches, want 1", n)
	}
	t.Logf("c after 50 concurrent misses: %v", c.ContentStats().Counts)

	res, err := a.Purge(t.Context(), replica.Purge{URL: "/x"})
	if err != nil || len(res.Confirmed) != 3 || len(res.Missing) != 0 {
		t.Fatalf("purge: %+v %v", res, err)
	}
	t.Logf("purge confirmed by %v in %.3f s", res.Confirmed, res.Seconds)
	for _, p := range pops {
		if holds(p, "/x") {
			t.Fatalf("%s still holds /x after the purge", p.cfg.Name)
		}
	}
	if _, how := get(t, b, "/x"); how != "MISS" || origin("/x") != 2 {
		t.Fatalf("after purge: %s, origin %d (want a fresh origin fetch)", how, origin("/x"))
	}
}

// TestHotPushReachesEveryPoP: with a one-second window and hot = asked at
// least 3 times, content asked often at one PoP appears at the others.
func TestHotPushReachesEveryPoP(t *testing.T) {
	pops, _ := contentRing(t, 3, func(c *Config) {
		c.CDN.Window, c.CDN.HotMin, c.CDN.DirTTL = time.Second, 3, time.Minute
	})
	for range 5 {
		get(t, pops[0], "/popular")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		all := true
		for _, p := range pops[1:] {
			if !holds(p, "/popular") {
				all = false
			}
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hot content not pushed: %v", pops[0].ContentStats().Counts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, how := get(t, pops[2], "/popular"); how != "HIT" {
		t.Fatalf("pushed copy not served: %s", how)
	}
}

// TestRedirectOnceToABetterPoP: b (redirect on, its own score lowered)
// sends a client missing /r to a, which holds it, with the marker; a
// request that carries the marker is served, never redirected again.
func TestRedirectOnceToABetterPoP(t *testing.T) {
	pops, origin := contentRing(t, 2, func(c *Config) {
		if c.Name == "m1" {
			c.Redirect, c.MBPP.LocalBonus = true, -1
		}
	})
	a, b := pops[0], pops[1]
	get(t, a, "/r")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var loc string
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := noFollow.Get(gateway(b) + "/r")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode == http.StatusFound {
			loc = r.Header.Get("Location")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never redirected: %s (%v)", r.Status, b.ContentStats().Counts)
		}
		time.Sleep(100 * time.Millisecond)
		drop(b, "/r") // b keeps copies; keep it missing for the test
	}
	if loc != gateway(a)+"/r?shoal_r=1" {
		t.Fatalf("redirect to %q, want a's gateway with the marker", loc)
	}
	// With the marker b serves (fetching if it must): no second redirect.
	drop(b, "/r")
	r, err := noFollow.Get(gateway(b) + "/r?shoal_r=1")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("marked request: %s, want 200 (no loop)", r.Status)
	}
	if origin("/r") != 1 {
		t.Fatalf("origin asked %d times", origin("/r"))
	}
}

// TestGatewayBounded: the PoP's one address, its gateway, closes a
// keep-alive connection left idle past its idle timeout and keeps at most
// MaxConnsPerIP connections from one address (the others are closed at
// once): idle connections cannot hold the PoP, or its descriptors. (Once
// the old edge listener's test; the gateway is the front, whose limits
// these are.)
func TestGatewayBounded(t *testing.T) {
	pops, _ := contentRing(t, 1, func(c *Config) {
		c.Cluster.IdleTimeout, c.Cluster.MaxConnsPerIP = 300*time.Millisecond, 3
	})
	addr := strings.TrimPrefix(gateway(pops[0]), "http://")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	read := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET /e HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		return err
	}
	var idle []net.Conn
	for range 3 {
		c := dial()
		if err := read(c); err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	if err := read(dial()); err == nil {
		t.Error("a fourth connection from one address was served (MaxConnsPerIP 3)")
	}
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
			t.Fatalf("an idle keep-alive connection stayed open past the idle timeout (%v)", err)
		}
	}
}

// TestGatewayForwardsNormalisedPaths: the PoP sends its origin paths free
// of dot-segments however they were encoded, and refuses encoded slashes
// (400) instead of decoding them into separators the origin would follow:
// "/a%2f..%2f..%2fsecret" once reached the origin as "/a/../../secret".
func TestGatewayForwardsNormalisedPaths(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.RequestURI)
		mu.Unlock()
		fmt.Fprintf(w, "origin %s", r.RequestURI)
	}))
	defer origin.Close()
	dir := t.TempDir()
	seed := writeSeed(t, dir, "seed", "0123456789abcdef0123456789abcdef")
	pops := startPoPs(t, 1, "n", seed, filepath.Join(dir, "data"), func(c *Config) { c.Origins = []string{origin.URL} })
	addr := strings.TrimPrefix(gateway(pops[0]), "http://")
	raw := func(target string) (int, string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, target := range []string{"/a%2f..%2f..%2fsecret", "/a%2F..%2Fsecret", "/a%5c..%5csecret"} {
		if st, body := raw(target); st != http.StatusBadRequest {
			t.Errorf("GET %s: %d %q, want 400", target, st, body)
		}
	}
	for target, want := range map[string]string{
		"/x/%2e%2e/y":      "/y",
		"/x/./z/../w":      "/x/w",
		"/%2E%2E/%2e%2e/v": "/v",
	} {
		if st, body := raw(target); st != 200 || body != "origin "+want {
			t.Errorf("GET %s: %d %q, want the origin to see %s", target, st, body, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range seen {
		if strings.Contains(p, "..") || strings.Contains(p, "/./") || strings.Contains(strings.ToLower(p), "%2f") || strings.Contains(p, "secret") {
			t.Errorf("the origin saw %q", p)
		}
	}
}
