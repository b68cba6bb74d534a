package front

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/policy"
)

// rrPolicy is a minimal round robin over usable nodes, so these tests do not
// depend on internal/cluster/policy's implementations.
type rrPolicy struct{ next int }

func (p *rrPolicy) Name() string { return "testrr" }
func (p *rrPolicy) Pick(c *policy.Cluster, r *policy.Request) policy.Decision {
	n := len(c.Nodes)
	for k := 0; k < n; k++ {
		i := (p.next + k) % n
		if c.Nodes[i].Usable() {
			p.next = i + 1
			return policy.Decision{Node: i, Fetch: -1}
		}
	}
	return policy.None
}
func (p *rrPolicy) Done(*policy.Cluster, int, *policy.Request) {}

// startFront runs a front over the node URLs and returns its address.
func startFront(t testing.TB, cfg Config, urls ...string) (string, *Server, *control.Cluster) {
	t.Helper()
	specs := make([]control.NodeSpec, len(urls))
	for i, u := range urls {
		specs[i] = control.NodeSpec{URL: u}
	}
	cl, err := control.New(&rrPolicy{}, specs, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, addr := frontOn(t, cl, cfg)
	return addr, s, cl
}

// frontOn starts a front for cl with cfg on a loopback port until the test
// ends and returns it and its address.
func frontOn(t testing.TB, cl *control.Cluster, cfg Config) (*Server, string) {
	t.Helper()
	s, err := New(cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveFront(t, s, ln)
	return s, ln.Addr().String()
}

// checkSockets runs cl's health checks every period until the test ends
// and waits until every node has reported its handoff socket.
func checkSockets(t testing.TB, cl *control.Cluster, every time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go cl.Check(ctx, control.CheckConfig{Interval: every, Timeout: 5 * time.Second, Rise: 1, Fall: 3})
	deadline := time.Now().Add(10 * time.Second)
	for _, b := range cl.Backends() {
		for st := b.LastStatus(); st == nil || st.HandoffSocket == ""; st = b.LastStatus() {
			if time.Now().After(deadline) {
				t.Fatalf("node %s never reported a handoff socket", b.URL)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// serveFront serves ln with s until the test ends, then shuts s down.
func serveFront(t testing.TB, s *Server, ln net.Listener) {
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	})
}

// namedBackend is an httptest server answering "<name> <path>" with the
// request headers it saw echoed back as X-Seen-* headers.
func namedBackend(t testing.TB, name string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range r.Header {
			w.Header()["X-Seen-"+k] = v
		}
		w.Header().Set("X-Backend", name)
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// rawBackend serves each connection with fn on a plain TCP listener, for
// answers net/http would not send (hop-by-hop headers, resets).
func rawBackend(t testing.TB, fn func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); fn(c) }()
		}
	}()
	return "http://" + ln.Addr().String()
}

// reqBackend is a rawBackend that reads requests off each connection and
// lets answer write each one's response; false from answer closes.
func reqBackend(t testing.TB, answer func(c net.Conn, req *http.Request) bool) string {
	return rawBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil || !answer(c, req) {
				return
			}
		}
	})
}

// client is one raw keep-alive connection to the front.
type client struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

func dialFront(t testing.TB, addr string) *client {
	t.Helper()
	return dialWith(t, &net.Dialer{}, addr)
}

// dialWith opens a raw client connection to addr with d.
func dialWith(t testing.TB, d *net.Dialer, addr string) *client {
	t.Helper()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

// do sends raw and reads one response with its whole body.
func (cl *client) do(raw string) (*http.Response, string) {
	cl.t.Helper()
	if _, err := io.WriteString(cl.c, raw); err != nil {
		cl.t.Fatal(err)
	}
	return cl.read(methodOf(raw))
}

func (cl *client) read(method string) (*http.Response, string) {
	cl.t.Helper()
	resp, err := http.ReadResponse(cl.br, &http.Request{Method: method})
	if err != nil {
		cl.t.Fatalf("read response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		cl.t.Fatalf("read body: %v", err)
	}
	return resp, string(body)
}

// closed reports whether the front closed the connection (EOF or reset on
// the next read) within a few seconds.
func (cl *client) closed() bool {
	cl.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := cl.br.ReadByte()
	return err != nil && !isTimeoutErr(err)
}

func isTimeoutErr(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func methodOf(raw string) string {
	if i := strings.IndexByte(raw, ' '); i > 0 {
		return raw[:i]
	}
	return "GET"
}

func get(path string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"
}
