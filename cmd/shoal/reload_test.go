package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testutil"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestFrontReload runs `shoal front --config` and changes the file under it:
// SIGHUP adds a node, reweights, swaps the policy and keeps a keep-alive
// client connection open through it; a listen change is refused with the
// key named and nothing applied; a limits change moves new connections to
// a new data plane on the same socket.
func TestFrontReload(t *testing.T) {
	backend := func(name string) *httptest.Server {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/.shoal/status" {
				w.Write([]byte("{}"))
				return
			}
			io.WriteString(w, name)
		}))
		t.Cleanup(ts.Close)
		return ts
	}
	a, b := backend("A"), backend("B")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "front.toml")
	listen, adminAddr := freeAddr(t), freeAddr(t)
	write := func(extra string) {
		body := fmt.Sprintf("listen = %q\nadmin = %q\n%s", listen, adminAddr, extra)
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf("policy = \"wrr\"\n[[node]]\nurl = %q\n", a.URL))
	// A flag given on the command line (--sysmon-idle=false) still wins at
	// each reload: it must not read as a change of sysmon_idle.
	var stderr testutil.SyncBuf
	cmd := startMain(t, &stderr, "front", "--config", cfg, "--sysmon-idle=false")
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("waiting for %s; stderr:\n%s", what, stderr.String())
			}
		}
	}
	waitFor("the front", func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	conn, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	get := func() string {
		t.Helper()
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("keep-alive connection: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(body)
	}
	if got := get(); got != "A" {
		t.Fatalf("before reload: %q", got)
	}
	nodes := func() []map[string]any {
		resp, err := http.Get("http://" + adminAddr + "/nodes")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ns []map[string]any
		json.NewDecoder(resp.Body).Decode(&ns)
		return ns
	}

	write(fmt.Sprintf("policy = \"lard\"\nlog_level = \"debug\"\n[[node]]\nurl = %q\n[[node]]\nurl = %q\nweight = 3\n", a.URL, b.URL))
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor("the reload", func() bool { return strings.Contains(stderr.String(), "configuration reloaded") })
	seen := map[string]bool{}
	for range 20 {
		seen[get()] = true // the same connection, still open
	}
	ns := nodes()
	if len(ns) != 2 || ns[1]["weight"] != 3.0 || !seen["A"] && !seen["B"] {
		t.Fatalf("after reload: nodes %v, answers %v", ns, seen)
	}
	resp, err := http.Get("http://" + adminAddr + "/tables")
	if err != nil {
		t.Fatal(err)
	}
	var tables map[string]any
	json.NewDecoder(resp.Body).Decode(&tables)
	resp.Body.Close()
	if tables["policy"] != "lard" {
		t.Fatalf("policy after reload: %v", tables["policy"])
	}
	resp, err = http.Get("http://" + adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `path="relay",policy="lard"}`) {
		t.Errorf("/metrics has no requests labelled with the new policy")
	}

	write(fmt.Sprintf("policy = \"wrr\"\n[[node]]\nurl = %q\n", a.URL))
	os.WriteFile(cfg, []byte(strings.Replace(mustRead(t, cfg), listen, "127.0.0.1:1", 1)), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor("the refusal", func() bool { return strings.Contains(stderr.String(), "reload refused") })
	if s := stderr.String(); !strings.Contains(s, "listen: "+listen+" -> 127.0.0.1:1: cannot change while the front runs") {
		t.Fatalf("refusal does not name the key:\n%s", s)
	}
	if len(nodes()) != 2 {
		t.Fatal("a refused reload changed the nodes")
	}
	if got := get(); got != "A" && got != "B" {
		t.Fatalf("after the refusal: %q", got)
	}

	write(fmt.Sprintf("policy = \"lard\"\nlog_level = \"debug\"\n[[node]]\nurl = %q\n[[node]]\nurl = %q\nweight = 3\n[limits]\nmax_conn_per_node = 4\n", a.URL, b.URL))
	before := strings.Count(stderr.String(), "configuration reloaded")
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor("the limits reload", func() bool { return strings.Count(stderr.String(), "configuration reloaded") > before })
	if !strings.Contains(stderr.String(), "changed=limits") {
		t.Fatalf("limits reload:\n%s", stderr.String())
	}
	for range 5 {
		resp, err := http.Get("http://" + listen + "/")
		if err != nil {
			t.Fatalf("new connection after the limits reload: %v", err)
		}
		resp.Body.Close()
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("front exit: %v\n%s", err, stderr.String())
	}
}

func mustRead(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
