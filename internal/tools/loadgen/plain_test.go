package loadgen

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// TestPlainExchange: the first Read after arm sends the request and
// returns the start of the answer; later Reads read the rest; a request
// too long for the socket's send buffer (the server reads it slowly) is
// finished the ordinary way and still answered.
func TestPlainExchange(t *testing.T) {
	for _, size := range []int{18, 256 << 10} {
		c, s := testutil.TCPPair(t)
		c.SetWriteBuffer(1) // the kernel's minimum, so 256 KB cannot go at once
		req := append(bytes.Repeat([]byte("x"), size-4), "\r\n\r\n"...)
		answer := []byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
		got := make(chan int, 1)
		go func() {
			time.Sleep(20 * time.Millisecond) // the client waits with its request unsent
			n, _ := io.ReadFull(s, make([]byte, len(req)))
			got <- n
			s.Write(answer[:10])
			time.Sleep(20 * time.Millisecond) // the rest in a later segment
			s.Write(answer[10:])
		}()
		var pc plainConn
		if !pc.bind(c) {
			t.Fatal("a TCP connection did not bind")
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		pc.arm(req)
		buf := make([]byte, 64)
		n, err := pc.Read(buf) // the first 10 bytes, or more on a slow machine
		if err != nil || n == 0 {
			t.Fatalf("%d-byte request: first Read %d, %v; want the start of the answer", size, n, err)
		}
		if m := <-got; m != len(req) {
			t.Fatalf("%d-byte request: the server got %d bytes", size, m)
		}
		m, err := io.ReadFull(&pc, buf[n:len(answer)])
		if err != nil || !bytes.Equal(buf[:n+m], answer) {
			t.Fatalf("%d-byte request: rest %q, %v", size, buf[:n+m], err)
		}
	}
}

// TestPlainExchangeWakes: a deadline set from another goroutine (the
// watchdog's kill) wakes a Read waiting for the answer; a server that
// closes answers the end of the stream.
func TestPlainExchangeWakes(t *testing.T) {
	c, _ := testutil.TCPPair(t)
	var pc plainConn
	pc.bind(c)
	go func() {
		time.Sleep(20 * time.Millisecond)
		c.SetDeadline(time.Unix(1, 0))
	}()
	pc.arm([]byte("GET / HTTP/1.1\r\n\r\n"))
	if _, err := pc.Read(make([]byte, 64)); classify(err) != ErrTimeout {
		t.Fatalf("Read interrupted by a past deadline: %v, want a timeout", err)
	}
	c2, s2 := testutil.TCPPair(t) // the deadline may have come before the first request went out
	pc.bind(c2)
	go func() {
		io.ReadFull(s2, make([]byte, 18)) // all of it: closing on unread bytes would reset
		s2.Close()
	}()
	pc.arm([]byte("GET / HTTP/1.1\r\n\r\n"))
	if n, err := pc.Read(make([]byte, 64)); n != 0 || err != io.EOF {
		t.Fatalf("Read from a server that closed: %d, %v; want io.EOF", n, err)
	}
}

// TestPlainSplitResponses: responses whose heads, bodies and chunks
// arrive in many segments, a 1 MB body and HEAD answers are all read on
// the raw path, keep-alive, with the right byte counts.
func TestPlainSplitResponses(t *testing.T) {
	big := strings.Repeat("b", 1<<20)
	srv := newRawServer(t, func(_ int, path, _ string, c *net.TCPConn) bool {
		var parts []string
		switch path {
		case "/split":
			parts = []string{"HTTP/1.1 2", "00 OK\r\nConte", "nt-Length: 5\r\n", "\r\nhe", "llo"}
		case "/big":
			parts = []string{"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n", big}
		case "/chunked":
			parts = []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r", "\nhel", "lo\r\n", "0\r\n\r\n"}
		case "/head":
			parts = []string{"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n", "\r\n"}
		}
		for _, p := range parts {
			io.WriteString(c, p)
			time.Sleep(2 * time.Millisecond) // separate segments, separate reads
		}
		return true
	})
	for _, tc := range []struct {
		path, method string
		body         int64
	}{{"/split", "GET", 5}, {"/big", "GET", 1 << 20}, {"/chunked", "GET", 5}, {"/head", "HEAD", 0}} {
		res := run(t, Config{URL: srv.url() + tc.path, Method: tc.method, Requests: 3})
		if res.Requests != 3 || res.OK != 3 || res.Connects != 1 || res.BodyBytes != 3*tc.body || res.Errors != [NumErrorKinds]uint64{} {
			t.Errorf("%s %s: requests %d ok %d connects %d body %d errors %v; want 3 3 1 %d none", tc.method, tc.path,
				res.Requests, res.OK, res.Connects, res.BodyBytes, res.Errors, 3*tc.body)
		}
	}
}

// TestNoAllocPerRequest: a keep-alive request on a plain TCP connection
// (send, wait, read, parse, record) allocates nothing, and goes the raw
// way.
func TestNoAllocPerRequest(t *testing.T) {
	url := trivialServer(t)
	r, err := New(Config{URL: url, Requests: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.t0 = time.Now()
	w := r.workers[0]
	ctx := context.Background()
	w.do(ctx, "/f", 0, 0) // connect
	allocs := testing.AllocsPerRun(200, func() { w.do(ctx, "/f", 0, 0) })
	if !w.plain.active() {
		t.Error("a plain TCP connection does not take the raw path")
	}
	if w.res.Requests != 202 || w.res.Connects != 1 { // AllocsPerRun runs once more to warm up
		t.Errorf("requests %d connects %d, want 202 on one connection (errors %v)", w.res.Requests, w.res.Connects, w.res.Errors)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per request, want 0", allocs)
	}
	w.closeConn()
}
