package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFrontPublishToNodes wires the pieces as an operator would: two
// `shoal node` processes with --publish-dir and the admin token, a `shoal
// front` with publish_dir, then `shoal publish`. Both nodes serve the new
// file afterwards, and the front's access log has the requests in CLF.
func TestFrontPublishToNodes(t *testing.T) {
	dir := t.TempDir()
	site, versions := filepath.Join(dir, "site"), filepath.Join(dir, "versions")
	os.MkdirAll(site, 0o755)
	os.MkdirAll(versions, 0o755)
	os.WriteFile(filepath.Join(site, "a.html"), []byte("one"), 0o644)
	token := filepath.Join(dir, "admin.token")
	os.WriteFile(token, []byte(strings.Repeat("ab", 32)), 0o600)
	start := func(args ...string) *exec.Cmd {
		cmd := asMain(args...)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
		return cmd
	}
	waitListen := func(addr string) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%s never listened", addr)
			}
		}
	}
	var nodes []string
	for range 2 {
		addr := freeAddr(t)
		start("node", "--root", site, "--listen", addr, "--publish-dir", versions, "--admin-token-file", token)
		waitListen(addr)
		nodes = append(nodes, "http://"+addr)
	}
	listen, adminAddr := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "front.toml")
	access := filepath.Join(dir, "access.log")
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen = %q\nadmin = %q\nadmin_token_file = %q\npublish_dir = %q\naccess_log = %q\n"+
		"[[node]]\nurl = %q\n[[node]]\nurl = %q\n", listen, adminAddr, token, versions, access, nodes[0], nodes[1])), 0o644)
	front := start("front", "--config", cfg)
	waitListen(adminAddr)

	os.WriteFile(filepath.Join(site, "b.html"), []byte("new"), 0o644)
	stdout, stderr, code := shoal(t, "publish", "--admin", "http://"+adminAddr, "--admin-token-file", token, site)
	if code != 0 || !strings.Contains(stdout, "published version 1 to 2 nodes: 1 added") {
		t.Fatalf("shoal publish: exit %d\n%s%s", code, stdout, stderr)
	}
	get := func(url string) string {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", string(b))
	}
	for _, n := range nodes {
		if got := get(n + "/b.html"); got != "200 new" {
			t.Errorf("node %s after publish: %q", n, got)
		}
	}
	for range 4 {
		if got := get("http://" + listen + "/b.html"); got != "200 new" {
			t.Errorf("front after publish: %q", got)
		}
	}
	front.Process.Signal(syscall.SIGTERM)
	front.Wait()
	log, _ := os.ReadFile(access)
	if n := strings.Count(string(log), `"GET /b.html HTTP/1.1" 200 3`); n != 4 {
		t.Errorf("access log has %d lines for /b.html, want 4:\n%s", n, log)
	}
}
