package up

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpAdminToken: `shoal up` makes the admin token in its data folder
// (32 random bytes, hex, mode 0600), reuses it on the next start, and its
// admin API takes changes only with it: reads stay open
// on loopback, a write without the token is 401, the cross-origin
// text/plain POST /nodes is refused and adds nothing, and the token works.
func TestUpAdminToken(t *testing.T) {
	site := t.TempDir()
	os.WriteFile(filepath.Join(site, "a.txt"), []byte("a"), 0o644)
	dataDir := t.TempDir()
	start := func() *Cluster {
		c, err := Start(Config{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", DataDir: dataDir, Site: site, Nodes: 2, CacheMB: 1, Policy: "wrr"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start()
	defer c.Close()

	if want := filepath.Join(dataDir, "admin.token"); c.AdminTokenFile != want {
		t.Errorf("AdminTokenFile = %q, want %q", c.AdminTokenFile, want)
	}
	fi, err := os.Stat(c.AdminTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(c.AdminTokenFile)
	if fi.Mode().Perm() != 0o600 || len(c.AdminToken) != 64 || string(b) != c.AdminToken+"\n" {
		t.Errorf("token file mode %v holds %q; cluster token %q: want mode 0600 and the 64-hex-digit token", fi.Mode().Perm(), b, c.AdminToken)
	}

	do := func(method, path, body string, hdr ...string) int {
		t.Helper()
		req, _ := http.NewRequest(method, c.AdminURL+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	auth := "Bearer " + c.AdminToken
	steps := []struct {
		name, method, path, body string
		hdr                      []string
		code                     int
	}{
		{"read", "GET", "/nodes", "", nil, 200},
		{"metrics", "GET", "/metrics", "", nil, 200},
		{"write without token", "PUT", "/nodes/0/weight", `{"weight":0}`, []string{"Content-Type", "application/json"}, 401},
		{"cross-origin text/plain add", "POST", "/nodes", `{"url":"http://10.9.9.9:80"}`,
			[]string{"Content-Type", "text/plain", "Origin", "http://evil.example"}, 403},
		{"write with token", "PUT", "/nodes/0/weight", `{"weight":3}`, []string{"Content-Type", "application/json", "Authorization", auth}, 200},
	}
	for _, s := range steps {
		if code := do(s.method, s.path, s.body, s.hdr...); code != s.code {
			t.Errorf("%s: %s %s = %d, want %d", s.name, s.method, s.path, code, s.code)
		}
	}
	nodes := c.Control.Nodes()
	if len(nodes) != 2 || nodes[0].Weight != 3 {
		t.Errorf("nodes after the calls = %+v; want the 2 nodes, node 0 at weight 3", nodes)
	}

	c.Close()
	again := start()
	defer again.Close()
	if again.AdminToken != c.AdminToken {
		t.Error("a second start in the same data folder made a new token; want the file's token reused")
	}
}
