package admin

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
)

// get makes a tokenless GET, as a browser on this host does, with the
// extra headers hdr (name, value, …).
func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	_, b, resp := send(t, "GET", url, "", hdr...)
	return resp, b
}

// TestDashboardServed: the page and its two assets come with their media
// type and the strict CSP, to a loopback browser without a token (the
// dashboard is a read), while the admin API's refusals still apply: a page
// of another site, a rebound DNS name, and any request to a public API
// without the token are refused.
func TestDashboardServed(t *testing.T) {
	cl, srv := setup(t) // loopback, with a token configured
	for _, c := range []struct {
		path, ctype, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script src="dashboard.js" defer></script>`},
		{"/dashboard.js", "text/javascript; charset=utf-8", "fetch('dashboard.json'"},
		{"/dashboard.css", "text/css; charset=utf-8", "prefers-color-scheme"},
	} {
		resp, body := get(t, srv.URL+c.path, "Sec-Fetch-Site", "none")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != c.ctype || !strings.Contains(body, c.contains) {
			t.Errorf("GET %s = %d %q, want 200 %q containing %q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.ctype, c.contains)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); csp != dashboardCSP || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: CSP %q", c.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", c.path)
		}
	}
	m := NewMetrics(cl, "table")
	m.WatchFront(func() front.Stats { return front.Stats{Requests: 12, Status: [6]uint64{2: 12}} })
	m.Observe(front.Observation{Node: 1, Path: "relay", Status: 200, Elapsed: 3 * time.Millisecond})
	m.Observe(front.Observation{Node: 1, Path: "passfd", Status: 200, Elapsed: 1 * time.Millisecond})
	m.Observe(front.Observation{Node: -1, Path: "relay", Status: 503})
	cl.SetStatus(1, &control.Status{CacheHitRatio: 0.25, CacheBytes: 4096})
	srv.Config.Handler = NewConfig(cl, m, Config{Token: testToken})

	resp, body := get(t, srv.URL+"/dashboard.json", "Sec-Fetch-Site", "same-origin")
	var snap Snapshot
	if err := json.Unmarshal([]byte(body), &snap); resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET /dashboard.json = %d %v %s", resp.StatusCode, err, body)
	}
	n1 := snap.Nodes[1]
	if snap.Policy != "table" || len(snap.Nodes) != 2 || snap.Stats == nil || snap.Stats.Requests != 12 || snap.Stats.Status["2xx"] != 12 ||
		n1.LatencyCount != 2 || n1.LatencySum < 0.0039 || n1.LatencySum > 0.0041 || n1.HitRatio != 0.25 || n1.CacheBytes != 4096 || n1.Weight != 3 ||
		snap.Decisions["node"] != 1 || snap.Decisions["handoff"] != 1 || snap.Decisions["none"] != 1 || snap.Nodes[0].LatencyCount != 0 {
		t.Errorf("snapshot = %+v, nodes %+v", snap, snap.Nodes)
	}

	// The checks of auth.go still hold for the dashboard's paths.
	for _, c := range []struct {
		name string
		path string
		hdr  []string
		code int
	}{
		{"another site's page", "/dashboard.json", []string{"Origin", "http://evil.example"}, 403},
		{"cross-site fetch", "/dashboard.json", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"DNS rebinding", "/", []string{"Host", "evil.example:9090"}, 403},
		{"unknown path", "/nope", nil, 404},
	} {
		resp, body := get(t, srv.URL+c.path, c.hdr...)
		if resp.StatusCode != c.code {
			t.Errorf("%s: GET %s = %d %s, want %d", c.name, c.path, resp.StatusCode, body, c.code)
		}
	}
	pub := httptest.NewServer(NewConfig(cl, m, Config{Token: testToken, Public: true}))
	defer pub.Close()
	for _, p := range []string{"/", "/dashboard.json", "/dashboard.js"} {
		if resp, _ := get(t, pub.URL+p); resp.StatusCode != 401 {
			t.Errorf("public API: tokenless GET %s = %d, want 401", p, resp.StatusCode)
		}
	}
}

// TestDashboardSelfContained: the embedded files name no other origin (no
// CDN, no font service), and the script only fetches its own JSON.
func TestDashboardSelfContained(t *testing.T) {
	url := regexp.MustCompile(`(https?:)?//[a-zA-Z0-9.-]+`)
	err := fs.WalkDir(dashboardFS, "dashboard", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := dashboardFS.ReadFile(p)
		for _, u := range url.FindAllString(string(b), -1) {
			if u != "http://www.w3.org" { // the SVG namespace name, never fetched
				t.Errorf("%s names another origin: %s", p, u)
			}
		}
		if n := strings.Count(string(b), "fetch("); strings.HasSuffix(p, ".js") && n != 1 {
			t.Errorf("%s calls fetch %d times, want once (dashboard.json)", p, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDashboardCDN: a PoP's figures appear in dashboard.json once SetCDN
// is called, and not before (a cluster's dashboard has no CDN section).
func TestDashboardCDN(t *testing.T) {
	cl, srv := setup(t)
	s := NewConfig(cl, NewMetrics(cl, "table"), Config{Token: testToken})
	srv.Config.Handler = s
	read := func() Snapshot {
		t.Helper()
		resp, body := get(t, srv.URL+"/dashboard.json", "Sec-Fetch-Site", "same-origin")
		var snap Snapshot
		if err := json.Unmarshal([]byte(body), &snap); resp.StatusCode != 200 || err != nil {
			t.Fatalf("GET /dashboard.json = %d %v %s", resp.StatusCode, err, body)
		}
		return snap
	}
	if snap := read(); snap.CDN != nil {
		t.Fatalf("cluster snapshot has a CDN part: %+v", snap.CDN)
	}
	s.SetCDN(func() CDN {
		return CDN{PoP: "pop1", Counts: map[string]uint64{"hits": 7, "origin_bytes": 1024},
			PoPs: []CDNPoP{{Name: "pop1", Alive: true, Self: true, Score: 0.9}, {Name: "pop2", Score: 0}}}
	})
	snap := read()
	if c := snap.CDN; c == nil || c.PoP != "pop1" || c.Counts["hits"] != 7 || c.Counts["origin_bytes"] != 1024 || len(c.PoPs) != 2 || c.PoPs[1].Alive {
		t.Fatalf("CDN part %+v", snap.CDN)
	}
}
