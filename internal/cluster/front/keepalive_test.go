package front

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pathBackend answers every request with its path as the body, after
// wait(path) returns.
func pathBackend(t *testing.T, wait func(path string)) string {
	return reqBackend(t, func(c net.Conn, req *http.Request) bool {
		p := req.URL.Path
		wait(p)
		body := p
		if strings.HasPrefix(p, "/big") {
			body = strings.Repeat("b", 1<<20)
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		return true
	})
}

func noWait(string) {}

// expectBody reads one response off cl and checks its body.
func (cl *client) expectBody(want string) {
	cl.t.Helper()
	resp, body := cl.read("GET")
	if resp.StatusCode != 200 || body != want {
		cl.t.Fatalf("got %d %.40q, want 200 %.40q", resp.StatusCode, body, want)
	}
}

// TestKeepAliveLoopNoLostRequest: the requests after a connection's first
// are served inside one wait loop that reads the socket only when it may
// hold bytes; none may be left unread: requests pipelined into one
// segment, sent back to back as each answer arrives, sent while the
// front waits for the node, or while it is still writing a large answer.
func TestKeepAliveLoopNoLostRequest(t *testing.T) {
	slow := make(chan struct{})
	addr, _, _ := startFront(t, Config{}, pathBackend(t, func(p string) {
		if p == "/slow" {
			<-slow
		}
	}))
	t.Run("pipelined", func(t *testing.T) {
		cl := dialFront(t, addr)
		cl.do(get("/first"))
		io.WriteString(cl.c, get("/a")+get("/b")+get("/c"))
		for _, p := range []string{"/a", "/b", "/c"} {
			cl.expectBody(p)
		}
	})
	t.Run("pipelined past the buffer", func(t *testing.T) {
		cl := dialFront(t, addr)
		cl.do(get("/first"))
		var all strings.Builder
		const n = 2000 // 60 KB: more than a connection's read buffer
		for i := range n {
			all.WriteString(get("/p" + strconv.Itoa(i)))
		}
		go io.WriteString(cl.c, all.String())
		for i := range n {
			cl.expectBody("/p" + strconv.Itoa(i))
		}
	})
	t.Run("back to back", func(t *testing.T) {
		cl := dialFront(t, addr)
		for i := range 2000 {
			cl.c.SetDeadline(time.Now().Add(5 * time.Second))
			p := "/r" + strconv.Itoa(i)
			io.WriteString(cl.c, get(p))
			cl.expectBody(p)
		}
	})
	t.Run("while the node answers", func(t *testing.T) {
		cl := dialFront(t, addr)
		cl.do(get("/first"))
		io.WriteString(cl.c, get("/slow"))
		time.Sleep(20 * time.Millisecond) // the front is waiting for the node
		io.WriteString(cl.c, get("/next"))
		time.Sleep(20 * time.Millisecond)
		slow <- struct{}{}
		cl.expectBody("/slow")
		cl.expectBody("/next")
	})
	t.Run("while the answer is written", func(t *testing.T) {
		cl := dialFront(t, addr)
		cl.do(get("/first"))
		io.WriteString(cl.c, get("/big"))
		if _, err := cl.br.Peek(1); err != nil { // the front is writing: 1 MB does not fit the socket
			t.Fatal(err)
		}
		io.WriteString(cl.c, get("/next"))
		resp, body := cl.read("GET")
		if resp.StatusCode != 200 || len(body) != 1<<20 {
			t.Fatalf("big answer: %d, %d bytes", resp.StatusCode, len(body))
		}
		cl.expectBody("/next")
	})
}

// TestKeepAliveLoopDeadlines: the idle and head timeouts still apply to
// the requests the wait loop serves.
func TestKeepAliveLoopDeadlines(t *testing.T) {
	node := pathBackend(t, noWait)
	t.Run("idle", func(t *testing.T) {
		addr, _, _ := startFront(t, Config{IdleTimeout: 100 * time.Millisecond}, node)
		cl := dialFront(t, addr)
		cl.do(get("/first"))
		cl.expectBodyAfter(get("/second"), "/second")
		if !cl.closed() {
			t.Fatal("an idle connection was not closed after IdleTimeout")
		}
	})
	t.Run("head", func(t *testing.T) {
		addr, _, _ := startFront(t, Config{HeaderTimeout: 100 * time.Millisecond}, node)
		cl := dialFront(t, addr)
		cl.do(get("/first"))
		io.WriteString(cl.c, "GET /slowloris HTTP/1.1\r\n")
		resp, _ := cl.read("GET")
		if resp.StatusCode != 408 {
			t.Fatalf("a head that did not complete got %d, want 408", resp.StatusCode)
		}
		if !cl.closed() {
			t.Fatal("the connection stayed open after 408")
		}
	})
}

// expectBodyAfter sends raw and checks the answer's body.
func (cl *client) expectBodyAfter(raw, want string) {
	cl.t.Helper()
	io.WriteString(cl.c, raw)
	cl.expectBody(want)
}

// TestKeepAliveLoopClose: Server.Close ends connections in the wait loop
// at once, whether they wait for a request or for a node's answer, and
// a request with a body still goes through.
func TestKeepAliveLoopClose(t *testing.T) {
	hang, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	node := reqBackend(t, func(c net.Conn, req *http.Request) bool {
		io.Copy(io.Discard, req.Body)
		if req.URL.Path == "/hang" {
			hang <- struct{}{}
			<-release
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(req.URL.Path))+"\r\n\r\n"+req.URL.Path)
		return true
	})
	addr, s, _ := startFront(t, Config{}, node)
	post := dialFront(t, addr)
	post.do(get("/first"))
	post.expectBodyAfter("POST /post HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", "/post")
	idle, busy := dialFront(t, addr), dialFront(t, addr)
	idle.do(get("/first"))
	busy.do(get("/first"))
	io.WriteString(busy.c, get("/hang"))
	<-hang
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		t.Fatal("Close waited for a node's answer")
	}
	if !idle.closed() {
		t.Error("an idle connection stayed open after Close")
	}
	if !busy.closed() {
		t.Error("a connection waiting for its node stayed open after Close")
	}
}

// TestKeepAliveLoopShutdown: a connection waiting in the loop when
// Shutdown begins may still send one request, answered with "Connection:
// close".
func TestKeepAliveLoopShutdown(t *testing.T) {
	addr, s, _ := startFront(t, Config{}, pathBackend(t, noWait))
	cl := dialFront(t, addr)
	cl.do(get("/first"))
	cl.expectBodyAfter(get("/second"), "/second") // waiting in the loop now
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(contextWithTimeout(t, 10*time.Second)) }()
	for !s.closing.Load() {
		time.Sleep(time.Millisecond)
	}
	resp, body := cl.do(get("/last"))
	if resp.StatusCode != 200 || body != "/last" || !resp.Close {
		t.Fatalf("request after Shutdown began: %d %q close=%v, want 200 \"/last\" with Connection: close", resp.StatusCode, body, resp.Close)
	}
	if !cl.closed() {
		t.Error("the connection stayed open after its last answer")
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
