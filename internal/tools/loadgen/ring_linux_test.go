//go:build linux

package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/uring"
)

// needRing skips where the kernel gives no io_uring (turned off, or a
// container's seccomp filter), which the uring engine needs.
func needRing(t *testing.T) {
	t.Helper()
	r, err := uring.New(8)
	if err != nil {
		t.Skipf("no io_uring here (%v): the uring engine cannot run", err)
	}
	r.Close()
}

// variedServer answers each path its own way: split heads, interim
// answers, bodies with no bytes on the wire, large bodies dropped in the
// socket, a closing answer.
func variedServer(t *testing.T) *rawServer {
	return newRawServer(t, func(_ int, path, _ string, c *net.TCPConn) bool {
		switch path {
		case "/split":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Le")
			time.Sleep(2 * time.Millisecond)
			io.WriteString(c, "ngth: 5\r\n\r\nhel")
			time.Sleep(2 * time.Millisecond)
			io.WriteString(c, "lo")
		case "/interim":
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		case "/204":
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		case "/304":
			io.WriteString(c, "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n")
		case "/big":
			return ok(c, strings.Repeat("b", 300<<10))
		case "/lf":
			io.WriteString(c, "HTTP/1.1 404 Not Found\nContent-Length: 3\n\nnot")
		case "/close":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye")
			return false
		default:
			return ok(c, "fine")
		}
		return true
	})
}

// The two engines must count the same run the same way.
func TestRingMatchesGoroutines(t *testing.T) {
	needRing(t)
	srv := variedServer(t)
	paths := List{"/split", "/a", "/interim", "/204", "/big", "/304", "/lf", "/close", "/b", "/big"}
	var got [2]*Result
	for i, engine := range []string{EngineGoroutines, EngineRing} {
		got[i] = run(t, Config{URL: srv.url(), Workload: paths, Requests: 40, Connections: 3, Engine: engine})
	}
	g, r := got[0], got[1]
	if r.Requests != 40 || r.Requests != g.Requests || r.OK != g.OK || r.Errors != g.Errors ||
		r.WireBytes != g.WireBytes || r.BodyBytes != g.BodyBytes {
		t.Errorf("uring: requests %d ok %d errors %v wire %d body %d; goroutines: %d %d %v %d %d",
			r.Requests, r.OK, r.Errors, r.WireBytes, r.BodyBytes, g.Requests, g.OK, g.Errors, g.WireBytes, g.BodyBytes)
	}
	// Every /close answer (4) ends its connection; the next request on it
	// opens another, except where the run ends first (at most one).
	if r.Connects < 3+3 || r.Connects > 3+4 {
		t.Errorf("uring: %d connects, want 6 or 7", r.Connects)
	}
	if r.Latency.Count() != 40 {
		t.Errorf("uring: %d latency samples, want 40", r.Latency.Count())
	}
	if g.CPU <= 0 || r.CPU <= 0 {
		t.Errorf("CPU over the run: goroutines %v, uring %v; want both counted", g.CPU, r.CPU)
	}
}

func TestRingErrorClassification(t *testing.T) {
	needRing(t)
	srv, dead := errorServer(t), deadURL(t)
	cases := []struct {
		url  string
		kind ErrorKind
		reqs uint64
	}{
		{srv.url() + "/500", ErrStatus5xx, 1},
		{srv.url() + "/reset", ErrReset, 0},
		{srv.url() + "/close", ErrReset, 0},
		{srv.url() + "/short", ErrShortBody, 0},
		{srv.url() + "/stall", ErrTimeout, 0},
		{srv.url() + "/garbage", ErrProtocol, 0},
		{dead, ErrConnect, 0},
	}
	for _, c := range cases {
		res := run(t, Config{URL: c.url, Requests: 1, Timeout: 200 * time.Millisecond, Engine: EngineRing})
		var want [NumErrorKinds]uint64
		want[c.kind] = 1
		if res.Errors != want || res.Requests != c.reqs {
			t.Errorf("%s: errors %v requests %d, want %v requests %d", c.url, res.Errors, res.Requests, want, c.reqs)
		}
	}
}

// A chunked answer ends a uring run with an error that says what to do,
// rather than a count that would be wrong.
func TestRingRefusesChunked(t *testing.T) {
	needRing(t)
	srv := newRawServer(t, func(_ int, _, _ string, c *net.TCPConn) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
		return true
	})
	r, err := New(Config{URL: srv.url(), Requests: 5, Engine: EngineRing})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background()); !errors.Is(err, errRingFraming) {
		t.Errorf("chunked: %v, want %v", err, errRingFraming)
	}
}

func TestRingConnections(t *testing.T) {
	needRing(t)
	srv := newRawServer(t, func(n int, _, _ string, c *net.TCPConn) bool {
		if n == 2 { // the third answer on each connection ends it
			io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx")
			return false
		}
		return ok(c, "x")
	})
	res := run(t, Config{URL: srv.url(), Requests: 10, Engine: EngineRing})
	if res.Requests != 10 || res.Errors != [NumErrorKinds]uint64{} || res.Connects != 4 {
		t.Errorf("keep-alive: requests %d errors %v connects %d, want 10, none, 4", res.Requests, res.Errors, res.Connects)
	}
	res = run(t, Config{URL: srv.url(), Requests: 9, ConnRequests: 2, Engine: EngineRing})
	if res.Requests != 9 || res.Connects != 5 || res.Errors != [NumErrorKinds]uint64{} {
		t.Errorf("2 per connection: requests %d connects %d errors %v, want 9 5 none", res.Requests, res.Connects, res.Errors)
	}
	// A time-bounded run against a server that never answers ends at its
	// deadline and counts nothing it interrupted.
	stall := newRawServer(t, func(_ int, _, _ string, c *net.TCPConn) bool {
		io.Copy(io.Discard, c)
		return false
	})
	res = run(t, Config{URL: stall.url(), Connections: 4, Duration: 100 * time.Millisecond, Timeout: time.Minute, Engine: EngineRing})
	if res.Requests != 0 || res.Errors != [NumErrorKinds]uint64{} || res.Duration > time.Second {
		t.Errorf("stalled: requests %d errors %v after %v, want none at 100ms", res.Requests, res.Errors, res.Duration)
	}
}

func TestRingEngineChecks(t *testing.T) {
	for _, cfg := range []Config{
		{URL: "https://127.0.0.1:1/", Engine: EngineRing},
		{URL: "http://127.0.0.1:1/", Engine: EngineRing, Rate: 10},
		{URL: "http://127.0.0.1:1/", Engine: EngineRing, DisableKeepAlive: true},
		{URL: "http://127.0.0.1:1/", Engine: "epoll"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v: accepted", cfg)
		}
	}
}

// A server that resets a kept-alive connection after an answer: the next
// request on it fails as a reset (its send, or the receive linked to it),
// and the one after goes on a new connection — in both engines alike.
func TestRingResetBetweenRequests(t *testing.T) {
	needRing(t)
	srv := newRawServer(t, func(_ int, path string, _ string, c *net.TCPConn) bool {
		ok(c, "x")
		if path == "/rst" {
			time.Sleep(5 * time.Millisecond) // the answer is read before the reset
			c.SetLinger(0)
			return false
		}
		return true
	})
	for _, engine := range []string{EngineGoroutines, EngineRing} {
		res := run(t, Config{URL: srv.url(), Workload: List{"/a", "/rst", "/b", "/c", "/d"}, Requests: 5, Engine: engine})
		var want [NumErrorKinds]uint64
		want[ErrReset] = 1
		if res.Requests != 4 || res.Errors != want || res.Connects != 2 {
			t.Errorf("%s: requests %d errors %v connects %d, want 4, one reset, 2", engine, res.Requests, res.Errors, res.Connects)
		}
	}
}
