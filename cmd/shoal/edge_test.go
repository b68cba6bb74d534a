package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// cacheOrigin is an origin for the cache-mode commands: "/c" is cacheable,
// POST answers 201, everything else names itself; n counts its requests.
func cacheOrigin(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.Method == "POST" {
			w.WriteHeader(201)
			return
		}
		w.Header().Set("Cache-Control", "max-age=600")
		fmt.Fprintf(w, "origin %s %s", r.Host, r.URL.RequestURI())
	}))
	t.Cleanup(o.Close)
	return o, &n
}

// waitListening waits until addr accepts, failing the test after 20 s.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens on %s", addr)
}

func cacheGet(t *testing.T, method, url, host string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// checkCaching asks base for /c twice (a miss, then a hit the origin never
// sees), then POSTs, which reaches the origin.
func checkCaching(t *testing.T, base, cacheName string, n *atomic.Int64) {
	t.Helper()
	resp, body := cacheGet(t, "GET", base+"/c?q=1", "site.example")
	if body != "origin site.example /c?q=1" || resp.Header.Get("X-Cache") != "MISS" {
		t.Fatalf("first GET: %q X-Cache %q", body, resp.Header.Get("X-Cache"))
	}
	resp, body = cacheGet(t, "GET", base+"/c?q=1", "site.example")
	if body != "origin site.example /c?q=1" || resp.Header.Get("X-Cache") != "HIT" || n.Load() != 1 {
		t.Fatalf("second GET: %q X-Cache %q, origin asked %d times", body, resp.Header.Get("X-Cache"), n.Load())
	}
	if !strings.HasPrefix(resp.Header.Get("Cache-Status"), cacheName+"; hit") {
		t.Errorf("Cache-Status %q", resp.Header.Get("Cache-Status"))
	}
	if resp, _ = cacheGet(t, "POST", base+"/c?q=1", "site.example"); resp.StatusCode != 201 || n.Load() != 2 {
		t.Fatalf("POST: %d, origin asked %d times", resp.StatusCode, n.Load())
	}
}

// TestNodeOriginCommand: `shoal node --origin URL --data DIR` is an HTTP
// cache in front of URL, storing under DIR.
func TestNodeOriginCommand(t *testing.T) {
	o, n := cacheOrigin(t)
	addr, data := freeAddr(t), filepath.Join(t.TempDir(), "data")
	startMain(t, io.Discard, "node", "--listen", addr, "--origin", o.URL, "--data", data)
	waitListening(t, addr)
	checkCaching(t, "http://"+addr, "shoal", n)
	if entries, err := os.ReadDir(data); err != nil || len(entries) == 0 {
		t.Errorf("nothing stored under --data: %v %v", entries, err)
	}
}

// TestPopOriginCommand: `shoal pop --origin URL` serves the origin's
// content through its gateway, cached on its nodes, and no sample site.
func TestPopOriginCommand(t *testing.T) {
	o, n := cacheOrigin(t)
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed")
	os.WriteFile(seed, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	listen, adminAddr := freeAddr(t), freeAddr(t)
	startMain(t, io.Discard, "pop", "--name", "e1", "--seed-file", seed, "--listen", listen, "--peer", freeAddr(t),
		"--admin", adminAddr, "--origin", o.URL, "--data", filepath.Join(dir, "data"))
	waitListening(t, listen)
	checkCaching(t, "http://"+listen, "e1", n) // a PoP's caches go by its name
	if _, body := cacheGet(t, "GET", "http://"+listen+"/", "site.example"); body != "origin site.example /" {
		t.Errorf("/ is not the origin's: %q", body)
	}
	// A hit the node has answered before is answered by the node on the
	// client's connection (the gateway's local path), not relayed. (The
	// POST above removed the stored copy: a miss first.)
	if resp, _ := cacheGet(t, "GET", "http://"+listen+"/c?q=1", "site.example"); resp.Header.Get("X-Cache") != "MISS" {
		t.Fatalf("after the POST: X-Cache %q, want MISS", resp.Header.Get("X-Cache"))
	}
	for range 3 {
		if resp, body := cacheGet(t, "GET", "http://"+listen+"/c?q=1", "site.example"); resp.Header.Get("X-Cache") != "HIT" || body != "origin site.example /c?q=1" {
			t.Fatalf("hit: %q X-Cache %q", body, resp.Header.Get("X-Cache"))
		}
	}
	_, metrics := cacheGet(t, "GET", "http://"+adminAddr+"/metrics", "")
	local, relayed := metricValue(metrics, `shoal_front_path_requests_total{path="local"}`), metricValue(metrics, `shoal_front_path_requests_total{path="local-relayed"}`)
	if local-relayed < 2 {
		t.Errorf("local path: %v requests, %v of them relayed; want at least 2 answered by the node", local, relayed)
	}
}

// metricValue is the value of the sample named (with its labels) in a
// Prometheus text exposition, 0 when absent.
func metricValue(text, sample string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}
