package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSiteRulesExample takes the .shoal.toml example of docs/sites.md as
// it is written there, serves a site with it from a real `shoal node` and
// checks each answer the page's table promises.
func TestSiteRulesExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	doc, err := os.ReadFile("../../docs/sites.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```toml\n# .shoal.toml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/sites.md has no ```toml block starting with # .shoal.toml")
	}
	site := t.TempDir()
	for name, body := range map[string]string{
		".shoal.toml": example, "index.html": "<h1>home</h1>", "assets/app.css": "body{}",
		"site.webmanifest": "{}", "errors/404.html": "<h1>not here</h1>", "docs/a.txt": "a",
	} {
		p := filepath.Join(site, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := startChild(t, buildShoal(t), "node", "--root", site, "--listen", "127.0.0.1:0")
	base := "http://" + field(n.waitLine(t, "node serving"), "addr")
	client := &http.Client{Timeout: 10 * time.Second}
	for _, c := range []struct {
		path, header, want string
		status             int
	}{
		{"/assets/app.css", "Cache-Control", "max-age=2592000", 200},
		{"/index.html", "Cache-Control", "no-cache", 200},
		{"/site.webmanifest", "Content-Type", "application/manifest+json", 200},
		{"/missing.html", "", "<h1>not here</h1>", 404},
		{"/docs/", "", "", 403},
		{"/.shoal.toml", "", "", 404},
	} {
		resp, err := client.Get(base + c.path)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		k, _ := resp.Body.Read(buf)
		resp.Body.Close()
		got := string(buf[:k])
		if c.header != "" {
			got = resp.Header.Get(c.header)
		}
		if resp.StatusCode != c.status || (c.want != "" && got != c.want) {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, resp.StatusCode, got, c.status, c.want)
		}
		if c.path == "/assets/app.css" {
			exp, err := http.ParseTime(resp.Header.Get("Expires"))
			if err != nil || exp.Before(time.Now().Add(29*24*time.Hour)) {
				t.Errorf("GET %s: Expires %q, want a month ahead", c.path, resp.Header.Get("Expires"))
			}
		}
	}
}
