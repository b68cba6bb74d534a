package front

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"shoal/internal/cluster/control"
)

// TestLocalPath: the local path lets the in-process node answer on the
// client's connection (here for /hit), and relays what it declines (other
// paths), requests with a body and requests without Host; its answers are
// counted like relayed ones, and its Close closes the client connection.
func TestLocalPath(t *testing.T) {
	var relayed atomic.Int64
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		relayed.Add(1)
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "relayed "+r.URL.Path)
	}))
	defer node.Close()
	var served atomic.Int64
	serve := func(b *control.Backend, r LocalRequest) LocalAnswer {
		if b.Index != 0 || !strings.HasPrefix(string(r.Req.Target), "/hit") {
			return LocalAnswer{}
		}
		served.Add(1)
		body := "local " + string(r.Req.Target)
		head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n", len(body))
		closeConn := r.Close || string(r.Req.Target) == "/hit-close"
		if closeConn {
			head += "Connection: close\r\n"
		}
		n, err := io.WriteString(r.Conn, head+"\r\n"+body)
		return LocalAnswer{Handled: true, Status: 200, Size: int64(len(body)), Body: int64(len(body)), Sent: int64(n), Close: closeConn, Err: err}
	}
	addr, s, _ := startFront(t, Config{Path: Local(serve)}, node.URL)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	exchange := func(req, want string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != want {
			t.Errorf("%q: body %q, want %q", req, b, want)
		}
		return resp
	}
	exchange("GET /hit HTTP/1.1\r\nHost: a\r\n\r\n", "local /hit")
	exchange("GET /miss HTTP/1.1\r\nHost: a\r\n\r\n", "relayed /miss")
	exchange("GET /hit?q HTTP/1.1\r\nHost: a\r\n\r\n", "local /hit?q")
	exchange("POST /hit HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", "relayed /hit")
	// Pipelined: both answered, in order, on the one connection.
	io.WriteString(c, "GET /hit1 HTTP/1.1\r\nHost: a\r\n\r\nGET /miss2 HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []string{"local /hit1", "relayed /miss2"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != want {
			t.Errorf("pipelined: %q, want %q", b, want)
		}
	}
	exchange("GET /hit HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "relayed /hit") // no Host: relayed (the node keys by it)
	exchange("GET /hit-close HTTP/1.1\r\nHost: a\r\n\r\n", "local /hit-close")
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after a local answer with Close: read %v, want EOF", err)
	}
	if served.Load() != 4 || relayed.Load() != 4 {
		t.Errorf("served locally %d, relayed %d; want 4 and 4", served.Load(), relayed.Load())
	}
	st := s.Stats()
	if st.Paths["local"] != 8 || st.Paths[localRelayed] != 4 || st.Status[2] != 8 {
		t.Errorf("paths %v, 2xx %d; want local 8 (4 of them relayed), 8 2xx", st.Paths, st.Status[2])
	}
}
