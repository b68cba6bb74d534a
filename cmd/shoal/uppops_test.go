package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUpPopsIsACDN runs `shoal up --pops 3` (with only --data, to keep the
// run's files in the test's folder): it starts an origin and three PoPs in
// front of it (in a WAN lab as root, on loopback otherwise), and prints how
// to see the CDN at work. Following those lines: the file's first GET is a
// miss from the origin; its second, at another PoP, a miss whose
// Cache-Status shows a hit at a third PoP first (a copy from a PoP, not
// the origin); its third, there again, a hit.
func TestUpPopsIsACDN(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary and starts three PoPs")
	}
	exe := buildShoal(t)
	c := startChild(t, exe, "up", "--pops", "3", "--data", t.TempDir())
	curl := regexp.MustCompile(`curl -s -o /dev/null -D - (http://\S+) `)
	var urls []string
	// As root `shoal up --pops` builds a WAN lab, which waits for the
	// host-wide lab lock while another package's lab tests hold it (go test
	// ./... runs them in parallel, a few minutes in all).
	deadline := time.After(300 * time.Second)
	for len(urls) < 3 {
		select {
		case l := <-c.lines:
			t.Log(l)
			if m := curl.FindStringSubmatch(l); m != nil {
				urls = append(urls, m[1])
			}
		case <-c.exit:
			t.Fatalf("shoal up --pops 3 exited: %v", c.err)
		case <-deadline:
			t.Fatal("no instructions after 300 s")
		}
	}
	pops := regexp.MustCompile(`^http://([^/]+)/`)
	if pops.FindString(urls[0]) == pops.FindString(urls[1]) || urls[1] != urls[2] {
		t.Fatalf("instructions: %v (want one PoP, then another twice)", urls)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(u string) (xcache, status string) {
		t.Helper()
		r, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("GET %s: %s, %d bytes", u, r.Status, len(b))
		}
		return r.Header.Get("X-Cache"), r.Header.Get("Cache-Status")
	}
	// Cache-Status entries are "name; params", one per cache on the way,
	// the nearest to the client last (RFC 9211).
	entries := func(cs string) []string { return strings.Split(cs, ", ") }
	x, cs := get(urls[0])
	if x != "MISS" || !strings.Contains(cs, "fwd=uri-miss") {
		t.Fatalf("first GET: X-Cache %q, Cache-Status %q (want a miss)", x, cs)
	}
	x, cs = get(urls[1])
	e := entries(cs)
	if len(e) < 2 {
		t.Fatalf("second GET, at another PoP: X-Cache %q, Cache-Status %q (want a miss here after a hit at another PoP)", x, cs)
	}
	last, before := e[len(e)-1], e[len(e)-2]
	if x != "MISS" || !strings.Contains(last, "fwd=uri-miss") || !strings.Contains(before, "; hit") ||
		strings.SplitN(before, ";", 2)[0] == strings.SplitN(last, ";", 2)[0] {
		t.Fatalf("second GET, at another PoP: X-Cache %q, Cache-Status %q (want a miss here after a hit at another PoP)", x, cs)
	}
	if x, cs = get(urls[2]); x != "HIT" || !strings.Contains(entries(cs)[len(entries(cs))-1], "; hit") {
		t.Fatalf("third GET: X-Cache %q, Cache-Status %q (want a hit)", x, cs)
	}
	c.stop(t)
}
