package main

import (
	"encoding/json"
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
// what it does not store from a holder. Then a fourth `shoal node`,
// started with the key alone on the served version, joins live through
// the admin API (POST /nodes with the token): the answer reports the
// rebalance, which moved exactly the newcomer's share; each file is on two
// of the four nodes and every node, the newcomer too, answers every file.
// Then node 0 is removed (DELETE /nodes/0) and stopped: each file is on
// two of the three others, and they and the front answer every file.
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
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
		cmd.Env = append(os.Environ(), "SHOAL_AS_MAIN=1")
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
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	var nodes []*exec.Cmd
	for _, a := range addrs {
		nodes = append(nodes, start("node", "--root", site, "--listen", a, "--publish-dir", versions, "--admin-token-file", token,
			"--peer-key-file", key, "--peers", strings.Join(addrs, ",")))
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
	serveAll := func(when string, at ...string) {
		t.Helper()
		for _, a := range at {
			for name, want := range files {
				resp, err := http.Get("http://" + a + "/" + name)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != want {
					t.Errorf("%s: %s/%s: status %d, %d bytes, want %d", when, a, name, resp.StatusCode, len(b), len(want))
				}
			}
		}
	}
	serveAll("published", append(addrs, listen)...)

	// stored checks that each file is on exactly two of the trees of
	// version v's nodes in slots, and returns slot k's bytes.
	stored := func(when string, v int, slots []int, k int) (own int64) {
		t.Helper()
		for name, body := range files {
			n := 0
			for _, i := range slots {
				if fi, err := os.Lstat(filepath.Join(versions, fmt.Sprintf("v%06d.nodes", v), fmt.Sprint(i), filepath.FromSlash(name))); err == nil && fi.Mode().IsRegular() {
					n++
					if i == k {
						own += int64(len(body))
					}
				}
			}
			if n != 2 {
				t.Errorf("%s: %s stored on %d nodes, want 2", when, name, n)
			}
		}
		return own
	}
	admin := func(method, path, body string) (int, rebalanced) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+adminAddr+path, strings.NewReader(body))
		tok, _ := os.ReadFile(token)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a rebalanced
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &a); err != nil || a.Rebalance.Partition == nil {
			t.Fatalf("%s %s: %d %s: no rebalance in the answer", method, path, resp.StatusCode, raw)
		}
		return resp.StatusCode, a
	}

	// Join: the newcomer serves the published version (a full copy) until
	// its share arrives.
	joiner := freeAddr(t)
	start("node", "--root", filepath.Join(versions, "current"), "--listen", joiner, "--publish-dir", versions,
		"--admin-token-file", token, "--peer-key-file", key)
	waitListen(joiner)
	code, join := admin("POST", "/nodes", fmt.Sprintf(`{"url": "http://%s"}`, joiner))
	share := stored("after join", 2, []int{0, 1, 2, 3}, 3)
	p := join.Rebalance.Partition
	t.Logf("join: moved %d bytes in %d copies, the newcomer's share %d bytes", p.Moved, p.MovedFiles, share)
	if code != 201 || join.Index != 3 || p.Moved != share || p.Written != 0 {
		t.Errorf("join: %d index %d, moved %d written %d; want 201, index 3, its share %d moved and nothing written", code, join.Index, p.Moved, p.Written, share)
	}
	serveAll("after join", append(addrs, joiner, listen)...)

	// Leave: node 0 goes, then stops.
	code, leave := admin("DELETE", "/nodes/0", "")
	if code != 200 || leave.Rebalance.Partition.Written != 0 {
		t.Errorf("leave: %d %+v", code, leave.Rebalance.Partition)
	}
	nodes[0].Process.Signal(syscall.SIGTERM)
	nodes[0].Wait()
	stored("after leave", 3, []int{0, 1, 2}, -1)
	serveAll("after leave", addrs[1], addrs[2], joiner, listen)
}

// rebalanced is the admin API's answer to POST /nodes or DELETE
// /nodes/{i} on a partitioned cluster.
type rebalanced struct {
	Index     int `json:"index"`
	Rebalance struct {
		Partition *struct {
			Moved      int64 `json:"moved_bytes"`
			MovedFiles int   `json:"moved_files"`
			Written    int64 `json:"written_bytes"`
		} `json:"partition"`
	} `json:"rebalance"`
}
