package front

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// bigBackend answers /big with a body of size bytes, written until the
// front stops taking it, and anything else with "ok"; big counts the /big
// requests it has begun to answer.
func bigBackend(t *testing.T, size int64, big *atomic.Int64) string {
	chunk := make([]byte, 64<<10)
	return reqBackend(t, func(c net.Conn, req *http.Request) bool {
		io.Copy(io.Discard, req.Body)
		if req.URL.Path != "/big" {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return true
		}
		big.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.FormatInt(size, 10)+"\r\n\r\n")
		for left := size; left > 0; {
			n, err := c.Write(chunk[:min(left, int64(len(chunk)))])
			if err != nil {
				return false
			}
			left -= int64(n)
		}
		return true
	})
}

// dialFrom opens a raw client connection to addr from the local address
// src (any 127.0.0.0/8 address works on Linux loopback).
func dialFrom(t *testing.T, src, addr string) *client {
	t.Helper()
	return dialWith(t, &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}, addr)
}

// status sends a GET for path and returns the response status, or 0 when
// the connection was closed or reset instead.
func (cl *client) status(path string) int {
	if _, err := io.WriteString(cl.c, get(path)); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(cl.br, &http.Request{Method: "GET"})
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Clients that ask for a large body and never read it
// must not hold the node's request slots, or every other client queues
// behind them and gets 503.
func TestSlowReadersDoNotHoldNodeSlots(t *testing.T) {
	var big atomic.Int64
	node := bigBackend(t, 64<<20, &big)
	const maxConn, slow = 4, 12
	addr, s, _ := startFront(t, Config{MaxConn: maxConn, QueueTimeout: time.Second}, node)
	for range slow {
		c := dialFront(t, addr)
		if _, err := io.WriteString(c.c, get("/big")); err != nil {
			t.Fatal(err)
		}
	}
	// At least maxConn of them reach the node (all of them once slots are
	// given back); then their bodies stall on the clients.
	for end := time.Now().Add(10 * time.Second); big.Load() < maxConn; {
		if time.Now().After(end) {
			t.Fatalf("only %d slow requests reached the node", big.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	for i := range 3 {
		if st := dialFront(t, addr).status("/small"); st != 200 {
			t.Fatalf("normal request %d while %d clients do not read: status %d, want 200 (stats %+v)", i, slow, st, s.Stats())
		}
	}
	if st := s.Stats(); st.Streaming < maxConn {
		t.Errorf("Stats.Streaming = %d, want at least %d stalled bodies counted", st.Streaming, maxConn)
	}
}

// The client send timeout (WriteTimeout) closes a connection whose client
// stopped reading, and the node connection behind it.
func TestSendTimeoutCutsStalledReader(t *testing.T) {
	var big atomic.Int64
	node := bigBackend(t, 64<<20, &big)
	addr, s, _ := startFront(t, Config{WriteTimeout: 200 * time.Millisecond}, node)
	c := dialFront(t, addr)
	io.WriteString(c.c, get("/big"))
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := s.Stats()
		if big.Load() > 0 && st.ConnsActive == 0 && st.Streaming == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("stalled reader still connected: %+v", st)
		}
	}
}

// One address may hold at most MaxConnsPerIP connections;
// another address is not affected, and a closed connection frees its place.
func TestPerAddressConnLimit(t *testing.T) {
	node := namedBackend(t, "n")
	addr, s, _ := startFront(t, Config{MaxConnsPerIP: 3}, node.URL)
	var held []*client
	for i := range 3 {
		c := dialFrom(t, "127.0.0.1", addr)
		if st := c.status("/"); st != 200 {
			t.Fatalf("connection %d from 127.0.0.1: status %d, want 200", i, st)
		}
		held = append(held, c)
	}
	for _, tc := range []struct {
		src  string
		want int // 0: refused (503 or closed)
	}{
		{"127.0.0.1", 0},
		{"127.0.0.2", 200},
		{"127.0.0.1", 0},
	} {
		st := dialFrom(t, tc.src, addr).status("/")
		if tc.want == 0 && st == 200 || tc.want != 0 && st != tc.want {
			t.Fatalf("one more connection from %s: status %d, want %d (0: refused)", tc.src, st, tc.want)
		}
	}
	held[0].c.Close()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if dialFrom(t, "127.0.0.1", addr).status("/") == 200 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("a closed connection did not free its address's place")
		}
	}
	if st := s.Stats(); st.RefusedPerIP < 2 {
		t.Errorf("RefusedPerIP = %d, want at least 2", st.RefusedPerIP)
	}
}

// At MaxClientConns the connections idle the longest are
// closed to serve a new client; when none is idle the new one is refused.
func TestIdleConnsShedAtGlobalLimit(t *testing.T) {
	node := namedBackend(t, "n")
	const max = 8
	addr, s, _ := startFront(t, Config{MaxClientConns: max, MaxConnsPerIP: -1}, node.URL)
	var idle []*client
	for i := range max {
		c := dialFront(t, addr)
		if st := c.status("/"); st != 200 {
			t.Fatalf("keep-alive connection %d: status %d", i, st)
		}
		idle = append(idle, c)
	}
	time.Sleep(2 * time.Duration(shedMinIdle))
	if st := dialFront(t, addr).status("/new"); st != 200 {
		t.Fatalf("new client at the limit with %d idle connections: status %d, want 200", max, st)
	}
	if !idle[0].closed() {
		t.Error("the connection idle the longest is still open")
	}
	if st := idle[max-1].status("/again"); st != 200 {
		t.Errorf("the connection idle the shortest: status %d, want 200 (still open)", st)
	}
	if st := s.Stats(); st.IdleShed == 0 {
		t.Errorf("IdleShed = 0: %+v", st)
	}

	// Busy connections (a head begun) are never shed: at the limit a new
	// one is refused instead. Each partial head is read before the next
	// connection opens, so none of them is ever idle.
	const busy = 16
	addr2, s2, _ := startFront(t, Config{MaxClientConns: busy, MaxConnsPerIP: -1}, node.URL)
	partial := "GET / HTTP/1.1\r\n"
	for i := range busy {
		io.WriteString(dialFront(t, addr2).c, partial)
		for end := time.Now().Add(10 * time.Second); s2.Stats().BytesIn < uint64((i+1)*len(partial)); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("partial head %d not read: %+v", i, s2.Stats())
			}
		}
	}
	c := dialFront(t, addr2)
	if st := c.status("/"); st != 503 && st != 0 {
		t.Fatalf("client past the limit with no idle connection: status %d, want refusal", st)
	}
	if st := s2.Stats(); st.RefusedLimit != 1 {
		t.Errorf("RefusedLimit = %d, want 1", st.RefusedLimit)
	}
}
