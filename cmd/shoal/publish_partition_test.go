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

// TestFrontPublishPartitioned: three `shoal node` processes that know each
// other (--peers, --peer-key-file) and a `shoal front` with replicas = 2
// and one node of disk_weight 2: `shoal publish` writes each file to
// exactly two nodes' trees, and every node answers every file, fetching
// what it does not store from a holder.
func TestFrontPublishPartitioned(t *testing.T) {
	dir := t.TempDir()
	site, versions := filepath.Join(dir, "site"), filepath.Join(dir, "versions")
	os.MkdirAll(filepath.Join(site, "sub"), 0o755)
	os.MkdirAll(versions, 0o755)
	files := map[string]string{}
	for i := range 30 {
		name := fmt.Sprintf("f%02d.html", i)
		if i%3 == 0 {
			name = "sub/" + name
		}
		files[name] = strings.Repeat(fmt.Sprintf("file %d ", i), 50+i*100)
		os.WriteFile(filepath.Join(site, filepath.FromSlash(name)), []byte(files[name]), 0o644)
	}
	token := filepath.Join(dir, "admin.token")
	os.WriteFile(token, []byte(strings.Repeat("ab", 32)), 0o600)
	key := filepath.Join(dir, "cluster.key")
	os.WriteFile(key, []byte(strings.Repeat("cd", 32)), 0o600)
	start := func(args ...string) {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
		cmd.Env = append(os.Environ(), "SHOAL_AS_MAIN=1")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
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
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	for _, a := range addrs {
		start("node", "--root", site, "--listen", a, "--publish-dir", versions, "--admin-token-file", token,
			"--peer-key-file", key, "--peers", strings.Join(addrs, ","))
	}
	for _, a := range addrs {
		waitListen(a)
	}
	listen, adminAddr := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "front.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen = %q\nadmin = %q\nadmin_token_file = %q\npublish_dir = %q\nreplicas = 2\n"+
		"[[node]]\nurl = \"http://%s\"\n[[node]]\nurl = \"http://%s\"\ndisk_weight = 2\n[[node]]\nurl = \"http://%s\"\n",
		listen, adminAddr, token, versions, addrs[0], addrs[1], addrs[2])), 0o644)
	start("front", "--config", cfg)
	waitListen(adminAddr)

	stdout, stderr, code := shoal(t, "publish", "--admin", "http://"+adminAddr, "--admin-token-file", token, site)
	if code != 0 {
		t.Fatalf("shoal publish: exit %d\n%s%s", code, stdout, stderr)
	}
	for name := range files {
		n := 0
		for i := range addrs {
			if fi, err := os.Lstat(filepath.Join(versions, "v000001.nodes", fmt.Sprint(i), filepath.FromSlash(name))); err == nil && fi.Mode().IsRegular() {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%s stored on %d nodes, want 2", name, n)
		}
	}
	for _, a := range append(addrs, listen) {
		for name, want := range files {
			resp, err := http.Get("http://" + a + "/" + name)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != want {
				t.Errorf("%s/%s: status %d, %d bytes, want %d", a, name, resp.StatusCode, len(b), len(want))
			}
		}
	}
}
