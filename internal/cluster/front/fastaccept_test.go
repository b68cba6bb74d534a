//go:build linux

package front

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// deferredListen is the front's own listener (TCP_DEFER_ACCEPT): a
// connection is accepted once its first bytes are there, so the raw accept
// path sees a whole head when the client sent one in one write.
func deferredListen() (net.Listener, error) { return Listen("127.0.0.1:0") }

// getClose sends one Connection: close request for u in one write on a new
// connection and checks the body's checksum.
func getClose(t *testing.T, addr, u string, sums map[string]string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", u)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	b, _ := io.ReadAll(resp.Body)
	sum := sha256.Sum256(b)
	if resp.StatusCode != 200 || hex.EncodeToString(sum[:]) != sums[u] {
		t.Fatalf("%s: status %d, %d bytes, bad body", u, resp.StatusCode, len(b))
	}
}

// waitIdle waits until the front holds no client connection.
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.Stats().ConnsActive != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d client connections still active", s.Stats().ConnsActive)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFastAcceptPasses: whole heads are passed straight from the accept
// loop, under a policy whose nodes keep connections and one whose nodes
// hand them back, and every counter says so.
func TestFastAcceptPasses(t *testing.T) {
	for _, pol := range []string{"wrr", "urlhash"} {
		t.Run(pol, func(t *testing.T) {
			addr, s, _, _, urls, sums := passfdClusterOn(t, deferredListen, pol, 2, Config{Path: PassFD(PassFDConfig{})})
			const n = 60
			for i := range n {
				getClose(t, addr, urls[i%len(urls)], sums)
			}
			waitIdle(t, s)
			waitPassed(s, n)
			st := s.Stats()
			h := st.Handoff
			if h.FastPassed != n || h.Passed != n || h.FastFallback != 0 || h.FastBlocked != 0 || h.FallbackSend != 0 || h.FallbackNoSocket != 0 {
				t.Errorf("handoff %+v, want %d fast passes and nothing else", h, n)
			}
			if st.ConnsAccepted != n || st.Requests != n || st.Paths["passfd"] != n || st.BytesOut != 0 || st.BytesIn == 0 {
				t.Errorf("stats %+v, want %d connections and requests, no response byte through the front", st, n)
			}
			// Keep-alive clients: the first request of each connection takes
			// the fast path, later ones stay at the node or come back.
			hammer(t, addr, 8, 200, urls, sums)
		})
	}
}

// TestFastAcceptFallbacks: connections the accept loop cannot pass whole go
// to the normal path with the bytes it read — a head split over two writes,
// a malformed head, CONNECT — and are served or refused exactly as there.
func TestFastAcceptFallbacks(t *testing.T) {
	addr, s, _, _, urls, sums := passfdClusterOn(t, deferredListen, "wrr", 1, Config{Path: PassFD(PassFDConfig{})})

	// Incomplete head: the rest comes later.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", urls[0])
	io.WriteString(c, head[:10])
	for s.Stats().Handoff.FastFallback == 0 { // accepted with a partial head
		time.Sleep(time.Millisecond)
	}
	io.WriteString(c, head[10:])
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != sums[urls[0]] {
		t.Fatal("split head: bad body")
	}
	if h := waitPassed(s, 1); h.FastFallback != 1 || h.FastPassed != 0 || h.Passed != 1 {
		t.Fatalf("split head: handoff %+v, want one fallback then a pass on the normal path", h)
	}

	for _, tc := range []struct{ req, status string }{
		{"BLAH\r\n\r\n", "HTTP/1.1 400 "},
		{"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", "HTTP/1.1 501 "},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, tc.req)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.HasPrefix(line, tc.status) {
			t.Errorf("%q: answered %q, want %q", tc.req, line, tc.status)
		}
	}
	waitIdle(t, s)
	st := s.Stats()
	if st.Handoff.FastFallback != 3 || st.ConnsAccepted != 3 || st.Sent4xx != 1 || st.Sent5xx != 1 {
		t.Fatalf("stats %+v, want 3 fallbacks, 3 connections, one 400 and one 501", st)
	}
	getClose(t, addr, urls[1], sums) // the fast path still works after them
	if h := waitHandoff(s, func(h HandoffStats) bool { return h.FastPassed >= 1 }); h.FastPassed != 1 {
		t.Fatalf("handoff %+v, want one fast pass", h)
	}
}

// TestFastAcceptSlowloris: a client that never finishes its head is still
// cut by HeaderTimeout after the accept loop handed it on.
func TestFastAcceptSlowloris(t *testing.T) {
	cfg := Config{Path: PassFD(PassFDConfig{}), HeaderTimeout: 300 * time.Millisecond}
	addr, s, _, _, _, _ := passfdClusterOn(t, deferredListen, "wrr", 1, cfg)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nX-a: ")
	go func() { // a byte now and then, never the end of the head
		for range 50 {
			time.Sleep(50 * time.Millisecond)
			if _, err := io.WriteString(c, "a"); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 408 ") {
		t.Fatalf("answered %q (%v), want 408 after the header timeout", line, err)
	}
	if h := s.Stats().Handoff; h.FastFallback != 1 || h.Passed != 0 {
		t.Fatalf("handoff %+v, want one fallback and no pass", h)
	}
}

// TestFastAcceptShutdown: Shutdown stops the raw accept loop (Serve
// returns ErrServerClosed) and the port stops listening, although the loop
// waited on a duplicate of the listening descriptor.
func TestFastAcceptShutdown(t *testing.T) {
	_, _, cl, _, urls, sums := passfdCluster(t, "wrr", 1, Config{Path: PassFD(PassFDConfig{})})
	s, err := New(cl, Config{Path: PassFD(PassFDConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	getClose(t, addr, urls[0], sums)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve returned %v, want ErrServerClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("still listening after Shutdown")
	}
	if h := s.Stats().Handoff; h.FastPassed != 1 {
		t.Fatalf("handoff %+v, want one fast pass", h)
	}
}

// TestFastAcceptOff: NoFastAccept, and any Choose, keep every connection on
// the normal path.
func TestFastAcceptOff(t *testing.T) {
	for name, cfg := range map[string]Config{
		"NoFastAccept": {Path: PassFD(PassFDConfig{}), noFastAccept: true},
		"hybrid":       {Choose: Hybrid(PassFD(PassFDConfig{}))},
	} {
		t.Run(name, func(t *testing.T) {
			addr, s, _, _, urls, sums := passfdClusterOn(t, deferredListen, "wrr", 1, cfg)
			getClose(t, addr, urls[3], sums)
			waitIdle(t, s)
			st := s.Stats()
			if h := st.Handoff; h.FastPassed != 0 || h.FastFallback != 0 || st.Requests != 1 || st.ConnsAccepted != 1 {
				t.Fatalf("stats %+v, want one request on the normal path", st)
			}
		})
	}
}
