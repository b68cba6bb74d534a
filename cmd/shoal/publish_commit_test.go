package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestPublishCommitRetriedAndRolledBack runs `shoal front` over two `shoal
// node` processes, the second behind a proxy that can refuse the commit
// of a publish (a node that restarted, a link that dropped the answer):
//
//   - refused once, the commit is asked again and `shoal publish`
//     succeeds with both nodes on the new version;
//   - refused for good, the first node is switched back: `shoal publish`
//     fails saying the cluster was rolled back, and both nodes serve the
//     version before — together, or not at all.
//
// The second half waits out the front's commit retry window (15 s).
func TestPublishCommitRetriedAndRolledBack(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the commit retry window")
	}
	exe := buildShoal(t)
	dir := t.TempDir()
	site, versions := filepath.Join(dir, "site"), filepath.Join(dir, "versions")
	os.MkdirAll(site, 0o755)
	os.MkdirAll(versions, 0o755)
	os.WriteFile(filepath.Join(site, "a.txt"), []byte("v0"), 0o644)
	token := filepath.Join(dir, "admin.token")
	os.WriteFile(token, []byte(strings.Repeat("ab", 32)), 0o600)

	var nodes []string
	for range 2 {
		n := startChild(t, exe, "node", "--root", site, "--listen", "127.0.0.1:0", "--publish-dir", versions, "--admin-token-file", token)
		nodes = append(nodes, "http://"+field(n.waitLine(t, "node serving"), "addr"))
	}
	var refuse atomic.Int64 // commits the proxy refuses; -1: all
	target, _ := url.Parse(nodes[1])
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.shoal/publish/commit" {
			if n := refuse.Load(); n != 0 {
				refuse.Add(-1)
				if n < 0 {
					refuse.Store(-1)
				}
				http.Error(w, "proxy: connection to the node lost", http.StatusBadGateway)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	adminAddr := freeAddr(t)
	cfg := filepath.Join(dir, "front.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen = \"127.0.0.1:0\"\nadmin = %q\nadmin_token_file = %q\npublish_dir = %q\n"+
		"[[node]]\nurl = %q\n[[node]]\nurl = %q\n", adminAddr, token, versions, nodes[0], proxy.URL)), 0o644)
	f := startChild(t, exe, "front", "--config", cfg)
	f.waitLine(t, "msg=serving")
	publish := func(body string) (string, int) {
		os.WriteFile(filepath.Join(site, "a.txt"), []byte(body), 0o644)
		out, errOut, code := shoal(t, "publish", "--admin", "http://"+adminAddr, "--admin-token-file", token, site)
		return out + errOut, code
	}
	served := func(when, want string) {
		t.Helper()
		for _, n := range nodes {
			if got := getBody(t, n+"/a.txt"); got != want {
				t.Errorf("%s: %s serves %q, want %q", when, n, got, want)
			}
		}
	}

	refuse.Store(1)
	if out, code := publish("v1"); code != 0 {
		t.Fatalf("publish with one refused commit: exit %d\n%s", code, out)
	}
	served("after a retried commit", "v1")

	refuse.Store(-1)
	out, code := publish("v2")
	if code != 1 || !strings.Contains(out, "rolled back: every node serves the previous version again") {
		t.Fatalf("publish with a node that never commits: exit %d\n%s", code, out)
	}
	served("after the rollback", "v1")

	refuse.Store(0)
	if out, code := publish("v3"); code != 0 {
		t.Fatalf("publish once the node is back: exit %d\n%s", code, out)
	}
	served("after the node came back", "v3")
}
