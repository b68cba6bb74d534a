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
)

// contentRing starts n PoPs with the content tier over one origin that
// counts its requests per path (and takes 100 ms, so concurrent misses
// overlap).
func contentRing(t *testing.T, n int, tune func(*Config)) ([]*PoP, func(string) int) {
	t.Helper()
	var mu sync.Mutex
	hits := map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		fmt.Fprintf(w, "body of %s", r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	seed := writeSeed(t, dir, "seed", "0123456789abcdef0123456789abcdef")
	pops := startPoPs(t, n, "c", seed, data, func(c *Config) {
		c.Edge, c.Origin = "127.0.0.1:0", origin.URL
		if tune != nil {
			tune(c)
		}
	})
	// Wait for one view and one Chord ring.
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
			if cur == nil {
				break
			}
			seen[cur.ID] = true
			s := cur.Chord().Successors
			next := cur
			if len(s) > 0 {
				for _, q := range pops {
					if q.ID == uint64(s[0].ID) {
						next = q
					}
				}
			}
			cur = next
		}
		if ok && len(seen) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ring not formed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return pops, func(path string) int { mu.Lock(); defer mu.Unlock(); return hits[path] }
}

func get(t *testing.T, p *PoP, path string) (string, string) {
	t.Helper()
	r, err := http.Get(p.EdgeURL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 {
		t.Fatalf("GET %s at %s: %s %s", path, p.cfg.Name, r.Status, b)
	}
	return string(b), r.Header.Get("X-Shoal-Cache")
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
	owner, err := a.lookup(t.Context(), chord.ContentKey("", "/x"))
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
			r, err := http.Get(c.EdgeURL + "/hot")
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

	var res PurgeResult
	res, err = a.Purge(t.Context(), "/x", false)
	if err != nil || len(res.Confirmed) != 3 || len(res.Missing) != 0 {
		t.Fatalf("purge: %+v %v", res, err)
	}
	t.Logf("purge confirmed by %v in %.3f s", res.Confirmed, res.Seconds)
	for _, p := range pops {
		p.content.mu.Lock()
		held := p.content.store.Has("/x")
		p.content.mu.Unlock()
		if held {
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
			p.content.mu.Lock()
			if !p.content.store.Has("/popular") {
				all = false
			}
			p.content.mu.Unlock()
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
		if c.Name == "c1" {
			c.Redirect, c.MBPP.LocalBonus = true, -1
		}
	})
	a, b := pops[0], pops[1]
	get(t, a, "/r")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var loc string
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := noFollow.Get(b.EdgeURL + "/r")
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
		b.content.mu.Lock()
		b.content.store.Remove("/r") // b keeps copies; keep it missing for the test
		b.content.mu.Unlock()
	}
	if loc != a.EdgeURL+"/r?shoal_r=1" {
		t.Fatalf("redirect to %q, want a's edge with the marker", loc)
	}
	// With the marker b serves (fetching if it must): no second redirect.
	b.content.mu.Lock()
	b.content.store.Remove("/r")
	b.content.mu.Unlock()
	r, err := noFollow.Get(b.EdgeURL + "/r?shoal_r=1")
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

// TestEdgeListenerBounded: the edge closes a keep-alive connection left
// idle past its idle timeout and keeps at most MaxPerIP connections from
// one address (the others are closed at once), as the front does: idle
// connections cannot hold the edge, or the PoP's descriptors.
func TestEdgeListenerBounded(t *testing.T) {
	pops, _ := contentRing(t, 1, func(c *Config) {
		c.EdgeLimits = DefaultEdgeLimits(1024)
		c.EdgeLimits.IdleTimeout, c.EdgeLimits.MaxPerIP = 300*time.Millisecond, 3
	})
	addr := strings.TrimPrefix(pops[0].EdgeURL, "http://")
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
		t.Error("a fourth connection from one address was served (MaxPerIP 3)")
	}
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
			t.Fatalf("an idle keep-alive edge connection stayed open past the idle timeout (%v)", err)
		}
	}
}

// TestEdgeForwardsNormalisedPaths: the edge sends its origin paths free
// of dot-segments however they were encoded, and refuses encoded slashes
// (400) instead of decoding them into separators the origin would follow:
// "/a%2f..%2f..%2fsecret" reached the origin as "/a/../../secret".
func TestEdgeForwardsNormalisedPaths(t *testing.T) {
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
	pops := startPoPs(t, 1, "n", seed, filepath.Join(dir, "data"), func(c *Config) { c.Edge, c.Origin = "127.0.0.1:0", origin.URL })
	addr := strings.TrimPrefix(pops[0].EdgeURL, "http://")
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
