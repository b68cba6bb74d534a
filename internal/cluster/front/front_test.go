package front

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/testutil"
)

func TestKeepAliveRoutesEachRequest(t *testing.T) {
	a, b := namedBackend(t, "A"), namedBackend(t, "B")
	addr, s, _ := startFront(t, Config{}, a.URL, b.URL)
	c := dialFront(t, addr)
	want := []string{"A /1", "B /2", "A /3", "B /4", "A /5"}
	for i, w := range want {
		resp, body := c.do(get(fmt.Sprintf("/%d", i+1)))
		if resp.StatusCode != 200 || body != w {
			t.Fatalf("request %d: %d %q, want 200 %q", i+1, resp.StatusCode, body, w)
		}
	}
	st := s.Stats()
	if st.Requests != 5 || st.ConnsAccepted != 1 || st.Paths["relay"] != 5 || st.Status[2] != 5 {
		t.Fatalf("stats %+v", st)
	}
	// Two node connections, reused: one per node.
	if st.NodeDials != 2 {
		t.Fatalf("node dials %d, want 2 (pooled keep-alive)", st.NodeDials)
	}
}

func TestHopByHopAndXFF(t *testing.T) {
	a := namedBackend(t, "A")
	addr, _, _ := startFront(t, Config{}, a.URL)
	c := dialFront(t, addr)
	resp, _ := c.do("GET /h HTTP/1.1\r\nHost: x\r\nConnection: X-Secret, keep-alive\r\nX-Secret: 1\r\n" +
		"Keep-Alive: timeout=5\r\nProxy-Authorization: Basic eA==\r\nTE: trailers\r\nUpgrade: h2c\r\n" +
		"Trailer: X-T\r\nX-Forwarded-For: 10.0.0.1\r\nX-Keep: yes\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, h := range []string{"Connection", "X-Secret", "Keep-Alive", "Proxy-Authorization", "Te", "Upgrade", "Trailer"} {
		if v := resp.Header.Get("X-Seen-" + h); v != "" {
			t.Errorf("node saw hop-by-hop %s: %q", h, v)
		}
	}
	if v := resp.Header.Get("X-Seen-X-Keep"); v != "yes" {
		t.Errorf("end-to-end header lost: %q", v)
	}
	if v := resp.Header.Get("X-Seen-X-Forwarded-For"); v != "10.0.0.1, 127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q", v)
	}
	// Without a client XFF the front adds one.
	resp, _ = c.do(get("/h2"))
	if v := resp.Header.Get("X-Seen-X-Forwarded-For"); v != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q", v)
	}
}

func TestResponseHopByHopRemoved(t *testing.T) {
	node := reqBackend(t, func(c net.Conn, req *http.Request) bool {
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=9\r\n"+
			"Proxy-Authenticate: Basic\r\nUpgrade: h2c\r\nX-End: 2\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	addr, _, _ := startFront(t, Config{}, node)
	c := dialFront(t, addr)
	resp, body := c.do(get("/"))
	if body != "ok" || resp.Header.Get("X-End") != "2" {
		t.Fatalf("body %q headers %v", body, resp.Header)
	}
	for _, h := range []string{"X-Hop", "Keep-Alive", "Proxy-Authenticate", "Upgrade", "Connection"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("client saw hop-by-hop %s: %q", h, v)
		}
	}
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func TestStreamingBodies(t *testing.T) {
	const size = 10 << 20
	data := testutil.Pattern(size)
	want := sum(data)
	ts := namedBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		w.Header().Set("X-Req-Sum", hex.EncodeToString(h.Sum(nil)))
		w.Header().Set("X-Req-Len", fmt.Sprint(n))
		if r.URL.Path == "/cl" {
			w.Header().Set("Content-Length", fmt.Sprint(size))
		}
		for off := 0; off < size; off += 100_000 {
			end := min(off+100_000, size)
			w.Write(data[off:end])
		}
	})
	addr, s, _ := startFront(t, Config{}, ts.URL)
	for _, tc := range []struct {
		name, path string
		chunkedReq bool
	}{
		{"chunked both ways", "/chunked", true},
		{"content-length both ways", "/cl", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFront(t, addr)
			var head string
			if tc.chunkedReq {
				head = "POST " + tc.path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
			} else {
				head = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", tc.path, size)
			}
			go func() {
				io.WriteString(c.c, head)
				for off := 0; off < size; off += 77_777 {
					end := min(off+77_777, size)
					if tc.chunkedReq {
						fmt.Fprintf(c.c, "%x;ext=1\r\n", end-off)
					}
					c.c.Write(data[off:end])
					if tc.chunkedReq {
						io.WriteString(c.c, "\r\n")
					}
				}
				if tc.chunkedReq {
					io.WriteString(c.c, "0\r\nX-Trailer: t\r\n\r\n")
				}
			}()
			resp, body := c.read("POST")
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if got := resp.Header.Get("X-Req-Len"); got != fmt.Sprint(size) {
				t.Fatalf("node got %s request bytes, want %d", got, size)
			}
			if got := resp.Header.Get("X-Req-Sum"); got != want {
				t.Fatalf("request body checksum differs")
			}
			if len(body) != size || sum([]byte(body)) != want {
				t.Fatalf("response body: %d bytes, checksum ok=%v", len(body), sum([]byte(body)) == want)
			}
			chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
			if chunked != (tc.path == "/chunked") {
				t.Fatalf("transfer encoding %v", resp.TransferEncoding)
			}
			// The connection stays usable.
			if resp, _ := c.do("GET /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"); resp.StatusCode != 200 {
				t.Fatalf("follow-up status %d", resp.StatusCode)
			}
		})
	}
	if st := s.Stats(); st.BytesIn < 2*size || st.BytesOut < 3*size {
		t.Fatalf("byte counters in %d out %d", st.BytesIn, st.BytesOut)
	}
}

func TestChunkedToHTTP10Client(t *testing.T) {
	ts := namedBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello "))
		w.(http.Flusher).Flush()
		w.Write([]byte("world"))
	})
	addr, _, _ := startFront(t, Config{}, ts.URL)
	c := dialFront(t, addr)
	io.WriteString(c.c, "GET / HTTP/1.0\r\n\r\n")
	all, err := io.ReadAll(c.c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(all)
	if !strings.HasSuffix(s, "\r\n\r\nhello world") || strings.Contains(strings.ToLower(s), "transfer-encoding") ||
		!strings.Contains(s, "Connection: close") {
		t.Fatalf("HTTP/1.0 answer:\n%s", s)
	}
}

func namedBackendFunc(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

func contextWithTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestRefusals(t *testing.T) {
	a := namedBackend(t, "A")
	addr, s, _ := startFront(t, Config{MaxHeadBytes: 1024}, a.URL)
	cases := []struct {
		name, raw string
		status    int
	}{
		{"CL and TE", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		{"duplicate CL", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n", 400},
		{"bare LF", "GET / HTTP/1.1\nHost: x\n\n", 400},
		{"bare LF in header", "GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", 400},
		{"oversized head", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2000) + "\r\n\r\n", 431},
		{"unknown coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFront(t, addr)
			resp, _ := c.do(tc.raw)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if !resp.Close {
				t.Errorf("refusal without Connection: close")
			}
			if !c.closed() {
				t.Errorf("connection left open after refusal")
			}
		})
	}
	if st := s.Stats(); st.Sent4xx != uint64(len(cases)-1) || st.Sent5xx != 1 || st.Paths["relay"] != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSlowlorisCut(t *testing.T) {
	a := namedBackend(t, "A")
	addr, _, _ := startFront(t, Config{HeaderTimeout: 300 * time.Millisecond}, a.URL)
	c := dialFront(t, addr)
	// A head begun and never finished: one byte at a time, slowly.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, b := range []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ") {
			if _, err := c.c.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		for {
			if _, err := c.c.Write([]byte("a")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("want a 408 before the close: %v", err)
	}
	if resp.StatusCode != 408 {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	io.ReadAll(resp.Body)
	if !c.closed() {
		t.Fatal("slow client not cut")
	}
	c.c.Close()
	<-done

	// A connection that sends nothing is closed silently.
	c2 := dialFront(t, addr)
	if !c2.closed() {
		t.Fatal("silent client not cut")
	}
}

// resetBackend reads a request head and resets the connection without
// answering: a node dying mid-request.
func resetBackend(t testing.TB, hits *atomic.Int64) string {
	return rawBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		hits.Add(1)
		c.(*net.TCPConn).SetLinger(0)
	})
}

// badThenGood starts two nodes: bad resets every connection after reading
// its request (hits counts them), good answers as "G".
func badThenGood(t *testing.T) (bad, good string, hits *atomic.Int64) {
	hits = new(atomic.Int64)
	return resetBackend(t, hits), namedBackend(t, "G").URL, hits
}

func TestRetryOnceOnReset(t *testing.T) {
	bad, good, hits := badThenGood(t)
	addr, s, cl := startFront(t, Config{}, bad, good)
	resp, body := dialFront(t, addr).do(get("/x"))
	if resp.StatusCode != 200 || body != "G /x" {
		t.Fatalf("got %d %q, want the retry on G", resp.StatusCode, body)
	}
	if hits.Load() != 1 {
		t.Fatalf("bad node hit %d times", hits.Load())
	}
	st := s.Stats()
	if st.Retries != 1 {
		t.Fatalf("retries %d, want 1", st.Retries)
	}
	if n := cl.Nodes(); n[0].Up || n[0].Failures != 1 {
		t.Fatalf("failed node not marked down: %+v", n[0])
	}
}

func TestNoRetryForPOST(t *testing.T) {
	bad, good, _ := badThenGood(t)
	addr, s, _ := startFront(t, Config{}, bad, good)
	resp, _ := dialFront(t, addr).do("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
	if resp.StatusCode != 502 {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	if st := s.Stats(); st.Retries != 0 || st.Sent5xx != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Bodiless POST: still not retried (not idempotent).
	addr2, s2, _ := startFront(t, Config{}, bad, good)
	c2 := dialFront(t, addr2)
	resp, _ = c2.do("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
	if resp.StatusCode != 502 || s2.Stats().Retries != 0 {
		t.Fatalf("bodiless POST: status %d retries %d", resp.StatusCode, s2.Stats().Retries)
	}
}

func TestStalePooledConnRedialed(t *testing.T) {
	// The node answers one request per connection but claims keep-alive,
	// then closes: the pooled connection is stale on the next request.
	node := rawBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	addr, s, _ := startFront(t, Config{}, node)
	c := dialFront(t, addr)
	for i := 0; i < 3; i++ {
		if resp, body := c.do(get("/")); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond) // let the node's FIN arrive
	}
	if st := s.Stats(); st.Retries != 0 || st.FreshRedials != 2 {
		t.Fatalf("retries %d fresh redials %d, want 0 and 2", st.Retries, st.FreshRedials)
	}
}

func TestAllWeightsZero503(t *testing.T) {
	a, b := namedBackend(t, "A"), namedBackend(t, "B")
	addr, s, cl := startFront(t, Config{}, a.URL, b.URL)
	cl.SetWeight(0, 0)
	cl.SetWeight(1, 0)
	c := dialFront(t, addr)
	resp, _ := c.do(get("/"))
	if resp.StatusCode != 503 {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	// The connection survives a 503 for a bodiless request.
	cl.SetWeight(1, 1)
	if resp, body := c.do(get("/y")); resp.StatusCode != 200 || body != "B /y" {
		t.Fatalf("after undrain: %d %q", resp.StatusCode, body)
	}
	if st := s.Stats(); st.Sent5xx != 1 {
		t.Fatalf("5xx %d", st.Sent5xx)
	}
}

func TestQueueAtMaxConn(t *testing.T) {
	var active, peak atomic.Int64
	release := make(chan struct{})
	ts := namedBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		n := active.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if r.URL.Path == "/block" {
			<-release
		}
		active.Add(-1)
		io.WriteString(w, "done")
	})
	addr, s, _ := startFront(t, Config{MaxConn: 2, QueueLen: 3, QueueTimeout: 10 * time.Second}, ts.URL)
	const n = 5
	var wg sync.WaitGroup
	results := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := dialFront(t, addr)
			resp, body := c.do(get("/block"))
			if body == "done" {
				results[i] = resp.StatusCode
			}
		}(i)
	}
	// Wait until two are at the node and three queued, then one more
	// request finds the queue full.
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Queued < 3 && time.Now().Before(deadline) {
		// Queued counts on dequeue; watch the limiter instead.
		u := s.upstream(s.cl.Backends()[0])
		u.lim.mu.Lock()
		q := len(u.lim.waiters)
		u.lim.mu.Unlock()
		if q == 3 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := dialFront(t, addr)
	if resp, _ := c.do(get("/fast")); resp.StatusCode != 503 {
		t.Fatalf("request beyond the queue: status %d, want 503", resp.StatusCode)
	}
	close(release)
	wg.Wait()
	for i, st := range results {
		if st != 200 {
			t.Fatalf("queued request %d: status %d", i, st)
		}
	}
	st := s.Stats()
	if peak.Load() != 2 || st.Queued != 3 || st.QueueFull != 1 {
		t.Fatalf("peak at node %d (want 2), queued %d (want 3), queue full %d (want 1)", peak.Load(), st.Queued, st.QueueFull)
	}
}

func TestQueueTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ts := namedBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-release
		}
	})
	addr, s, _ := startFront(t, Config{MaxConn: 1, QueueTimeout: 100 * time.Millisecond}, ts.URL)
	go func() {
		c := dialFront(t, addr)
		io.WriteString(c.c, get("/block"))
	}()
	for s.cl.Backends()[0].InFlight.Load() == 0 {
		time.Sleep(2 * time.Millisecond)
	}
	c := dialFront(t, addr)
	if resp, _ := c.do(get("/x")); resp.StatusCode != 503 {
		t.Fatalf("status %d, want 503 after the queue timeout", resp.StatusCode)
	}
	if st := s.Stats(); st.QueueTimeouts != 1 {
		t.Fatalf("queue timeouts %d", st.QueueTimeouts)
	}
}

func TestRedirectPath(t *testing.T) {
	a := namedBackend(t, "A")
	addr, s, _ := startFront(t, Config{Path: Redirect()}, a.URL)
	c := dialFront(t, addr)
	resp, _ := c.do(get("/a/b?q=1"))
	if resp.StatusCode != 302 || resp.Header.Get("Location") != a.URL+"/a/b?q=1" {
		t.Fatalf("%d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := c.do(get("/again")); resp.StatusCode != 302 {
		t.Fatalf("keep-alive after redirect: %d", resp.StatusCode)
	}
	if st := s.Stats(); st.Paths["redirect"] != 2 {
		t.Fatalf("paths %v", st.Paths)
	}
}

func TestPipelinedRequests(t *testing.T) {
	a, b := namedBackend(t, "A"), namedBackend(t, "B")
	addr, _, _ := startFront(t, Config{}, a.URL, b.URL)
	c := dialFront(t, addr)
	io.WriteString(c.c, get("/1")+"POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody"+get("/3"))
	for _, w := range []string{"A /1", "B /2", "A /3"} {
		if _, body := c.read("GET"); body != w {
			t.Fatalf("got %q want %q", body, w)
		}
	}
}

func TestObserver(t *testing.T) {
	a := namedBackend(t, "A")
	var obs recorder
	addr, _, _ := startFront(t, Config{Observer: &obs}, a.URL)
	c := dialFront(t, addr)
	c.do(get("/o"))
	// Observe runs after the response is written: the client can read it
	// first.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		obs.mu.Lock()
		n := len(obs.got)
		obs.mu.Unlock()
		if n > 0 {
			break
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.got) != 1 || obs.got[0].Node != 0 || obs.got[0].Status != 200 || obs.got[0].Path != "relay" || obs.got[0].NodeURL != a.URL {
		t.Fatalf("observations %+v", obs.got)
	}
}

type recorder struct {
	mu  sync.Mutex
	got []Observation
}

func (r *recorder) Observe(o Observation) { r.mu.Lock(); r.got = append(r.got, o); r.mu.Unlock() }

func TestShutdownGraceful(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	ts := namedBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "fine")
	})
	addr, s, _ := startFront(t, Config{}, ts.URL)
	idle := dialFront(t, addr)
	if resp, _ := idle.do(get("/")); resp.StatusCode != 200 {
		t.Fatal("warm-up failed")
	}
	busy := dialFront(t, addr)
	io.WriteString(busy.c, get("/slow"))
	// Wait until the node holds the request. (Waiting for the node's
	// in-flight count raced: the warm-up's Done may come after its client
	// already has the answer, and a connection still reading its head
	// counts as idle, so Shutdown closed it.)
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(contextWithTimeout(t, 10*time.Second)) }()
	if !idle.closed() {
		t.Fatal("idle connection not closed by Shutdown")
	}
	close(release)
	resp, body := busy.read("GET")
	if resp.StatusCode != 200 || body != "fine" || !resp.Close {
		t.Fatalf("in-flight request: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("listener still accepting after Shutdown")
	}
}

func TestExpectContinueAnsweredByFront(t *testing.T) {
	a := namedBackend(t, "A")
	addr, _, _ := startFront(t, Config{}, a.URL)
	c := dialFront(t, addr)
	io.WriteString(c.c, "PUT /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	// The client sends its body only after the interim answer.
	interim, err := http.ReadResponse(c.br, nil)
	if err != nil || interim.StatusCode != 100 {
		t.Fatalf("interim: %v %v", interim, err)
	}
	io.WriteString(c.c, "hello")
	resp, body := c.read("PUT")
	if resp.StatusCode != 200 || body != "A /up" || resp.Header.Get("X-Seen-Expect") != "" {
		t.Fatalf("%d %q, node saw Expect %q", resp.StatusCode, body, resp.Header.Get("X-Seen-Expect"))
	}
}

func TestHEADAndHTTP10KeepAlive(t *testing.T) {
	a := namedBackend(t, "A")
	addr, _, _ := startFront(t, Config{}, a.URL)
	c := dialFront(t, addr)
	resp, body := c.do("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 || body != "" {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, body)
	}
	resp, body = c.do("GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if resp.StatusCode != 200 || body != "A /k" || resp.Header.Get("Connection") != "keep-alive" {
		t.Fatalf("HTTP/1.0 keep-alive: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, body = c.do(get("/again")); body != "A /again" {
		t.Fatalf("after HTTP/1.0 keep-alive: %d %q", resp.StatusCode, body)
	}
}

func TestAbsoluteFormForwardedAsOriginForm(t *testing.T) {
	a := namedBackend(t, "A")
	addr, _, _ := startFront(t, Config{}, a.URL)
	c := dialFront(t, addr)
	for target, want := range map[string]string{
		"http://example.com/abs/p?q=1": "A /abs/p",
		"http://example.com":           "A /",
		"http://example.com?x":         "A /",
	} {
		if _, body := c.do("GET " + target + " HTTP/1.1\r\nHost: example.com\r\n\r\n"); body != want {
			t.Errorf("%s: got %q want %q", target, body, want)
		}
	}
	if got := string(originForm([]byte("*"))); got != "*" {
		t.Errorf("originForm(*) = %q", got)
	}
}

func TestIdleKeepAliveClosed(t *testing.T) {
	a := namedBackend(t, "A")
	addr, _, _ := startFront(t, Config{IdleTimeout: 200 * time.Millisecond}, a.URL)
	c := dialFront(t, addr)
	if resp, _ := c.do(get("/")); resp.StatusCode != 200 {
		t.Fatal("first request failed")
	}
	// No second request: the front closes the connection without a word.
	c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.br.Read(make([]byte, 1))
	if n != 0 || err == nil || isTimeoutErr(err) {
		t.Fatalf("idle connection: read %d bytes, err %v; want EOF", n, err)
	}
}

func TestUntilCloseResponse(t *testing.T) {
	big := testutil.Pattern(300 << 10)
	node := rawBackend(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
		c.Write(big) // and close: the end of the body
	})
	addr, s, _ := startFront(t, Config{}, node)
	c := dialFront(t, addr)
	resp, body := c.do(get("/"))
	if resp.StatusCode != 200 || !resp.Close || sum([]byte(body)) != sum(big) {
		t.Fatalf("status %d close %v, %d body bytes (want %d)", resp.StatusCode, resp.Close, len(body), len(big))
	}
	if !c.closed() {
		t.Fatal("client connection not closed after an until-close body")
	}
	if st := s.Stats(); st.Status[2] != 1 {
		t.Fatalf("stats %+v", st)
	}
}
