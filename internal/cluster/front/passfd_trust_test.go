//go:build linux

package front

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/policy"
	"shoal/internal/testutil"
)

// nobody is the uid and gid the foreign socket's listener runs as.
const nobody = 65534

// TestPassFDHelperForeignSocket is, as a helper process run as another
// user, a listener on a handoff socket that a front must not trust: it says
// "ready", then "took" for every connection it receives.
func TestPassFDHelperForeignSocket(t *testing.T) {
	sock := os.Getenv("SHOAL_TEST_FOREIGN_SOCK")
	if sock == "" {
		t.Skip("only as a helper process")
	}
	hl, err := handoff.ListenFD(sock)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("ready")
	for {
		c, err := hl.Accept()
		if err != nil {
			return
		}
		fmt.Println("took")
		c.Close()
	}
}

// foreignSocket starts a handoff listener at dir/foreign.sock in a child
// process running as nobody, and returns a count of the connections it
// received. The test binary is copied into dir, since nobody cannot reach
// the one go test built.
func foreignSocket(t *testing.T, dir string) (string, *atomic.Int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a listener as another user (SO_PEERCRED reports the listening process's uid)")
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "front.test")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "foreign.sock")
	cmd := exec.Command(exe, "-test.run=^TestPassFDHelperForeignSocket$")
	cmd.Env = append(os.Environ(), "SHOAL_TEST_FOREIGN_SOCK="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("foreign listener said %q", lines.Text())
	}
	var took atomic.Int64
	go func() {
		for lines.Scan() {
			if lines.Text() == "took" {
				took.Add(1)
			}
		}
	}()
	return sock, &took
}

// localSocket listens on a handoff socket at path in this process and
// counts the connections it receives.
func localSocket(t *testing.T, path string) *atomic.Int64 {
	t.Helper()
	hl, err := handoff.ListenFD(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hl.Close() })
	var took atomic.Int64
	go func() {
		for {
			c, err := hl.Accept()
			if err != nil {
				return
			}
			took.Add(1)
			c.Close()
		}
	}()
	return &took
}

// TestPassFDUntrustedSocket checks that a front passes no client socket to
// a handoff socket a node reports unless it lies inside the handoff folder
// and is served by the configured user: each request is
// relayed instead, answered correctly, and the refusal counted.
func TestPassFDUntrustedSocket(t *testing.T) {
	mk := func(t *testing.T) string {
		d, err := os.MkdirTemp("", "shoal-trust-") // short: socket paths are limited to 107 bytes
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	for _, tc := range []struct {
		name string
		// setup returns the handoff folder to configure, the socket path
		// the node reports, and the count of connections that socket got.
		setup            func(t *testing.T) (dir, sock string, took *atomic.Int64)
		wantDir, wantUID uint64
	}{
		{"served by another user", func(t *testing.T) (string, string, *atomic.Int64) {
			d := mk(t)
			sock, took := foreignSocket(t, d)
			return d, sock, took
		}, 0, 1},
		{"outside the handoff folder", func(t *testing.T) (string, string, *atomic.Int64) {
			in, out := mk(t), mk(t)
			sock := filepath.Join(out, "n.sock")
			return in, sock, localSocket(t, sock)
		}, 1, 0},
		{"dot-dot out of the folder", func(t *testing.T) (string, string, *atomic.Int64) {
			in, out := mk(t), mk(t)
			sock := filepath.Join(out, "n.sock")
			return in, in + "/../" + filepath.Base(out) + "/n.sock", localSocket(t, sock)
		}, 1, 0},
		{"symbolic link out of the folder", func(t *testing.T) (string, string, *atomic.Int64) {
			in, out := mk(t), mk(t)
			sock := filepath.Join(out, "n.sock")
			took := localSocket(t, sock)
			if err := os.Symlink(sock, filepath.Join(in, "n.sock")); err != nil {
				t.Fatal(err)
			}
			return in, filepath.Join(in, "n.sock"), took
		}, 1, 0},
		{"symbolic link to a folder outside", func(t *testing.T) (string, string, *atomic.Int64) {
			in, out := mk(t), mk(t)
			took := localSocket(t, filepath.Join(out, "n.sock"))
			if err := os.Symlink(out, filepath.Join(in, "sub")); err != nil {
				t.Fatal(err)
			}
			return in, filepath.Join(in, "sub", "n.sock"), took
		}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sock, took := tc.setup(t)
			root, urls, sums := passfdSite(t)
			nodeURL, _ := passfdNode(t, root, mk(t), 0)
			p, _ := policy.New("wrr", policy.Config{})
			cl, err := control.New(p, []control.NodeSpec{{URL: nodeURL}}, control.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// What a hostile node added through the admin API reports.
			cl.SetStatus(0, &control.Status{HandoffSocket: sock})
			var logs testutil.SyncBuf
			s, addr := frontOn(t, cl, Config{Path: PassFD(PassFDConfig{HandoffDir: dir}), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
			const n = 3
			for i := range n {
				u := urls[i]
				resp, err := client.Get("http://" + addr + u)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != sums[u] {
					t.Fatalf("%s: status %d, %d bytes, wrong body", u, resp.StatusCode, len(b))
				}
			}
			time.Sleep(50 * time.Millisecond) // a descriptor sent would have been taken by now
			h := s.Stats().Handoff
			if h.Passed != 0 || took.Load() != 0 {
				t.Fatalf("passed %d, socket took %d: a client socket went to an untrusted listener", h.Passed, took.Load())
			}
			if h.RefusedSocketDir != tc.wantDir*n || h.RefusedSocketPeer != tc.wantUID*n || h.FallbackSend != 0 {
				t.Fatalf("handoff %+v, want refused dir %d peer %d for %d requests", h, tc.wantDir*n, tc.wantUID*n, n)
			}
			if c := strings.Count(logs.String(), "refusing its handoff socket"); c != 1 {
				t.Fatalf("refusal logged %d times, want once:\n%s", c, logs.String())
			}
		})
	}
}

// TestPassFDTrustedSocketPasses is the control: a socket inside the folder
// served by this process's user gets the connections.
func TestPassFDTrustedSocketPasses(t *testing.T) {
	dir, err := os.MkdirTemp("", "shoal-trust-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	root, urls, sums := passfdSite(t)
	nodeURL, _ := passfdNode(t, root, dir, 0)
	p, _ := policy.New("wrr", policy.Config{})
	cl, err := control.New(p, []control.NodeSpec{{URL: nodeURL}}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl.SetStatus(0, &control.Status{HandoffSocket: filepath.Join(dir, "n0.sock")})
	uid := os.Geteuid()
	s, addr := frontOn(t, cl, Config{Path: PassFD(PassFDConfig{HandoffDir: dir, HandoffUID: &uid})})
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + addr + urls[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != sums[urls[0]] {
		t.Fatal("wrong body")
	}
	if h := waitPassed(s, 1); h.Passed != 1 || h.RefusedSocketDir+h.RefusedSocketPeer != 0 {
		t.Fatalf("handoff %+v, want one pass and no refusal", h)
	}
}
