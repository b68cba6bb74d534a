package node

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/testutil"
)

const siteTOML = `
listing = false
[error_pages]
404 = "/errors/404.html"
403 = "/errors/403.html"
[types]
".foo" = "text/x-foo"
".TXT" = "text/x-shouty"
[[headers]]
match = "/assets/"
expires = "720h"
[[headers]]
match = "*.html"
cache_control = "no-cache"
[[headers]]
match = "/old/*.bin"
expires = "epoch"
[[headers]]
match = "/forever.bin"
expires = "max"
cache_control = "public, max-age=315360000, immutable"
`

func TestSiteRules(t *testing.T) {
	root, _ := site(t)
	files := map[string]string{
		SiteFile:             siteTOML,
		"errors/404.html":    "<h1>custom 404</h1>",
		"errors/403.html":    "<h1>custom 403</h1>",
		"assets/app.css":     "body{}",
		"assets/big.bin":     bigBody(), // sendfile path
		"index.html":         "<h1>home</h1>",
		"old/x.bin":          "x",
		"forever.bin":        "f",
		"data.foo":           "foo",
		"emptydir/.keep":     "",
		"assets/deep/a.json": "{}",
	}
	testutil.WriteTree(t, root, files)
	ts := start(t, root, nil) // rules from ROOT/.shoal.toml
	c := ts.dial(t)
	const month = 720 * time.Hour
	cases := []struct {
		req                string
		status             int
		cc                 string
		expires            time.Duration // -1: none; otherwise Expires - Date
		expiresExact, body string
		ctype              string
	}{
		{get("/assets/app.css"), 200, "max-age=2592000", month, "", "body{}", "text/css; charset=utf-8"},
		{get("/assets/deep/a.json"), 200, "max-age=2592000", month, "", "{}", "application/json"},
		{get("/assets/big.bin", "Range: bytes=0-8\r\n"), 206, "max-age=2592000", month, "", bigBody()[:9], "application/octet-stream"},
		{get("/assets/big.bin", "Range: bytes=0-0,2-2\r\n"), 206, "max-age=2592000", month, "", "", ""},
		{get("/index.html"), 200, "no-cache", -1, "", "<h1>home</h1>", "text/html; charset=utf-8"},
		{get("/"), 200, "no-cache", -1, "", "<h1>home</h1>", "text/html; charset=utf-8"},
		{get("/old/x.bin"), 200, "no-cache", 0, expiresEpoch, "x", "application/octet-stream"},
		{get("/forever.bin"), 200, "public, max-age=315360000, immutable", 0, expiresMax, "f", "application/octet-stream"},
		{get("/data.foo"), 200, "", -1, "", "foo", "text/x-foo"},
		{get("/hello.txt"), 200, "", -1, "", helloBody, "text/x-shouty"},
		{get("/missing"), 404, "", -1, "", "<h1>custom 404</h1>", "text/html; charset=utf-8"},
		{get("/assets/missing.css"), 404, "", -1, "", "<h1>custom 404</h1>", "text/html; charset=utf-8"},
		{get("/emptydir/"), 403, "", -1, "", "<h1>custom 403</h1>", "text/html; charset=utf-8"},
		{get("/.shoal.toml"), 404, "", -1, "", "<h1>custom 404</h1>", "text/html; charset=utf-8"},
	}
	for _, tc := range cases {
		c.send(tc.req)
		r := c.read(false)
		if r.status != tc.status || r.h.Get("Cache-Control") != tc.cc || (tc.body != "" && r.body != tc.body) ||
			(tc.ctype != "" && r.h.Get("Content-Type") != tc.ctype) {
			t.Fatalf("%q: %d %v %q", tc.req, r.status, r.h, r.body)
		}
		exp := r.h.Get("Expires")
		switch {
		case tc.expiresExact != "":
			if exp != tc.expiresExact {
				t.Fatalf("%q: Expires %q, want %q", tc.req, exp, tc.expiresExact)
			}
		case tc.expires < 0:
			if exp != "" {
				t.Fatalf("%q: Expires %q, want none", tc.req, exp)
			}
		default:
			e, err1 := http.ParseTime(exp)
			d, err2 := http.ParseTime(r.h.Get("Date"))
			if err1 != nil || err2 != nil || e.Sub(d) != tc.expires {
				t.Fatalf("%q: Expires %q Date %q, want +%v", tc.req, exp, r.h.Get("Date"), tc.expires)
			}
		}
	}
	// A 304 carries the caching headers a 200 would (RFC 9110 §15.4.5).
	c.send(get("/assets/app.css"))
	etag := c.read(false).h.Get("ETag")
	c.send(get("/assets/app.css", "If-None-Match: "+etag+"\r\n"))
	if r := c.read(false); r.status != 304 || r.h.Get("Cache-Control") != "max-age=2592000" || r.h.Get("Expires") == "" {
		t.Fatalf("304: %d %v", r.status, r.h)
	}
	// HEAD of an error page: the status and length, no body.
	c.send("HEAD /missing HTTP/1.1\r\nHost: t\r\n\r\n")
	if r := c.read(true); r.status != 404 || r.h.Get("Content-Length") != "19" {
		t.Fatalf("HEAD 404: %d %v", r.status, r.h)
	}
}

func TestLoadSiteRulesErrors(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"listin = true":                                 "unknown key \"listin\"",
		"[error_pages]\nabc = \"/x.html\"":              "not a 4xx or 5xx status",
		"[error_pages]\n404 = \"x.html\"":               "not a URL path",
		"[types]\nfoo = \"text/plain\"":                 "want \".ext\"",
		"[[headers]]\nexpires = \"1h\"":                 "match is empty",
		"[[headers]]\nmatch = \"[\"":                    "syntax error in pattern",
		"[[headers]]\nmatch = \"/a/\"\nexpires = \"x\"": "want a duration",
		"listing = 3":                                   "site rules",
	}
	for body, want := range cases {
		f := filepath.Join(dir, "s.toml")
		os.WriteFile(f, []byte(body), 0o644)
		if _, err := LoadSiteRules(f); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", body, err, want)
		}
	}
	// New refuses a root whose rules do not load.
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, SiteFile), []byte("listin = true"), 0o644)
	if _, err := New(Config{Root: root}); err == nil || !strings.Contains(err.Error(), SiteFile) {
		t.Fatalf("New with bad rules: %v", err)
	}
}
