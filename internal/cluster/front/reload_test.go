package front

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/cluster/control"
)

// TestReloadDropsNoRequest: a reload that replaces the data plane (the
// limits) starts a new server on a second descriptor of the listening
// socket and shuts the old one down while keep-alive clients go on
// sending. No request may fail: the old server answers a request that
// reaches one of its connections (with Connection: close) and never closes
// a connection on a request it has not read, which the kernel turns into a
// reset.
func TestReloadDropsNoRequest(t *testing.T) {
	a := namedBackend(t, "A")
	cl, err := control.New(&rrPolicy{}, []control.NodeSpec{{URL: a.URL}}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old, err := New(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveFront(t, old, ln)
	addr := ln.Addr().String()

	cs := startKeepAliveClients(addr, 32)
	ok, failed, reconnects := &cs.ok, &cs.failed, &cs.reconnects
	for ok.Load() < 500 {
		time.Sleep(5 * time.Millisecond)
	}
	// The reload, as `shoal front` does it (cmd/shoal/reload.go).
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	ln2, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := New(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	serveFront(t, fresh, ln2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := old.Shutdown(ctx); err != nil {
		t.Errorf("old server's shutdown: %v", err)
	}
	before := ok.Load()
	for ok.Load() < before+500 {
		time.Sleep(5 * time.Millisecond)
	}
	cs.stop()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d requests failed across the reload; first: %v", n, n+ok.Load(), cs.firstErr.Load())
	}
	if reconnects.Load() < 32 {
		t.Errorf("%d reconnections, want every client moved to the new server (32)", reconnects.Load())
	}
	t.Logf("%d requests, %d reconnections", ok.Load(), reconnects.Load())
}

// keepAliveClients are n clients, each sending GETs one after another on a
// keep-alive connection, reconnecting when an answer says Connection:
// close, and counting answers, failures (and the first failure) and
// reconnections.
type keepAliveClients struct {
	ok, failed, reconnects atomic.Int64
	firstErr               atomic.Value
	done                   chan struct{}
	wg                     sync.WaitGroup
}

func startKeepAliveClients(addr string, n int) *keepAliveClients {
	cs := &keepAliveClients{done: make(chan struct{})}
	for i := range n {
		cs.wg.Add(1)
		go cs.run(addr, i)
	}
	return cs
}

func (cs *keepAliveClients) stop() { close(cs.done); cs.wg.Wait() }

func (cs *keepAliveClients) fail(err error) {
	cs.failed.Add(1)
	cs.firstErr.CompareAndSwap(nil, err.Error()) // a string: errors differ in type
}

func (cs *keepAliveClients) run(addr string, i int) {
	defer cs.wg.Done()
	var c net.Conn
	var br *bufio.Reader
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	onConn := 0
	for n := 0; ; n++ {
		select {
		case <-cs.done:
			return
		default:
		}
		if c == nil {
			var err error
			if c, err = net.Dial("tcp", addr); err != nil {
				cs.fail(err)
				return
			}
			br, onConn = bufio.NewReader(c), 0
		}
		onConn++
		c.SetDeadline(time.Now().Add(10 * time.Second))
		resp, err := getOn(c, br, fmt.Sprintf("/c%d/%d", i, n))
		if err != nil {
			cs.fail(fmt.Errorf("request %d on client %d (%d on its connection): %v", n, i, onConn, err))
			c.Close()
			c = nil
			continue
		}
		cs.ok.Add(1)
		if resp.Close {
			cs.reconnects.Add(1)
			c.Close()
			c = nil
		}
	}
}

// getOn sends GET path on c and reads the whole answer, which must be 200.
func getOn(c net.Conn, br *bufio.Reader, path string) (*http.Response, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if _, err = io.Copy(io.Discard, resp.Body); err != nil {
		return nil, fmt.Errorf("body of a %d response: %w", resp.StatusCode, err)
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp, nil
}
