package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawServer is a hand-rolled HTTP/1.1 server on loopback whose handler
// writes whatever bytes it likes, so tests can make it misbehave on purpose.
type rawServer struct {
	ln     net.Listener
	handle func(n int, path string, hdr string, c *net.TCPConn) (keep bool)
	mu     sync.Mutex
	paths  []string
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func newRawServer(t *testing.T, handle func(n int, path, hdr string, c *net.TCPConn) bool) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, handle: handle, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go s.serve(c.(*net.TCPConn))
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *rawServer) serve(c *net.TCPConn) {
	defer s.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return
		}
		var hdr strings.Builder
		for {
			h, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if h == "\r\n" {
				break
			}
			hdr.WriteString(h)
		}
		s.mu.Lock()
		s.paths = append(s.paths, f[1])
		s.mu.Unlock()
		if !s.handle(n, f[1], hdr.String(), c) {
			return
		}
	}
}

func (s *rawServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.paths)
}

func ok(c net.Conn, body string) bool {
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return true
}

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestTraceReplayOrder(t *testing.T) {
	lines := []string{
		`a.example - - [01/Jul/1995:00:00:01 -0400] "GET /history/apollo/ HTTP/1.0" 200 6245`,
		`b.example - - [01/Jul/1995:00:00:06 -0400] "GET /shuttle/countdown/ HTTP/1.0" 200 3985`,
		`c.example - - [01/Jul/1995:00:00:09 -0400] "POST /cgi-bin/form HTTP/1.0" 200 12`,
		`d.example - - [01/Jul/1995:00:00:11 -0400] "GET /images/NASA-logosmall.gif HTTP/1.0" 304 0`,
		`a.example - - [01/Jul/1995:00:00:12 -0400] "GET /history/apollo/ HTTP/1.0" 200 6245`,
		`e.example - - [01/Jul/1995:00:00:13 -0400] "HEAD /shuttle/missions/sts-73/ HTTP/1.0" 200 -`,
		`f.example - - [01/Jul/1995:00:00:14 -0400] "GET /q?x=1 HTTP/1.0" 404 -`,
	}
	want := []string{"/history/apollo/", "/shuttle/countdown/", "/images/NASA-logosmall.gif",
		"/history/apollo/", "/shuttle/missions/sts-73/", "/q?x=1"}
	path := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := LoadTrace(path, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(list, List(want)) {
		t.Fatalf("LoadTrace = %q\nwant %q", list, want)
	}
	if l, _ := LoadTrace(path, "/mirror/", 2); !slices.Equal(l, List{"/mirror/history/apollo/", "/mirror/shuttle/countdown/"}) {
		t.Fatalf("prefix and limit: %q", l)
	}

	for _, conns := range []int{1, 3} {
		srv := newRawServer(t, func(_ int, _, _ string, c *net.TCPConn) bool { return ok(c, "x") })
		res := run(t, Config{URL: srv.url(), Workload: list, Connections: conns})
		got := srv.seen()
		if res.Requests != uint64(len(want)) || res.OK != uint64(len(want)) {
			t.Errorf("%d conns: %d requests %d ok, want %d", conns, res.Requests, res.OK, len(want))
		}
		if conns == 1 {
			if !slices.Equal(got, want) { // one connection: exactly trace order
				t.Errorf("1 conn: server saw %q\nwant %q", got, want)
			}
			continue
		}
		slices.Sort(got) // several connections: same multiset
		w := slices.Clone(want)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("%d conns: server saw %q, want %q", conns, got, w)
		}
	}
}

func TestOpenLoopCountsFromIntendedTime(t *testing.T) {
	const stall = 300 * time.Millisecond
	srv := newRawServer(t, func(n int, _, _ string, c *net.TCPConn) bool {
		if n == 0 {
			time.Sleep(stall)
		}
		return ok(c, "x")
	})
	// 10 requests due every 10 ms on one connection. Request i (due at
	// t0+10i ms) cannot be answered before the stalled first one, which
	// ends ≥ t0+300 ms, so measured from its intended time each latency is
	// at least 300-90 = 210 ms. A generator that measured from the actual
	// send (coordinated omission) would report ~0 for requests 1…9.
	res := run(t, Config{URL: srv.url(), Rate: 100, Requests: 10, Connections: 1})
	if res.Requests != 10 {
		t.Fatalf("requests %d, want 10", res.Requests)
	}
	if min := res.Latency.Min(); min < stall-90*time.Millisecond {
		t.Errorf("smallest latency %v: queued requests must count from their intended send time (≥ %v)", min, stall-90*time.Millisecond)
	}
	if max := res.Latency.Max(); max < stall {
		t.Errorf("largest latency %v < stall %v", max, stall)
	}
}

// errorServer answers each path with a way of failing (or not).
func errorServer(t *testing.T) *rawServer {
	return newRawServer(t, func(_ int, path, _ string, c *net.TCPConn) bool {
		switch path {
		case "/ok":
			return ok(c, "fine")
		case "/404":
			io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
			return true
		case "/500":
			io.WriteString(c, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 3\r\n\r\nbad")
			return true
		case "/reset":
			c.SetLinger(0) // close sends RST
			return false
		case "/close":
			return false
		case "/short":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
			return false
		case "/short-chunked":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc")
			return false
		case "/stall":
			io.Copy(io.Discard, c) // until the client gives up
			return false
		case "/garbage":
			io.WriteString(c, "\x00\x01garbage\r\n\r\n")
			return true
		}
		return false
	})
}

// deadURL is an address nobody listens on, for connect errors.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String() + "/"
}

func TestErrorClassification(t *testing.T) {
	srv, dead := errorServer(t), deadURL(t)
	cases := []struct {
		url      string
		kind     ErrorKind // NumErrorKinds = no error
		requests uint64
	}{
		{srv.url() + "/ok", NumErrorKinds, 1},
		{srv.url() + "/404", ErrStatus4xx, 1},
		{srv.url() + "/500", ErrStatus5xx, 1},
		{srv.url() + "/reset", ErrReset, 0},
		{srv.url() + "/close", ErrReset, 0},
		{srv.url() + "/short", ErrShortBody, 0},
		{srv.url() + "/short-chunked", ErrShortBody, 0},
		{srv.url() + "/stall", ErrTimeout, 0},
		{srv.url() + "/garbage", ErrProtocol, 0},
		{dead, ErrConnect, 0},
	}
	for _, c := range cases {
		res := run(t, Config{URL: c.url, Requests: 1, Timeout: 200 * time.Millisecond})
		var want [NumErrorKinds]uint64
		if c.kind != NumErrorKinds {
			want[c.kind] = 1
		}
		if res.Errors != want || res.Requests != c.requests {
			t.Errorf("%s: errors %v requests %d, want %v requests %d", c.url, res.Errors, res.Requests, want, c.requests)
		}
	}
}

func TestKeepAliveAndConnectionClose(t *testing.T) {
	var mu sync.Mutex
	var closeHeaders int
	srv := newRawServer(t, func(n int, _, hdr string, c *net.TCPConn) bool {
		if strings.Contains(strings.ToLower(hdr), "connection: close") {
			mu.Lock()
			closeHeaders++
			mu.Unlock()
		}
		if n == 2 { // the third response on each connection ends it
			io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx")
			return false
		}
		return ok(c, "x")
	})
	res := run(t, Config{URL: srv.url(), Requests: 10})
	if res.Requests != 10 || res.Errors != [NumErrorKinds]uint64{} || res.Connects != 4 {
		t.Errorf("keep-alive: requests %d errors %v connects %d, want 10, none, 4", res.Requests, res.Errors, res.Connects)
	}
	if res.WireBytes != 10*int64(len("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"))+3*int64(len("Connection: close\r\n")) ||
		res.BodyBytes != 10 {
		t.Errorf("bytes: wire %d body %d", res.WireBytes, res.BodyBytes)
	}

	// Read under mu: the client's raw system calls (plainConn) are no
	// synchronisation the race detector sees, as net.Conn's are.
	closes := func() int { mu.Lock(); defer mu.Unlock(); return closeHeaders }
	res = run(t, Config{URL: srv.url(), Requests: 5, DisableKeepAlive: true})
	if res.Requests != 5 || res.Connects != 5 || closes() != 5 {
		t.Errorf("no keep-alive: requests %d connects %d close headers %d, want 5 5 5", res.Requests, res.Connects, closes())
	}

	// Two requests per connection, the server ending every third: 9
	// requests take 5 connections and send no close header.
	res = run(t, Config{URL: srv.url(), Requests: 9, ConnRequests: 2})
	if res.Requests != 9 || res.Connects != 5 || res.Errors != [NumErrorKinds]uint64{} || closes() != 5 {
		t.Errorf("2 per connection: requests %d connects %d errors %v close headers %d, want 9 5 none 5", res.Requests,
			res.Connects, res.Errors, closes())
	}
}

// A time-bounded run against a server that never answers must end at its
// deadline and not count the requests it interrupted as errors.
func TestDurationStopsStalledRun(t *testing.T) {
	srv := newRawServer(t, func(_ int, _, _ string, c *net.TCPConn) bool {
		io.Copy(io.Discard, c)
		return false
	})
	res := run(t, Config{URL: srv.url() + "/", Connections: 4, Duration: 100 * time.Millisecond, Timeout: time.Minute})
	if res.Requests != 0 || res.Errors != [NumErrorKinds]uint64{} {
		t.Errorf("requests %d errors %v, want none", res.Requests, res.Errors)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{URL: "ftp://127.0.0.1/"},
		{URL: "http:///x"},
		{URL: "http://127.0.0.1/", Rate: -1},
		{URL: "http://127.0.0.1/", Method: "POST"},
		{URL: "::"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	r, err := New(Config{URL: "http://example.com/a?b=1"})
	if err != nil || r.addr != "example.com:80" || r.cfg.Workload.Target(0) != "/a?b=1" || r.cfg.Duration != defaultDuration {
		t.Errorf("defaults: %v %q %q %v", err, r.addr, r.cfg.Workload.Target(0), r.cfg.Duration)
	}
}

func TestZipf(t *testing.T) {
	names := []string{"/a", "/b", "/c", "/d"}
	z, err := NewZipf(1, names, 7)
	if err != nil {
		t.Fatal(err)
	}
	// P(k) = (1/k)/H4 with H4 = 25/12: 0.48, 0.24, 0.16, 0.12.
	want := []float64{0.48, 0.24, 0.16, 0.12}
	var got [4]int
	const n = 200000
	for i := uint64(0); i < n; i++ {
		got[z.Rank(i)]++
	}
	for k := range want {
		if p := float64(got[k]) / n; math.Abs(p-want[k]) > 0.005 {
			t.Errorf("rank %d: frequency %.4f, want %.2f", k+1, p, want[k])
		}
	}
	z2, _ := NewZipf(1, names, 7)
	for i := uint64(0); i < 100; i++ {
		if z.Target(i) != z2.Target(i) {
			t.Fatal("Zipf draws must be a pure function of (seed, i)")
		}
	}
	if u, _ := NewZipf(0, names, 1); u.Rank(12345) < 0 { // α = 0 is uniform and allowed
		t.Fatal("alpha 0")
	}
	for _, a := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := NewZipf(a, names, 1); err == nil {
			t.Errorf("alpha %v accepted", a)
		}
	}
	if _, err := NewZipf(1, nil, 1); err == nil {
		t.Error("empty names accepted")
	}
}

func TestNames(t *testing.T) {
	got, err := PatternNames("/site/", "", 3)
	if err != nil || !slices.Equal(got, []string{"/site/f00001", "/site/f00002", "/site/f00003"}) {
		t.Errorf("PatternNames = %q, %v", got, err)
	}
	for _, p := range []string{"/static", "/%d/%d", "/%%", "/%s"} {
		if _, err := PatternNames("", p, 3); err == nil {
			t.Errorf("pattern %q accepted", p)
		}
	}
	idx := filepath.Join(t.TempDir(), "index")
	os.WriteFile(idx, []byte("# most popular first\n/index.html\n\n/img/a b.gif\nrelative\n/ü\n"+
		"# shoal sample site, format 1\nconfig seed=1\n1234 /docs/d1.html\n"), 0o644)
	got, err = ReadIndex(idx, "/p")
	if err != nil || !slices.Equal(got, []string{"/p/index.html", "/p/img/a%20b.gif", "/p/%C3%BC", "/p/docs/d1.html"}) {
		t.Errorf("ReadIndex = %q, %v", got, err)
	}
}

// trivialServer answers every request on a connection with a fixed 1 KB
// response, handling pipelined requests; it is the in-process peer for the
// client-cost benchmark.
func trivialServer(b testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n" + strings.Repeat("x", 1024))
	var wg sync.WaitGroup
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 4096)
				pending := 0
				for {
					n, err := c.Read(buf[pending:])
					if err != nil {
						return
					}
					data := buf[:pending+n]
					for {
						i := bytes.Index(data, []byte("\r\n\r\n"))
						if i < 0 {
							break
						}
						data = data[i+4:]
						if _, err := c.Write(resp); err != nil {
							return
						}
					}
					pending = copy(buf, data)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/f"
}

// BenchmarkClientRequest is the per-request cost of the client (write,
// read, parse a 1 KB response, record latency) plus the in-process server's,
// over 1 and 64 keep-alive connections. Client and server share the CPUs, so
// this is an upper bound on the client's own cost; allocs/op must stay 0.
func BenchmarkClientRequest(b *testing.B) {
	for _, conns := range []int{1, 64} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			url := trivialServer(b)
			r, err := New(Config{URL: url, Requests: uint64(b.N), Connections: conns})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			res, err := r.Run(context.Background())
			if err != nil || res.Requests != uint64(b.N) {
				b.Fatalf("%v: %d of %d requests, errors %v", err, res.Requests, b.N, res.Errors)
			}
		})
	}
}

// An open-loop run that the server cannot keep up with reports the
// requests it left queued instead of silently dropping them.
func TestOpenLoopBacklog(t *testing.T) {
	srv := newRawServer(t, func(_ int, _, _ string, c *net.TCPConn) bool {
		io.Copy(io.Discard, c) // never answers
		return false
	})
	res := run(t, Config{URL: srv.url() + "/", Rate: 100, Duration: 200 * time.Millisecond})
	// At least ceil(0.2 s × 100/s) = 20 requests were due; the only
	// connection is stuck on the first, so ≥ 19 were never sent.
	if res.Requests != 0 || res.Backlog < 19 {
		t.Errorf("requests %d backlog %d, want 0 and ≥ 19", res.Requests, res.Backlog)
	}
}

func TestSummaryJSON(t *testing.T) {
	var r Result
	r.Requests, r.OK, r.Duration, r.WireBytes, r.CPU = 10, 9, 2*time.Second, 4000, 1500*time.Millisecond
	r.Errors[ErrStatus5xx] = 1
	r.Latency.Record(time.Millisecond)
	b, err := json.Marshal(Summarize(Config{URL: "http://x/", Connections: 2}, &r))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"requests", "duration_s", "rps", "bytes_per_sec", "latency_ms", "errors"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing from %s", k, b)
		}
	}
	if m["cpu_s"] != 1.5 {
		t.Errorf("cpu_s %v, want 1.5", m["cpu_s"])
	}
	lat := m["latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "p999", "max"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("latency_ms.%s missing", k)
		}
	}
	if m["rps"].(float64) != 5 || m["bytes_per_sec"].(float64) != 2000 || m["errors"].(map[string]any)["status_5xx"].(float64) != 1 ||
		lat["max"].(float64) != 1 {
		t.Errorf("values wrong: %s", b)
	}
}

// Cancelling the context ends a run early; what was done is reported and
// the requests it interrupted are not errors.
func TestRunCancel(t *testing.T) {
	srv := newRawServer(t, func(n int, _, _ string, c *net.TCPConn) bool {
		if n < 3 {
			return ok(c, "x")
		}
		io.Copy(io.Discard, c) // the 4th request on each connection hangs
		return false
	})
	r, err := New(Config{URL: srv.url() + "/", Connections: 2, Duration: time.Hour, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for r.Completed() < 6 { // wait until both connections are stuck
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	res, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 6 || res.Errors != [NumErrorKinds]uint64{} {
		t.Errorf("requests %d errors %v, want 6 and none", res.Requests, res.Errors)
	}
	if _, err := r.Run(context.Background()); err == nil {
		t.Error("a Runner must refuse to run twice")
	}
}
