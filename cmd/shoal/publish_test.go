package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shoal/internal/up"
)

// TestPublishCommand runs `shoal publish` against a running cluster: the new
// file is served through the front afterwards; a missing folder, a wrong
// token and no admin API are clear errors with exit status 1.
func TestPublishCommand(t *testing.T) {
	data, site, next := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(site, "index.html"), []byte("one"), 0o644)
	os.WriteFile(filepath.Join(next, "index.html"), []byte("two"), 0o644)
	os.WriteFile(filepath.Join(next, "new.html"), []byte("new"), 0o644)
	c, err := up.Start(up.Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", DataDir: data, Site: site, Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bad := filepath.Join(data, "bad.token")
	os.WriteFile(bad, []byte(strings.Repeat("x", 40)), 0o600)

	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"publish", "--admin", c.AdminURL, "--admin-token-file", c.AdminTokenFile, next}, 0,
			"published version 1 to 2 nodes: 1 added, 2 changed, 0 removed", ""},
		{[]string{"publish", "--admin", c.AdminURL, "--admin-token-file", c.AdminTokenFile, filepath.Join(next, "missing")}, 1, "", "not a folder"},
		{[]string{"publish", "--admin", c.AdminURL, "--admin-token-file", bad, next}, 1, "", "wrong bearer token (HTTP 401)"},
		{[]string{"publish", "--admin", "http://127.0.0.1:1", "--admin-token-file", c.AdminTokenFile, next}, 1, "", "is shoal up or shoal front --admin running there?"},
		{[]string{"publish"}, 1, "", "give exactly one folder"},
	} {
		stdout, stderr, code := shoal(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("shoal %v: exit %d, stdout %q, stderr %q; want exit %d, %q, %q", tc.args[:1], code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	resp, err := http.Get(c.URL + "new.html")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "new" {
		t.Fatalf("after shoal publish, /new.html is %d %q", resp.StatusCode, b)
	}
}
