//go:build linux

package handoff

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// End-to-end tests of the repair data path with the real binaries: `shoal
// front --path repair` in the front namespace, `shoal node --repair-listen`
// in each node namespace, and clients (curl and a Go client re-executed from
// this test binary) in the client namespace.

// buildShoal compiles cmd/shoal once per test binary run.
var buildOnce struct {
	sync.Once
	path string
	err  error
}

func shoalBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SHOAL_TEST_BIN"); p != "" {
		return p // a prebuilt binary: compare two builds in BenchmarkRepairFrontCPU
	}
	buildOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			buildOnce.err = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				buildOnce.err = errors.New("go.mod not found")
				return
			}
			dir = parent
		}
		out, err := os.MkdirTemp("", "shoal-repair-e2e-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(out, "shoal")
		cmd := exec.Command("go", "build", "-o", buildOnce.path, "./cmd/shoal")
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			buildOnce.err = fmt.Errorf("go build ./cmd/shoal: %v\n%s", err, b)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.path
}

// e2eSizes are the object sizes served (1 KB to 1 MB), by file index.
var e2eSizes = []int{1 << 10, 2 << 10, 4 << 10, 10 << 10, 32 << 10, 100 << 10, 256 << 10, 1 << 20}

// makeSite writes n files /fNNN.bin of e2eSizes[i%len] random bytes and a
// manifest "name size sha256" per line; it returns the site root and the
// manifest path.
func makeSite(t testing.TB, n int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "site")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var man strings.Builder
	for i := range n {
		b := make([]byte, e2eSizes[i%len(e2eSizes)])
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("f%03d.bin", i)
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(&man, "/%s %d %s\n", name, len(b), hex.EncodeToString(sum[:]))
	}
	mp := filepath.Join(dir, "manifest")
	if err := os.WriteFile(mp, []byte(man.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, mp
}

type manifestEntry struct {
	path string
	size int
	sum  string
}

func readManifest(path string) ([]manifestEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []manifestEntry
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		n, _ := strconv.Atoi(f[1])
		out = append(out, manifestEntry{f[0], n, f[2]})
	}
	return out, nil
}

// proc is a shoal process in a namespace with its log file.
type proc struct {
	cmd *exec.Cmd
	log string
}

func startShoal(t testing.TB, ns, logPath string, args ...string) *proc {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := Exec(context.Background(), ns, shoalBinary(t), args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p := &proc{cmd: cmd, log: logPath}
	t.Cleanup(func() { p.stop() })
	return p
}

// stop asks the process to shut down (SIGTERM), killing it after 5 s.
func (p *proc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	testutil.WaitOrKill(p.cmd, 5*time.Second)
}

func (p *proc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// waitLog polls the log for re until timeout.
func (p *proc) waitLog(re *regexp.Regexp, timeout time.Duration) []string {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if m := re.FindStringSubmatch(p.logText()); m != nil {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// repairCluster is a lab with nodes and a front on the repair path.
type repairCluster struct {
	lab      *Lab
	front    *proc
	nodes    []*proc
	manifest []manifestEntry
	manPath  string
	base     string // http://VIP
}

func startRepairCluster(t testing.TB, nodes, files int) *repairCluster {
	t.Helper()
	return startRepairClusterPath(t, nodes, files, "repair")
}

// stopAll stops the front and nodes and removes the lab.
func (rc *repairCluster) stopAll() {
	rc.front.stop()
	for _, n := range rc.nodes {
		n.stop()
	}
	rc.lab.Down(context.Background())
}

// startRepairClusterPath is startRepairCluster with the front on path.
func startRepairClusterPath(t testing.TB, nodes, files int, path string, frontArgs ...string) *repairCluster {
	t.Helper()
	l := newTestLab(t, nodes)
	bin := shoalBinary(t)
	_ = bin
	root, manPath := makeSite(t, files)
	man, err := readManifest(manPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("e2e-shared-key-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rc := &repairCluster{lab: l, manifest: man, manPath: manPath, base: "http://" + l.VIP.String()}
	var urls []string
	for i, a := range l.NodeAddrs {
		p := startShoal(t, l.NodeNS(i), filepath.Join(dir, fmt.Sprintf("node%d.log", i+1)),
			"node", "--root", root, "--listen", a.String()+":8080",
			"--repair-listen", a.String()+":7070", "--repair-key-file", key)
		rc.nodes = append(rc.nodes, p)
		urls = append(urls, "http://"+a.String()+":8080")
	}
	for _, p := range rc.nodes {
		if p.waitLog(regexp.MustCompile(`repair handoff port open`), 10*time.Second) == nil {
			t.Fatalf("node did not open its handoff port:\n%s", p.logText())
		}
	}
	args := append([]string{"front", "--listen", l.VIP.String() + ":80", "--nodes", strings.Join(urls, ","),
		"--path", path, "--repair-key-file", key, "--policy", "rr"}, frontArgs...)
	rc.front = startShoal(t, l.FrontNS(), filepath.Join(dir, "front.log"), args...)
	if rc.front.waitLog(regexp.MustCompile(`msg=serving `), 10*time.Second) == nil {
		t.Fatalf("front did not start:\n%s", rc.front.logText())
	}
	return rc
}

// rxBytes reads an interface's received-bytes counter inside ns.
func rxBytes(t testing.TB, ns string) int64 {
	t.Helper()
	out, err := Exec(context.Background(), ns, "cat", "/sys/class/net/eth0/statistics/rx_bytes").Output()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fetchResult is what the fetch helper (helperFetch) prints as JSON.
type fetchResult struct {
	OK, Bad, Errors, Dials int
	Slow                   int // requests that took over 100 ms
	Bytes                  int64
	FirstError             string         `json:"first_error"`
	ReadErrors             map[string]int `json:"read_errors"` // why connections ended early
}

// runFetch runs the fetch helper in the namespace ns against base with
// args (connections, requests, manifest and optionally "close") and returns
// what it reports, failing the test if it fails or reports nothing.
func runFetch(t *testing.T, ns, base string, args ...string) fetchResult {
	t.Helper()
	var res strings.Builder
	cl, _ := helper(t, ns, "fetch", &res, append([]string{base}, args...)...)
	if err := cl.Wait(); err != nil {
		t.Fatalf("Go client: %v", err)
	}
	var r fetchResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.String())), &r); err != nil {
		t.Fatalf("Go client output %q: %v", res.String(), err)
	}
	return r
}

// watchConn records the read error that ended a client connection, so a
// lost keep-alive connection is explained (EOF: the server closed it;
// reset: a RST arrived).
type watchConn struct {
	net.Conn
	n    int64
	once sync.Once
}

var (
	closeMu      sync.Mutex
	closeReasons = map[string]int{}
)

func (w *watchConn) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		closeMu.Lock()
		closeReasons["write: "+err.Error()]++
		closeMu.Unlock()
	}
	return n, err
}

func (w *watchConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	w.n += int64(n)
	if err != nil {
		w.once.Do(func() {
			if errors.Is(err, net.ErrClosed) {
				return // the client's own close
			}
			why := err.Error()
			var errno syscall.Errno
			if errors.As(err, &errno) {
				why = errno.Error()
			}
			closeMu.Lock()
			closeReasons[why]++
			closeMu.Unlock()
		})
	}
	return n, err
}

// TestRepairShoalKeepAlive is the repair path's acceptance test: many requests
// over concurrent keep-alive connections through `shoal front --path
// repair`, 1 KB to 1 MB bodies checked by SHA-256, with curl and a Go
// client. Every connection is moved to a node at its first request; the
// front's interface must not see the response bytes.
func TestRepairShoalKeepAlive(t *testing.T) {
	conns, reqs := 200, 10000
	if testing.Short() {
		conns, reqs = 40, 1000
	}
	rc := startRepairCluster(t, 3, 64)
	l := rc.lab
	rx0 := rxBytes(t, l.FrontNS())

	// curl: several URLs on one keep-alive connection, bodies compared.
	if _, err := exec.LookPath("curl"); err == nil {
		dir := t.TempDir()
		args := []string{"-sS", "--fail", "--max-time", "20"}
		for i := range 12 {
			args = append(args, rc.base+rc.manifest[i].path, "-o", filepath.Join(dir, strconv.Itoa(i)))
		}
		args = append(args, "-w", "%{num_connects}\n")
		out, err := Exec(context.Background(), l.ClientNS(), "curl", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v: %s", err, out)
		}
		if n := strings.Count(string(out), "1\n"); n != 1 {
			t.Errorf("curl opened %d connections for 12 URLs, want 1 (keep-alive): %q", n, out)
		}
		for i := range 12 {
			b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)))
			sum := sha256.Sum256(b)
			if err != nil || hex.EncodeToString(sum[:]) != rc.manifest[i].sum {
				t.Errorf("curl %s: %d bytes, checksum mismatch (%v)", rc.manifest[i].path, len(b), err)
			}
		}
	} else {
		t.Log("curl not installed: only the Go client runs")
	}

	start := time.Now()
	r := runFetch(t, l.ClientNS(), rc.base, strconv.Itoa(conns), strconv.Itoa(reqs), rc.manPath)
	elapsed := time.Since(start)
	t.Logf("Go client: %d requests over %d connections in %v: %+v", reqs, conns, elapsed.Round(time.Millisecond), r)
	if r.OK != reqs || r.Bad != 0 || r.Errors != 0 {
		t.Errorf("Go client: %d ok of %d, %d corrupt, %d errors (first: %s)", r.OK, reqs, r.Bad, r.Errors, r.FirstError)
	}
	if r.Dials != conns {
		t.Errorf("Go client dialed %d connections, want %d (keep-alive lost)", r.Dials, conns)
		for i, p := range rc.nodes {
			t.Logf("node%d log:\n%s", i+1, p.logText())
		}
	}

	// The response bytes went node → client directly: everything the
	// front's interface received (client requests and ACKs it forwards,
	// control acknowledgements) is a small fraction of the bodies.
	rx := rxBytes(t, l.FrontNS()) - rx0
	t.Logf("front eth0 received %d bytes while clients received %d body bytes (%.2f%%)", rx, r.Bytes, 100*float64(rx)/float64(r.Bytes))
	if rx*10 > r.Bytes {
		t.Errorf("front received %d bytes for %d body bytes: responses went through the front", rx, r.Bytes)
	}

	// Every moved connection ended with FIN-HANDOFF (sent by the node once
	// its socket is fully closed) and lost its steering entry.
	time.Sleep(500 * time.Millisecond)
	rc.front.stop()
	m := rc.front.waitLog(regexp.MustCompile(`stats="\{Moved:(\d+) FallbackFreeze:(\d+) FallbackNode:(\d+) Lost:(\d+) Ended:(\d+) Dropped:(\d+) Steered:(\d+)`), 5*time.Second)
	if m == nil {
		t.Fatalf("front logged no repair stats:\n%s", rc.front.logText())
	}
	t.Logf("front: %s", m[0])
	moved, _ := strconv.Atoi(m[1])
	wantMoved := conns
	if _, err := exec.LookPath("curl"); err == nil {
		wantMoved++
	}
	if moved != wantMoved || m[2] != "0" || m[3] != "0" || m[4] != "0" {
		t.Errorf("front moved %s connections (want %d), fallbacks %s/%s, lost %s", m[1], wantMoved, m[2], m[3], m[4])
	}
	if m[5] != m[1] || m[7] != "0" {
		t.Errorf("front saw %s FIN-HANDOFF for %s moved connections, %s flows still steered", m[5], m[1], m[7])
	}
}

// TestRepairShoalClose sends one request per connection ("Connection:
// close"), so every request is a handoff and the node closes first. At this
// rate clients reuse source ports within seconds; the new connection's SYN
// must reach the front even if the old flow's entry is still present, and no
// response byte may be cut off by a steering entry removed too early.
func TestRepairShoalClose(t *testing.T) {
	for _, backend := range []string{"nftables", "bpf"} {
		t.Run(backend, func(t *testing.T) { testRepairShoalClose(t, backend) })
	}
}

func testRepairShoalClose(t *testing.T, backend string) {
	reqs := 3000
	if testing.Short() {
		reqs = 300
	}
	rc := startRepairClusterPath(t, 3, 16, "repair", "--repair-steer", backend)
	start := time.Now()
	r := runFetch(t, rc.lab.ClientNS(), rc.base, "16", strconv.Itoa(reqs), rc.manPath, "close")
	t.Logf("%d one-request connections in %v: %+v", reqs, time.Since(start).Round(time.Millisecond), r)
	if r.OK != reqs || r.Bad != 0 || r.Errors != 0 || r.Dials != reqs {
		t.Errorf("Go client: %d ok of %d, %d corrupt, %d errors, %d dials (first: %s)", r.OK, reqs, r.Bad, r.Errors, r.Dials, r.FirstError)
	}
	time.Sleep(500 * time.Millisecond)
	rc.front.stop()
	m := rc.front.waitLog(regexp.MustCompile(`stats="\{Moved:(\d+) .*Lost:(\d+) Ended:(\d+) Dropped:(\d+) Steered:(\d+)`), 5*time.Second)
	if m == nil {
		t.Fatalf("front logged no repair stats:\n%s", rc.front.logText())
	}
	t.Logf("front: %s", m[0])
	if m[1] != strconv.Itoa(reqs) || m[2] != "0" || m[3] != m[1] || m[5] != "0" {
		t.Errorf("front: moved %s of %d, lost %s, ended %s, still steered %s", m[1], reqs, m[2], m[3], m[5])
	}
}

// TestRepairFallbackRelay points the front at a handoff port where nobody
// listens: each request's socket is frozen and steered, the dial fails, and
// the front must unsteer, thaw the socket and relay the request instead —
// the client sees nothing unusual.
func TestRepairFallbackRelay(t *testing.T) {
	rc := startRepairClusterPath(t, 1, 8, "repair", "--repair-port", "7999")
	r := runFetch(t, rc.lab.ClientNS(), rc.base, "4", "40", rc.manPath)
	if r.OK != 40 || r.Bad != 0 || r.Errors != 0 {
		t.Errorf("Go client through the relay fallback: %+v", r)
	}
	rc.front.stop()
	m := rc.front.waitLog(regexp.MustCompile(`stats="\{Moved:(\d+) FallbackFreeze:(\d+) FallbackNode:(\d+) Lost:(\d+) .*Steered:(\d+)`), 5*time.Second)
	if m == nil {
		t.Fatalf("front logged no repair stats:\n%s", rc.front.logText())
	}
	t.Logf("front: %s", m[0])
	// After a fallback the connection stays with the front, whose next
	// request tries the handoff again: one attempt per request.
	if m[1] != "0" || m[3] != "40" || m[4] != "0" || m[5] != "0" {
		t.Errorf("moved %s, node fallbacks %s (want 40), lost %s, steered %s", m[1], m[3], m[4], m[5])
	}
}

// TestRepairRefusedRelay makes the node refuse to rebuild (its VIP is taken
// off lo, so binding the rebuilt socket fails) once the front's control
// channel is up, so that the handoffs are refused on the asynchronous path
// of the raw accept loop: the front must unsteer, thaw each socket on the
// channel's reader and relay the request on the normal path, losing none.
func TestRepairRefusedRelay(t *testing.T) {
	reqs := 60
	rc := startRepairClusterPath(t, 1, 8, "repair")
	fetch := func(n int) fetchResult {
		t.Helper()
		return runFetch(t, rc.lab.ClientNS(), rc.base, "4", strconv.Itoa(n), rc.manPath, "close")
	}
	if r := fetch(4); r.OK != 4 { // dials the control channel
		t.Fatalf("warm-up through the handoff: %+v", r)
	}
	if out, err := Exec(context.Background(), rc.lab.NodeNS(0), "ip", "addr", "del", rc.lab.VIP.String()+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("take the VIP off the node: %v: %s", err, out)
	}
	if r := fetch(reqs); r.OK != reqs || r.Bad != 0 || r.Errors != 0 {
		t.Errorf("Go client through refused handoffs: %+v", r)
	}
	rc.front.stop()
	m := rc.front.waitLog(regexp.MustCompile(`stats="\{Moved:(\d+) FallbackFreeze:(\d+) FallbackNode:(\d+) Lost:(\d+) .*Steered:(\d+) .*Fast:(\d+)[ }]`), 5*time.Second)
	if m == nil {
		t.Fatalf("front logged no repair stats:\n%s", rc.front.logText())
	}
	t.Logf("front: %s", m[0])
	if m[1] != "4" || m[3] != strconv.Itoa(reqs) || m[4] != "0" || m[5] != "0" {
		t.Errorf("moved %s (want 4), node fallbacks %s (want %d), lost %s, steered %s", m[1], m[3], reqs, m[4], m[5])
	}
}

// TestRepairNodeDeath takes away the node that owns a moved connection,
// either by killing its process (its kernel still closes the sockets) or by
// cutting its link (nothing comes back at all). The front must drop the
// flow when the node's control channel breaks, and the client's next
// request must end in a reset or EOF, not a hang.
func TestRepairNodeDeath(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(t *testing.T, rc *repairCluster)
		want []string
	}{
		{"process killed", func(t *testing.T, rc *repairCluster) {
			rc.nodes[0].cmd.Process.Kill()
			rc.nodes[0].cmd.Wait()
		}, []string{"eof", "reset"}},
		{"link cut", func(t *testing.T, rc *repairCluster) {
			if out, err := exec.Command("ip", "-n", rc.lab.NodeNS(0), "link", "set", "eth0", "down").CombinedOutput(); err != nil {
				t.Fatalf("link down: %v: %s", err, out)
			}
		}, []string{"reset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := startRepairCluster(t, 1, 8)
			l := rc.lab
			var out strings.Builder
			var mu sync.Mutex
			w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
			// READY means the first response came over the moved connection.
			cl, in := helper(t, l.ClientNS(), "hold", w, l.VIP.String()+":80", rc.manifest[0].path)
			tc.kill(t, rc)
			start := time.Now()
			m := rc.front.waitLog(regexp.MustCompile(`channel to node 0 broke .*dropped (\d+) flows`), 15*time.Second)
			if m == nil || m[1] != "1" {
				t.Fatalf("front did not drop the flow (match %q):\n%s", m, rc.front.logText())
			}
			t.Logf("front dropped the flow %v after the node died", time.Since(start).Round(time.Millisecond))
			start = time.Now()
			fmt.Fprintln(in, "go")
			in.Close()
			if err := cl.Wait(); err != nil {
				t.Fatalf("client: %v", err)
			}
			mu.Lock()
			got := strings.TrimSpace(out.String())
			mu.Unlock()
			t.Logf("client's next request: %s after %v", got, time.Since(start).Round(time.Millisecond))
			if !slices.Contains(tc.want, got) {
				t.Errorf("client saw %q, want one of %q", got, tc.want)
			}
		})
	}
}

// helperFetch is the Go client: conns workers, each with exactly one
// keep-alive connection (plain net.Conn + http.ReadResponse, so that no
// transport quietly re-dials), share reqs requests for the manifest's
// files; it prints one JSON line. A worker whose connection fails counts an
// error and dials again.
func helperFetch(args []string) error {
	addr := strings.TrimPrefix(args[0], "http://")
	if !strings.Contains(addr, ":") {
		addr += ":80"
	}
	conns, _ := strconv.Atoi(args[1])
	reqs, _ := strconv.Atoi(args[2])
	man, err := readManifest(args[3])
	if err != nil {
		return err
	}
	closeEach := len(args) > 4 && args[4] == "close" // one request per connection
	hdr := "\r\nHost: vip\r\n\r\n"
	if closeEach {
		hdr = "\r\nHost: vip\r\nConnection: close\r\n\r\n"
	}
	fmt.Println("READY")
	var ok, bad, errs, dials, slow atomic.Int64
	var nbytes atomic.Int64
	var firstErr atomic.Value
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			var c net.Conn
			var r *bufio.Reader
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			h := sha256.New()
			fail := func(format string, a ...any) {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf(format, a...))
				if c != nil {
					c.Close()
					c = nil
				}
			}
			for {
				k := int(next.Add(1)) - 1
				if k >= reqs {
					return
				}
				e := man[k%len(man)]
				t0 := time.Now()
				if c == nil {
					dials.Add(1)
					nc, err := net.DialTimeout("tcp4", addr, 5*time.Second)
					if err != nil {
						fail("dial: %v", err)
						continue
					}
					c = &watchConn{Conn: nc}
					r = bufio.NewReaderSize(c, 64<<10)
				}
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.WriteString(c, "GET "+e.path+" HTTP/1.1"+hdr); err != nil {
					fail("write %s: %v", e.path, err)
					continue
				}
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					fail("response %s: %v", e.path, err)
					continue
				}
				h.Reset()
				n, err := io.Copy(h, resp.Body)
				resp.Body.Close()
				nbytes.Add(n)
				if err != nil {
					fail("body %s: %v after %d bytes", e.path, err, n)
					continue
				}
				if resp.StatusCode != 200 || int(n) != e.size || hex.EncodeToString(h.Sum(nil)) != e.sum {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: status %d, %d bytes, checksum mismatch", e.path, resp.StatusCode, n))
					continue
				}
				if resp.Close || closeEach {
					c.Close()
					c = nil
				}
				ok.Add(1)
				if d := time.Since(t0); d > 100*time.Millisecond {
					slow.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fe, _ := firstErr.Load().(string)
	closeMu.Lock()
	reasons := closeReasons
	closeMu.Unlock()
	b, _ := json.Marshal(map[string]any{"ok": ok.Load(), "bad": bad.Load(), "errors": errs.Load(),
		"dials": dials.Load(), "bytes": nbytes.Load(), "first_error": fe, "read_errors": reasons,
		"slow": slow.Load()})
	fmt.Println(string(b))
	return nil
}

// helperHold opens one keep-alive connection, fetches path, prints READY,
// waits for a line on stdin, sends the same request again and prints how
// the connection answered: ok, reset, eof or timeout.
func helperHold(args []string) error {
	c, err := net.DialTimeout("tcp4", args[0], 5*time.Second)
	if err != nil {
		return err
	}
	req := "GET " + args[1] + " HTTP/1.1\r\nHost: vip\r\n\r\n"
	r := bufio.NewReader(c)
	get := func() error {
		if _, err := io.WriteString(c, req); err != nil {
			return err
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := get(); err != nil {
		return fmt.Errorf("first request: %w", err)
	}
	fmt.Println("READY")
	bufio.NewReader(os.Stdin).ReadString('\n')
	c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Println(outcome(get()))
	return nil
}

// outcome names how a helper client's last exchange ended, as the tests
// match it in the helper's output: ok, reset, eof, timeout or "error: …".
func outcome(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error: " + err.Error()
}
