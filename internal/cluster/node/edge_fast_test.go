package node

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fixedUpstream answers every request 200 with body and a day of freshness.
type fixedUpstream struct{ body []byte }

func (u fixedUpstream) Fetch(_ context.Context, req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
		Header: http.Header{"Content-Type": {"application/octet-stream"}, "Cache-Control": {"max-age=86400"},
			"Date": {time.Now().UTC().Format(http.TimeFormat)}},
		ContentLength: int64(len(u.body)), Body: io.NopCloser(bytes.NewReader(u.body)),
	}, nil
}

// edgeBenchConn is a cache-mode node over fixedUpstream with a 1 KB
// response stored under /f.bin, and a connection whose writes vanish.
func edgeBenchConn(tb testing.TB) *conn {
	tb.Helper()
	srv, err := New(Config{Edge: EdgeConfig{Upstream: fixedUpstream{bytes.Repeat([]byte("x"), 1024)}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Shutdown(context.Background()) })
	c := newConn(srv, discardConn{})
	c.r, c.w = 0, copy(c.buf, "GET /f.bin HTTP/1.1\r\nHost: bench\r\n\r\n")
	c.process(time.Now()) // the miss that stores it
	if got := srv.EdgeStats().Stored; got != 1 {
		tb.Fatalf("stored %d responses, want 1", got)
	}
	return c
}

// BenchmarkEdgeHit1K is a cache-mode node's CPU per hit of a stored 1 KB
// response, parse to write, in process (no syscalls): the request wrk
// sends, answered from the store.
func BenchmarkEdgeHit1K(b *testing.B) {
	c := edgeBenchConn(b)
	req := []byte("GET /f.bin HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		c.r, c.w = 0, copy(c.buf, req)
		if !c.process(now) {
			b.Fatal("connection closed")
		}
	}
	if h := c.s.EdgeStats().Hits; h < int64(b.N) {
		b.Fatalf("%d hits for %d requests", h, b.N)
	}
}

// TestEdgeHitNoAlloc: a plain hit (GET or HEAD, with or without a query,
// HTTP/1.0 or 1.1, an absent Host) allocates nothing per request, once the
// response was hit before.
func TestEdgeHitNoAlloc(t *testing.T) {
	c := edgeBenchConn(t)
	now := time.Now()
	for _, req := range []string{
		"GET /f.bin HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n",
		"HEAD /f.bin HTTP/1.1\r\nHost: BENCH:80\r\n\r\n",
		"GET /f.bin?a=1&b=2 HTTP/1.1\r\nHost: bench\r\n\r\n",
		"GET /f.bin HTTP/1.0\r\n\r\n",
	} {
		run := func() {
			c.r, c.w = 0, copy(c.buf, req)
			c.process(now)
		}
		run()
		run() // the first hit decodes the stored entry
		if n := testing.AllocsPerRun(100, run); n != 0 {
			t.Errorf("%q: %v allocations per hit", req, n)
		}
	}
}

// captureConn keeps what is written to it.
type captureConn struct {
	discardConn
	out bytes.Buffer
}

func (c *captureConn) Write(b []byte) (int, error) { return c.out.Write(b) }

// TestEdgeFastHitSameAnswer: the allocation-free hit answers byte for
// byte what the full path answers (forced here by a request directive
// that changes nothing), and leaves a stale response to the full path.
func TestEdgeFastHitSameAnswer(t *testing.T) {
	c := edgeBenchConn(t)
	cc := &captureConn{}
	c.nc = cc
	now := time.Now()
	answer := func(req string) string {
		cc.out.Reset()
		c.r, c.w = 0, copy(c.buf, req)
		if !c.process(now) {
			t.Fatalf("%q: connection closed", req)
		}
		return cc.out.String()
	}
	for _, target := range []string{"/f.bin", "/f.bin?q=1"} {
		for _, method := range []string{"GET", "HEAD"} {
			plain := method + " " + target + " HTTP/1.1\r\nHost: bench\r\n\r\n"
			answer(plain)
			answer(plain) // decoded now: the next one takes the fast path
			before := c.s.EdgeStats()
			fast := answer(plain)
			slow := answer(method + " " + target + " HTTP/1.1\r\nHost: bench\r\nCache-Control: x-nothing\r\n\r\n")
			if fast != slow {
				t.Errorf("%s %s: fast path answered\n%q\nfull path\n%q", method, target, fast, slow)
			}
			if !strings.Contains(fast, "X-Cache: HIT\r\n") {
				t.Errorf("%s %s: not a hit: %q", method, target, fast)
			}
			if got := c.s.EdgeStats(); got.Hits != before.Hits+2 || got.Misses != before.Misses {
				t.Errorf("%s %s: hits %d→%d, misses %d→%d; want two more hits", method, target, before.Hits, got.Hits, before.Misses, got.Misses)
			}
		}
	}
	// Made stale now (a soft purge), it is not a hit a moment later.
	if !c.s.EdgeMarkStale(c.s.EdgeKey("bench", "/f.bin?q=1")) {
		t.Fatal("soft purge failed")
	}
	if got := answer("GET /f.bin?q=1 HTTP/1.1\r\nHost: bench\r\n\r\n"); !strings.Contains(got, "X-Cache: EXPIRED\r\n") {
		t.Errorf("after a soft purge: want EXPIRED, got %q", got)
	}
	// A day and a second later the response is stale: the fast path hands
	// it to the full path, which fetches it again (an EXPIRED answer).
	later := now.Add(86401 * time.Second)
	cc.out.Reset()
	c.r, c.w = 0, copy(c.buf, "GET /f.bin HTTP/1.1\r\nHost: bench\r\n\r\n")
	c.process(later)
	if !strings.Contains(cc.out.String(), "X-Cache: EXPIRED\r\n") {
		t.Errorf("stale hit: want EXPIRED, got %q", cc.out.String())
	}
}
