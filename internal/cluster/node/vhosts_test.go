package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shoal/internal/testutil"
)

// TestVHosts serves three sites and a default from one root: the Host
// header (or an absolute-form target) picks the folder, aliases map to
// their site, each site's rules apply, and the shared cache keeps two
// sites' /index.html apart.
func TestVHosts(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"a.example/index.html":  "site A",
		"a.example/only-a.txt":  "A only",
		"b.example/index.html":  "site B",
		"b.example/.shoal.toml": "[[headers]]\nmatch = \"*.html\"\ncache_control = \"no-cache\"\n",
		"c.example/index.html":  "site C",
		"_default/index.html":   "default site",
		".hidden/index.html":    "never a site",
	}
	testutil.WriteTree(t, root, files)
	ts := start(t, root, func(c *Config) {
		c.VHosts = true
		c.Aliases = map[string]string{"www.a.example": "a.example"}
	})
	c := ts.dial(t)
	cases := []struct {
		req, body, cc string
		status        int
	}{
		{"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", "site A", "", 200},
		{"GET /index.html HTTP/1.1\r\nHost: b.example\r\n\r\n", "site B", "no-cache", 200},
		{"GET /index.html HTTP/1.1\r\nHost: a.example\r\n\r\n", "site A", "", 200}, // cached separately from B's
		{"GET /index.html HTTP/1.1\r\nHost: C.Example:8080\r\n\r\n", "site C", "", 200},
		{"GET /index.html HTTP/1.1\r\nHost: www.a.example\r\n\r\n", "site A", "", 200},
		{"GET /index.html HTTP/1.1\r\nHost: unknown.example\r\n\r\n", "default site", "", 200},
		{"GET /index.html HTTP/1.1\r\nHost: .hidden\r\n\r\n", "default site", "", 200},
		{"GET http://b.example/index.html HTTP/1.1\r\nHost: a.example\r\n\r\n", "site B", "no-cache", 200},
		{"GET /only-a.txt HTTP/1.1\r\nHost: b.example\r\n\r\n", "", "", 404},
		{"GET /only-a.txt HTTP/1.1\r\nHost: a.example\r\n\r\n", "A only", "", 200},
		{"GET /index.html HTTP/1.0\r\n\r\n", "default site", "", 200}, // no Host at all
	}
	for _, tc := range cases {
		c.send(tc.req)
		r := c.read(false)
		if r.status != tc.status || (tc.body != "" && r.body != tc.body) || r.h.Get("Cache-Control") != tc.cc {
			t.Fatalf("%q: %d %q %v", tc.req, r.status, r.body, r.h)
		}
		if strings.Contains(tc.req, "HTTP/1.0") {
			c = ts.dial(t)
		}
	}
	// One cache object per site's file: A, B, C and default index.html and
	// A's only-a.txt (keys "a.example/index.html", ...).
	if n := ts.srv.objs.Stats().MemoryObjects; n != 5 {
		t.Fatalf("cache holds %d objects, want 5", n)
	}
	ts.srv.Shutdown(t.Context())
	log := ts.log.String()
	if !strings.Contains(log, "\nb.example 127.0.0.1 - - [") && !strings.HasPrefix(log, "b.example 127.0.0.1") {
		t.Fatalf("access log lacks the site field:\n%s", log)
	}

	// Without a _default folder, an unknown host is 404.
	os.RemoveAll(filepath.Join(root, "_default"))
	ts2 := start(t, root, func(c *Config) { c.VHosts = true })
	c2 := ts2.dial(t)
	c2.send("GET /index.html HTTP/1.1\r\nHost: unknown.example\r\n\r\n")
	if r := c2.read(false); r.status != 404 {
		t.Fatalf("unknown host without _default: %d", r.status)
	}
	// An alias to a missing site is refused at start.
	if _, err := New(Config{Root: root, VHosts: true, Aliases: map[string]string{"x": "nope.example"}}); err == nil {
		t.Fatal("alias to a missing site accepted")
	}
}

// TestVHostsReloadKeepsSites: a rescan (SIGHUP, --watch) and a two-phase
// publish of a virtual-hosts root reload every site from its own folder.
// Treating the root as one site would serve /a.example/index.html under
// any Host and 404 every site's own paths.
func TestVHostsReloadKeepsSites(t *testing.T) {
	root := t.TempDir()
	testutil.WriteTree(t, root, map[string]string{
		"a.example/index.html":    "site A",
		"b.example/index.html":    "site B",
		"b.example/index.html.br": "B compressed",
	})
	ts := start(t, root, func(c *Config) { c.VHosts = true })
	check := func(when string, cases [][3]string) {
		t.Helper()
		c := ts.dial(t)
		for _, tc := range cases {
			c.send("GET " + tc[1] + " HTTP/1.1\r\nHost: " + tc[0] + "\r\n\r\n")
			r := c.read(false)
			want := 404
			if tc[2] != "" {
				want = 200
			}
			if r.status != want || (tc[2] != "" && r.body != tc[2]) {
				t.Errorf("%s: Host %s %s: %d %q, want %d %q", when, tc[0], tc[1], r.status, r.body, want, tc[2])
			}
		}
	}
	before := [][3]string{
		{"a.example", "/index.html", "site A"},
		{"b.example", "/index.html", "site B"},
		{"a.example", "/a.example/index.html", ""},
		{"a.example", "/b.example/index.html.br", ""},
		{"b.example", "/b.example/index.html", ""},
	}
	check("at start", before)

	testutil.WriteTree(t, root, map[string]string{"a.example/index.html": "site A, edited"})
	if _, err := ts.srv.Rescan(); err != nil {
		t.Fatal(err)
	}
	after := [][3]string{
		{"a.example", "/index.html", "site A, edited"},
		{"b.example", "/index.html", "site B"},
		{"a.example", "/a.example/index.html", ""},
		{"a.example", "/b.example/index.html.br", ""},
		{"b.example", "/b.example/index.html", ""},
	}
	check("after a rescan", after)

	v := filepath.Join(t.TempDir(), "v2")
	testutil.WriteTree(t, v, map[string]string{
		"a.example/index.html": "site A, version 2",
		"b.example/index.html": "site B, version 2",
	})
	if err := ts.srv.PreparePublish(2, v); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.srv.CommitPublish(2); err != nil {
		t.Fatal(err)
	}
	check("after a publish", [][3]string{
		{"a.example", "/index.html", "site A, version 2"},
		{"b.example", "/index.html", "site B, version 2"},
		{"b.example", "/index.html.br", ""},
		{"a.example", "/a.example/index.html", ""},
		{"a.example", "/b.example/index.html", ""},
	})

	// A version that lacks a site the node serves is refused whole: no
	// site switches.
	v3 := filepath.Join(t.TempDir(), "v3")
	testutil.WriteTree(t, v3, map[string]string{"a.example/index.html": "site A, version 3"})
	if err := ts.srv.PreparePublish(3, v3); err == nil {
		t.Error("a version without b.example was prepared")
	}
	check("after a refused publish", [][3]string{{"a.example", "/index.html", "site A, version 2"}})
}
