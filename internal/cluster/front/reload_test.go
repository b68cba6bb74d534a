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

	var ok, failed, reconnects atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				case <-stop:
					return
				default:
				}
				if c == nil {
					var err error
					if c, err = net.Dial("tcp", addr); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
						return
					}
					br = bufio.NewReader(c)
					onConn = 0
				}
				onConn++
				c.SetDeadline(time.Now().Add(10 * time.Second))
				_, err := fmt.Fprintf(c, "GET /c%d/%d HTTP/1.1\r\nHost: x\r\n\r\n", i, n)
				var resp *http.Response
				if err == nil {
					resp, err = http.ReadResponse(br, nil)
				}
				if err == nil {
					if _, err = io.Copy(io.Discard, resp.Body); err != nil {
						err = fmt.Errorf("body of a %d response: %w", resp.StatusCode, err)
					}
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("request %d on client %d (%d on its connection): %v", n, i, onConn, err))
					c.Close()
					c = nil
					continue
				}
				ok.Add(1)
				if resp.Close {
					reconnects.Add(1)
					c.Close()
					c = nil
				}
			}
		}()
	}
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
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d requests failed across the reload; first: %v", n, n+ok.Load(), firstErr.Load())
	}
	if reconnects.Load() < 32 {
		t.Errorf("%d reconnections, want every client moved to the new server (32)", reconnects.Load())
	}
	t.Logf("%d requests, %d reconnections", ok.Load(), reconnects.Load())
}
