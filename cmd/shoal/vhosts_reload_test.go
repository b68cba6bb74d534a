package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// hostGet fetches path from base with the given Host and returns the
// status and body.
func hostGet(t *testing.T, base, host, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Host = host
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s (Host %s): %v", base, path, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// vhostReloadCases checks that each site answers its own paths, and no
// site answers another's folder or the folder of sites.
func checkSitesConfined(t *testing.T, when, base string) {
	t.Helper()
	for _, tc := range []struct {
		host, path, body string
	}{
		{"a.localhost", "/index.html", "site A"},
		{"b.localhost", "/index.html", "site B"},
		{"a.localhost", "/a.localhost/index.html", ""},
		{"a.localhost", "/b.localhost/index.html", ""},
		{"a.localhost", "/b.localhost/index.html.br", ""},
		{"b.localhost", "/b.localhost/index.html", ""},
	} {
		status, body := hostGet(t, base, tc.host, tc.path)
		if tc.body == "" && status != 404 || tc.body != "" && (status != 200 || !strings.HasPrefix(body, tc.body)) {
			t.Errorf("%s: Host %s %s: %d %.40q", when, tc.host, tc.path, status, body)
		}
	}
}

// TestNodeVHostsCompressThenHUP: `shoal compress` on one site, then SIGHUP
// to `shoal node --vhosts`: every site keeps its own folder.
func TestNodeVHostsCompressThenHUP(t *testing.T) {
	root := t.TempDir()
	big := strings.Repeat("site B, compressible text. ", 200)
	testutil.WriteTree(t, root, map[string]string{
		"a.localhost/index.html": "site A",
		"b.localhost/index.html": "site B" + big,
	})
	c := startChild(t, buildShoal(t), "node", "--root", root, "--vhosts", "--listen", "127.0.0.1:0")
	base := "http://" + field(c.waitLine(t, "node serving"), "addr")
	checkSitesConfined(t, "at start", base)
	if out, err := asMain("compress", filepath.Join(root, "b.localhost")).CombinedOutput(); err != nil {
		t.Fatalf("shoal compress: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "b.localhost", "index.html.br")); err != nil {
		t.Fatalf("compress wrote no .br: %v", err)
	}
	c.cmd.Process.Signal(syscall.SIGHUP)
	c.waitLine(t, "site rescanned")
	checkSitesConfined(t, "after compress and SIGHUP", base)
	c.stop(t)
}

// TestUpVHostsHUP: `shoal up --vhosts --site DIR` republishes DIR on
// SIGHUP; every site keeps its own folder.
func TestUpVHostsHUP(t *testing.T) {
	root := t.TempDir()
	testutil.WriteTree(t, root, map[string]string{
		"a.localhost/index.html": "site A",
		"b.localhost/index.html": "site B",
	})
	cmd := asMain("up", "--data", t.TempDir(), "--site", root, "--vhosts", "--nodes", "2", "--admin", "off", "--listen", "127.0.0.1:0")
	out, _ := cmd.StdoutPipe()
	var stderr testutil.SyncBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, "http://") {
		t.Fatalf("shoal up said %q (%v)", line, err)
	}
	go io.Copy(io.Discard, out)
	u := strings.TrimSpace(line[strings.Index(line, "http://"):])
	base := u[:strings.Index(u[len("http://"):], "/")+len("http://")]
	checkSitesConfined(t, "at start", base)
	testutil.WriteTree(t, root, map[string]string{"a.localhost/index.html": "site A, edited"})
	cmd.Process.Signal(syscall.SIGHUP)
	for end := time.Now().Add(15 * time.Second); !strings.Contains(stderr.String(), "site published again"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no republish; stderr:\n%s", stderr.String())
		}
	}
	for range 4 { // both nodes
		checkSitesConfined(t, "after SIGHUP", base)
	}
	if _, body := hostGet(t, base, "a.localhost", "/index.html"); body != "site A, edited" {
		t.Errorf("after SIGHUP: a.localhost serves %q", body)
	}
}

// TestUpVHostsAbsoluteFormAuthorityWins: with --vhosts, a request whose
// target is in absolute form names its site by the target's authority,
// whatever Host says (RFC 9112 §3.2.2), on every data path.
func TestUpVHostsAbsoluteFormAuthorityWins(t *testing.T) {
	for _, path := range []string{"relay", "passfd"} {
		t.Run(path, func(t *testing.T) {
			root := t.TempDir()
			testutil.WriteTree(t, root, map[string]string{
				"a.localhost/index.html": "site A",
				"b.localhost/index.html": "site B",
			})
			cmd := asMain("up", "--data", t.TempDir(), "--site", root, "--vhosts", "--nodes", "2", "--admin", "off",
				"--listen", "127.0.0.1:0", "--path", path)
			out, _ := cmd.StdoutPipe()
			cmd.Stderr = io.Discard
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || !strings.Contains(line, "http://") {
				t.Fatalf("shoal up said %q (%v)", line, err)
			}
			go io.Copy(io.Discard, out)
			u := strings.TrimSpace(line[strings.Index(line, "http://"):])
			addr := strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/")
			for range 4 { // both nodes
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(c, "GET http://b.localhost/index.html HTTP/1.1\r\nHost: a.localhost\r\nConnection: close\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				c.Close()
				if resp.StatusCode != 200 || string(b) != "site B" {
					t.Fatalf("GET http://b.localhost/index.html with Host a.localhost: %d %q, want site B", resp.StatusCode, b)
				}
			}
		})
	}
}
