package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// TestFrontLimitsReloadUnderLoad: `shoal front --config`, 32 keep-alive
// clients sending without pause, and a SIGHUP that changes [limits] (a
// new data plane on the same socket): no request fails. The old data
// plane used to close connections with a request unread, and the kernel
// reset them (8 resets in a 32-connection bench).
func TestFrontLimitsReloadUnderLoad(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer node.Close()
	cfg := filepath.Join(t.TempDir(), "front.toml")
	listen := freeAddr(t)
	write := func(idle string) {
		body := fmt.Sprintf("listen = %q\nadmin = \"off\"\n[health]\ninterval = \"0s\"\n[limits]\nidle_timeout = %q\n[[node]]\nurl = %q\n", listen, idle, node.URL)
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("60s")
	var stderr testutil.SyncBuf
	cmd := startMain(t, &stderr, "front", "--config", cfg, "--sysmon-idle=false")
	for end := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "serving"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("front not serving; stderr:\n%s", stderr.String())
		}
	}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c net.Conn
			var br *bufio.Reader
			for {
				select {
				case <-stop:
					if c != nil {
						c.Close()
					}
					return
				default:
				}
				if c == nil {
					var err error
					if c, err = net.Dial("tcp", listen); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error()) // a string: errors differ in type
						return
					}
					br = bufio.NewReader(c)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error()) // a string: errors differ in type
					c.Close()
					c = nil
					continue
				}
				ok.Add(1)
				if resp.Close {
					c.Close()
					c = nil
				}
			}
		}()
	}
	for ok.Load() < 500 {
		time.Sleep(5 * time.Millisecond)
	}
	write("61s")
	cmd.Process.Signal(syscall.SIGHUP)
	for end := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "configuration reloaded"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no reload; stderr:\n%s", stderr.String())
		}
	}
	for n := ok.Load() + 1000; ok.Load() < n; {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d requests failed across a [limits] reload; first: %v", n, n+ok.Load(), firstErr.Load())
	}
}
