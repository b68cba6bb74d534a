package front

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/node"
	"shoal/internal/cluster/policy"
)

// passfdSite writes files of 1 KB to 1 MB with pseudo-random contents and
// returns the root, the URLs and each URL's SHA-256.
func passfdSite(t testing.TB) (string, []string, map[string]string) {
	t.Helper()
	root := t.TempDir()
	sizes := []int{1 << 10, 3000, 10 << 10, 64 << 10, 100 << 10, 300 << 10, 600 << 10, 1 << 20}
	rng := rand.New(rand.NewPCG(6, 6))
	var urls []string
	sums := map[string]string{}
	for i, n := range sizes {
		for j := range 3 {
			b := make([]byte, n)
			for k := range b {
				b[k] = byte(rng.Uint32())
			}
			name := fmt.Sprintf("f%d-%d.bin", i, j)
			if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			urls = append(urls, "/"+name)
			sums["/"+name] = hex.EncodeToString(sum[:])
		}
	}
	return root, urls, sums
}

// passfdNode runs an in-process node on TCP and on a handoff socket.
func passfdNode(t testing.TB, root, dir string, i int) (string, *handoff.FDListener) {
	return passfdNodeCfg(t, node.Config{Root: root}, dir, i)
}

// passfdNodeCfg is passfdNode for a node configured by cfg.
func passfdNodeCfg(t testing.TB, cfg node.Config, dir string, i int) (string, *handoff.FDListener) {
	t.Helper()
	sock := filepath.Join(dir, fmt.Sprintf("n%d.sock", i))
	hl, err := handoff.ListenFD(sock)
	if err != nil {
		t.Fatal(err)
	}
	cfg.HandoffSocket = sock
	return startNode(t, cfg, hl), hl
}

// startNode runs a node configured by cfg (logging nowhere unless cfg
// says) on a loopback port, and on the extra listeners, until the test
// ends, and returns its URL.
func startNode(t testing.TB, cfg node.Config, extra ...net.Listener) string {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range append(extra, ln) {
		go srv.Serve(l)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// passfdCluster starts n nodes and a front with data path path under
// policy pol, with health checks that learn the handoff sockets, and waits
// until every node has reported its socket.
func passfdCluster(t testing.TB, pol string, n int, cfg Config) (addr string, s *Server, cl *control.Cluster, hls []*handoff.FDListener, urls []string, sums map[string]string) {
	t.Helper()
	return passfdClusterOn(t, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }, pol, n, cfg)
}

// passfdClusterOn is passfdCluster with the front on a listener from
// listen (Listen's TCP_DEFER_ACCEPT one, say).
func passfdClusterOn(t testing.TB, listen func() (net.Listener, error), pol string, n int, cfg Config) (addr string, s *Server, cl *control.Cluster, hls []*handoff.FDListener, urls []string, sums map[string]string) {
	t.Helper()
	root, urls, sums := passfdSite(t)
	dir, err := os.MkdirTemp("", "shoal-passfd-") // short: socket paths are limited to 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var specs []control.NodeSpec
	for i := range n {
		u, hl := passfdNode(t, root, dir, i)
		specs = append(specs, control.NodeSpec{URL: u})
		hls = append(hls, hl)
	}
	p, err := policy.New(pol, policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err = control.New(p, specs, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkSockets(t, cl, 200*time.Millisecond)
	s, err = New(cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := listen()
	if err != nil {
		t.Fatal(err)
	}
	serveFront(t, s, ln)
	return ln.Addr().String(), s, cl, hls, urls, sums
}

// hammer sends total requests over conns concurrent keep-alive connections
// with Go's client and checks every body's length and checksum.
func hammer(t *testing.T, addr string, conns, total int, urls []string, sums map[string]string) {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var next, ok, bad atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for next.Add(1) <= int64(total) {
				// Mostly small objects, a few large ones (1 MB is 1 in 8).
				u := urls[rng.IntN(len(urls))]
				resp, err := client.Get("http://" + addr + u)
				if err != nil {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				h := sha256.New()
				_, err = io.Copy(h, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || hex.EncodeToString(h.Sum(nil)) != sums[u] {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: status %d err %v", u, resp.StatusCode, err))
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 || ok.Load() != int64(total) {
		t.Fatalf("%d good, %d bad of %d; first error: %v", ok.Load(), bad.Load(), total, firstErr.Load())
	}
}

// TestPassFDManyConnections is the passfd acceptance run: 10,000 requests
// over 200 concurrent keep-alive connections through passfd, bodies 1 KB to
// 1 MB checksummed, with a content-blind policy (nodes keep connections) and
// a content-aware one (nodes hand connections back after each request and
// the front re-dispatches them). The front's byte counters prove that no
// response byte went through it.
func TestPassFDManyConnections(t *testing.T) {
	total, conns := 10000, 200
	if testing.Short() {
		total, conns = 1000, 50
	}
	// lard+hybrid: a hybrid rule that always hands off, so returned
	// connections take the slow path (wrapped and served like new ones).
	for _, pol := range []string{"wrr", "lard", "lard+hybrid"} {
		t.Run(pol, func(t *testing.T) {
			cfg := Config{Path: PassFD(PassFDConfig{})}
			if pol == "lard+hybrid" {
				pol = "lard"
				cfg.Path = nil
				cfg.Choose = Hybrid(PassFD(PassFDConfig{}))
				cfg.Hybrid = HybridConfig{CPUPercent: -1, ActiveConns: -1, MinSize: 1, Size: func(string) int64 { return 1 }}
			}
			addr, s, _, hls, urls, sums := passfdCluster(t, pol, 3, cfg)
			hammer(t, addr, conns, total, urls, sums)
			// The nodes' counts are final once every client has its
			// answer; the front counts a pass after sendmsg returns, which
			// the node's answer can beat: wait for it to catch up.
			var recv, ret uint64
			for _, hl := range hls {
				ls := hl.Stats()
				recv += ls.Received
				ret += ls.Returned
				if ls.Dropped != 0 || ls.Stray != 0 || ls.ReturnErrors != 0 {
					t.Errorf("node listener %+v", ls)
				}
			}
			waitPassed(s, recv)
			st := s.Stats()
			h := st.Handoff
			t.Logf("front: %d requests, bytes in %d out %d; handoff %+v", st.Requests, st.BytesIn, st.BytesOut, h)
			if st.BytesOut != 0 {
				t.Errorf("front wrote %d bytes to clients; want 0 (responses bypass it)", st.BytesOut)
			}
			if h.FallbackNoSocket+h.FallbackSend != 0 {
				t.Errorf("fallbacks to relay: %+v", h)
			}
			if h.Passed != recv {
				t.Errorf("front passed %d, nodes received %d", h.Passed, recv)
			}
			switch pol {
			case "wrr": // connections stay on their node: one pass per connection
				if h.Passed == 0 || h.Passed > uint64(conns)*2 || ret != 0 {
					t.Errorf("wrr: passed %d, returned %d; want ≤ %d passes and no returns", h.Passed, ret, 2*conns)
				}
			case "lard": // every request is dispatched at the front
				if h.Passed != uint64(total) || h.Passed != st.Requests {
					t.Errorf("lard: passed %d, front requests %d, want %d", h.Passed, st.Requests, total)
				}
				if h.Returned != ret || ret < uint64(total-2*conns) {
					t.Errorf("lard: front got %d returns, nodes returned %d (want ≈ %d)", h.Returned, ret, total-conns)
				}
				fast := h.Redispatched == h.Returned
				if hybrid := cfg.Choose != nil; hybrid == fast || (hybrid && h.HybridSize != uint64(total)) {
					t.Errorf("lard (hybrid %v): %d of %d returns redispatched without wrapping", hybrid, h.Redispatched, h.Returned)
				}
			}
		})
	}
}

// TestPassFDCurl drives the front with curl processes, each fetching many
// URLs over one keep-alive connection (curl reuses it), and compares the
// concatenated bodies with the files.
func TestPassFDCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	addr, s, _, _, urls, sums := passfdCluster(t, "urlhash", 3, Config{Path: PassFD(PassFDConfig{})})
	const procs, perProc = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for p := range procs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 9))
			var picked []string
			for range perProc {
				picked = append(picked, urls[rng.IntN(len(urls))])
			}
			// One curl, many URLs: curl reuses its connection and writes
			// the bodies to stdout in order.
			args := []string{"-sS", "--fail", "--max-time", "60"}
			for _, u := range picked {
				args = append(args, "http://"+addr+u)
			}
			var out, stderr bytes.Buffer
			cmd := exec.Command(curl, args...)
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				errs <- fmt.Errorf("curl: %v: %s", err, stderr.String())
				return
			}
			b := out.Bytes()
			for i, u := range picked {
				want := sums[u]
				size := sizeOf(t, u)
				if len(b) < size {
					errs <- fmt.Errorf("proc %d url %d %s: %d bytes left, want %d", p, i, u, len(b), size)
					return
				}
				sum := sha256.Sum256(b[:size])
				if hex.EncodeToString(sum[:]) != want {
					errs <- fmt.Errorf("proc %d url %d %s: checksum mismatch", p, i, u)
					return
				}
				b = b[size:]
			}
			if len(b) != 0 {
				errs <- fmt.Errorf("proc %d: %d extra bytes", p, len(b))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitPassed(s, procs*perProc)
	st := s.Stats()
	t.Logf("front: conns accepted %d, requests %d, bytes out %d, handoff %+v", st.ConnsAccepted, st.Requests, st.BytesOut, st.Handoff)
	if st.ConnsAccepted != procs {
		t.Errorf("front accepted %d connections from %d curl processes; keep-alive not kept across handoffs", st.ConnsAccepted, procs)
	}
	if st.Handoff.Passed != procs*perProc || st.BytesOut != 0 {
		t.Errorf("passed %d (want %d), bytes out %d (want 0)", st.Handoff.Passed, procs*perProc, st.BytesOut)
	}
}

// sizeOf decodes the file size from passfdSite's naming (f<i>-<j>.bin).
func sizeOf(t *testing.T, u string) int {
	sizes := []int{1 << 10, 3000, 10 << 10, 64 << 10, 100 << 10, 300 << 10, 600 << 10, 1 << 20}
	var i, j int
	if _, err := fmt.Sscanf(u, "/f%d-%d.bin", &i, &j); err != nil {
		t.Fatalf("url %s: %v", u, err)
	}
	return sizes[i]
}

// TestPassFDFallback checks that a node without a handoff socket, or whose
// socket is gone, gets its requests relayed, and that this is counted.
func TestPassFDFallback(t *testing.T) {
	addr, s, cl, hls, urls, sums := passfdCluster(t, "wrr", 1, Config{Path: PassFD(PassFDConfig{})})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() {
		t.Helper()
		resp, err := client.Get("http://" + addr + urls[0])
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != sums[urls[0]] {
			t.Fatal("bad body")
		}
	}
	get()
	if h := waitPassed(s, 1); h.Passed != 1 {
		t.Fatalf("handoff %+v, want one pass", h)
	}
	hls[0].Close() // the node stops taking connections; its status still names the socket
	get()
	if h := s.Stats().Handoff; h.FallbackSend != 1 {
		t.Fatalf("handoff %+v, want one send fallback", h)
	}
	cl.SetStatus(0, &control.Status{}) // no socket reported
	get()
	h, st := s.Stats().Handoff, s.Stats()
	if h.FallbackNoSocket != 1 || st.BytesOut == 0 {
		t.Fatalf("handoff %+v bytes out %d, want one no-socket fallback, relayed bytes", h, st.BytesOut)
	}
}

// TestPassFDHybrid checks the hybrid rule's decisions with each threshold.
func TestPassFDHybrid(t *testing.T) {
	// The cluster's warm-up requests read sizes while the test fills it.
	var mu sync.Mutex
	sizes := map[string]int64{}
	cfg := Config{Hybrid: HybridConfig{CPUPercent: -1, ActiveConns: -1, MinSize: 100 << 10,
		Size: func(u string) int64 {
			mu.Lock()
			defer mu.Unlock()
			if n, ok := sizes[u]; ok {
				return n
			}
			return -1
		}}}
	cfg.Choose = Hybrid(PassFD(PassFDConfig{}))
	addr, s, _, _, urls, _ := passfdCluster(t, "wrr", 2, cfg)
	mu.Lock()
	for _, u := range urls {
		var i, j int
		fmt.Sscanf(u, "/f%d-%d.bin", &i, &j)
		sizes[u] = int64(sizeOf(t, u))
	}
	sizes["/f0-0.bin"] = -1 // unknown: relay
	mu.Unlock()
	want := map[string]string{"/f0-0.bin": "relay", "/f3-0.bin": "relay", "/f4-0.bin": "passfd", "/f7-1.bin": "passfd"}
	for u, path := range want {
		before := s.Stats().Handoff
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", u)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		c.Close()
		after := s.Stats().Handoff
		got := "relay"
		if after.HybridSize > before.HybridSize {
			got = "passfd"
		} else if after.HybridRelay == before.HybridRelay {
			got = "none"
		}
		if got != path || n != int64(sizeOf(t, u)) {
			t.Errorf("%s: %s, %d bytes; want %s, %d", u, got, n, path, sizeOf(t, u))
		}
	}
	if st := s.Stats(); st.Paths["passfd"] != 2 || st.Paths["relay"] != 2 {
		t.Errorf("paths %v, want 2 passfd and 2 relay", st.Paths)
	}
}

// TestPassFDHybridLoadRules checks the connection and CPU rules: with more
// client connections open than the limit, or the sampled front CPU above
// its threshold, small objects are handed off too.
func TestPassFDHybridLoadRules(t *testing.T) {
	cfg := Config{Hybrid: HybridConfig{CPUPercent: 30, ActiveConns: 1, MinSize: -1, SampleEvery: time.Hour}}
	cfg.Choose = Hybrid(PassFD(PassFDConfig{}))
	addr, s, _, _, _, _ := passfdCluster(t, "wrr", 1, cfg)
	get := func(c net.Conn) {
		t.Helper()
		fmt.Fprintf(c, "GET /f0-0.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a := dial()
	get(a) // one connection open: relay
	if h := s.Stats().Handoff; h.HybridRelay != 1 || h.HybridConns != 0 {
		t.Fatalf("one connection: %+v, want one relay", h)
	}
	b := dial()
	get(b) // two open, limit 1: hand off
	if h := waitPassed(s, 1); h.HybridConns != 1 || h.Passed != 1 {
		t.Fatalf("two connections: %+v, want one handoff for connections", h)
	}
	// Connection b left the front; a is alone again (once b's goroutine
	// has finished: the node may answer before it has). Pretend the
	// sampler saw the front busy.
	for deadline := time.Now().Add(5 * time.Second); s.Stats().ConnsActive > 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still active, want 1", s.Stats().ConnsActive)
		}
		time.Sleep(time.Millisecond)
	}
	s.ctr.cpuBits.Store(math.Float64bits(55))
	get(a)
	if h := waitPassed(s, 2); h.HybridCPU != 1 || h.Passed != 2 || h.FrontCPUPercent != 55 {
		t.Fatalf("busy front: %+v, want one handoff for CPU", h)
	}
}

// waitPassed returns the handoff counters once n passes are counted (or
// after 5 s): the front counts a pass when sendmsg returns, and the node
// may have answered the client before that.
func waitPassed(s *Server, n uint64) HandoffStats {
	return waitHandoff(s, func(h HandoffStats) bool { return h.Passed >= n })
}

// waitHandoff returns the handoff counters once done holds for them, or
// after 5 s (the caller's check then reports what they are).
func waitHandoff(s *Server, done func(HandoffStats) bool) HandoffStats {
	h := s.Stats().Handoff
	for deadline := time.Now().Add(5 * time.Second); !done(h) && time.Now().Before(deadline); h = s.Stats().Handoff {
		time.Sleep(time.Millisecond)
	}
	return h
}

// TestPassFDNodeDies: a node process that dies after taking a connection
// leaves the client with a reset or EOF (not a hang), and the front marks
// the node down within one health interval.
func TestPassFDNodeDies(t *testing.T) {
	if os.Getenv("SHOAL_TEST_DYING_NODE") != "" {
		t.Skip("helper process")
	}
	for _, pol := range []string{"wrr", "lard"} {
		t.Run(pol, func(t *testing.T) { passfdNodeDies(t, pol) })
	}
}

// passfdNodeDies runs TestPassFDNodeDies under one policy: with lard the
// connection was handed off with a return request, and the front must also
// forget it (Handoff.Lost) when the node's socket breaks.
func passfdNodeDies(t *testing.T, pol string) {
	dir, err := os.MkdirTemp("", "shoal-die-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPassFDHelperNode$")
	cmd.Env = append(os.Environ(), "SHOAL_TEST_DYING_NODE="+dir)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "http://") {
		t.Fatalf("helper said %q", lines.Text())
	}
	nodeURL := lines.Text()
	p, _ := policy.New(pol, policy.Config{})
	cl, err := control.New(p, []control.NodeSpec{{URL: nodeURL}}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const interval = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Check(ctx, control.CheckConfig{Interval: interval, Rise: 1, Fall: 1})
	for st := cl.Backends()[0].LastStatus(); st == nil || st.HandoffSocket == ""; st = cl.Backends()[0].LastStatus() {
		time.Sleep(10 * time.Millisecond)
	}
	s, err := New(cl, Config{Path: PassFD(PassFDConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go s.Serve(ln)
	defer s.Close()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
	if !lines.Scan() || lines.Text() != "took" {
		t.Fatalf("helper said %q, want took", lines.Text())
	}
	killed := time.Now()
	cmd.Process.Kill()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 100))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("client hung after the node died")
	}
	if n != 0 || err == nil {
		t.Fatalf("client read %d bytes, %v; want EOF or reset", n, err)
	}
	t.Logf("client saw %v after %v", err, time.Since(killed))
	for cl.Nodes()[0].Up {
		if time.Since(killed) > 2*interval+2*time.Second {
			t.Fatal("node not marked down")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("node marked down %v after it died (health interval %v)", time.Since(killed), interval)
	want := uint64(0)
	if pol == "lard" {
		want = 1
	}
	for s.Stats().Handoff.Lost != want {
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("handoff %+v: want %d lost connection(s)", s.Stats().Handoff, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(killed); d > interval+interval/2+100*time.Millisecond {
		t.Logf("note: down after %v, more than one interval (loaded machine?)", d)
	}
}

// TestPassFDHelperNode is the dying node of TestPassFDNodeDies when run as a
// helper process: it serves its status on TCP, takes handed-off
// connections, says "took" and waits to be killed.
func TestPassFDHelperNode(t *testing.T) {
	dir := os.Getenv("SHOAL_TEST_DYING_NODE")
	if dir == "" {
		t.Skip("only as a helper process")
	}
	sock := filepath.Join(dir, "n.sock")
	hl, err := handoff.ListenFD(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := node.New(node.Config{Root: dir, HandoffSocket: sock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	fmt.Printf("http://%s\n", ln.Addr())
	var held []net.Conn
	defer func() { runtime.KeepAlive(held) }() // unreferenced, they would be closed by the collector
	for {
		c, err := hl.Accept()
		if err != nil {
			return
		}
		held = append(held, c) // never answered
		fmt.Println("took")
	}
}
