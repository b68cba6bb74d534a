package up

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shoal/internal/cluster/control"
)

// waitSockets waits until the front has learned every node's handoff
// socket from its status report.
func waitSockets(t *testing.T, p *Procs) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, b := range p.Control.Backends() {
		for st := b.LastStatus(); st == nil || !strings.HasPrefix(st.HandoffSocket, p.SocketDir); st = b.LastStatus() {
			if time.Now().After(deadline) {
				t.Fatalf("node %s: no handoff socket reported", b.URL)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestKilledNodeRestarts checks node restarts: under load on the passfd
// path, kill -9 one node process. The cluster must keep serving (only
// requests that were at the dead node may fail: at most one per client
// connection open at that moment), `up` must not report the death as the
// end of the cluster (Err stays silent: `shoal up` exits on it), and the
// node must come back — a new pid, serving again and reported healthy.
func TestKilledNodeRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shoal binary")
	}
	dir := t.TempDir()
	site := filepath.Join(dir, "site")
	os.MkdirAll(site, 0o755)
	const nfiles = 24
	bodies := make([][]byte, nfiles)
	for i := range bodies {
		size := 2000 + 997*i
		if i%6 == 5 {
			size = 600 << 10 // above the cache threshold: sendfile
		}
		bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
		os.WriteFile(filepath.Join(site, fmt.Sprintf("f%d.txt", i)), bodies[i], 0o644)
	}
	var upLog bytes.Buffer
	var upLogMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&upLogMu, &upLog}, nil))

	p := startProcs(t, Config{Listen: "127.0.0.1:0", Admin: "off", Nodes: 3, Site: site,
		HealthInterval: 100 * time.Millisecond, Logger: logger}, "passfd")
	waitSockets(t, p)

	const workers = 8
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One connection per request: a failure is a request whose
			// connection was at the dead node, never a client's retry.
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := i % nfiles
				resp, err := client.Get(fmt.Sprintf("%sf%d.txt", p.URL, k))
				if err == nil {
					var got []byte
					got, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && (resp.StatusCode != 200 || !bytes.Equal(got, bodies[k])) {
						err = fmt.Errorf("f%d: status %d, %d bytes", k, resp.StatusCode, len(got))
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error()) // a string: errors differ in type
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("after 20 s: %s (ok %d, failed %d)", what, ok.Load(), failed.Load())
			}
		}
	}
	waitFor("200 requests before the kill", func() bool { return ok.Load() >= 200 })
	const victim = 1
	b := p.Control.Backends()[victim]
	oldPid := nodePid(p, victim)
	if err := syscall.Kill(oldPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stKill := b.LastStatus()
	okAtKill := ok.Load()
	waitFor("the node's pid changes", func() bool { return nodePid(p, victim) != oldPid })
	// A status stored after stKill may have been fetched just before the
	// kill; one stored after that comes from a check begun after it, so
	// from the restarted process: it must report the node up and serving.
	var st1 *control.Status
	waitFor("a status after the kill", func() bool { st1 = b.LastStatus(); return st1 != stKill })
	waitFor("the restarted node reports healthy and serving", func() bool {
		st := b.LastStatus()
		return st != st1 && st.Requests > 20 && p.Control.Nodes()[victim].Up
	})
	waitFor("1000 requests after the kill", func() bool { return ok.Load() >= okAtKill+1000 })
	close(stop)
	wg.Wait()

	t.Logf("ok %d, failed %d (first error: %v); node %d pid %d -> %d", ok.Load(), failed.Load(), firstErr.Load(), victim, oldPid, nodePid(p, victim))
	if f := failed.Load(); f > workers {
		t.Errorf("%d requests failed: more than the %d connections the dead node can have held; first: %v", f, workers, firstErr.Load())
	}
	select {
	case err := <-p.Err():
		t.Errorf("Err reported %v: `shoal up` would stop the whole cluster", err)
	default:
	}
	upLogMu.Lock()
	logged := upLog.String()
	upLogMu.Unlock()
	if !strings.Contains(logged, "restart") {
		t.Errorf("the restart is not logged:\n%s", logged)
	}
}

// lockedWriter serialises writes to a buffer shared with the test.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// nodePid is the process id of node i's latest process.
func nodePid(p *Procs, i int) int {
	return p.children[i].Pid()
}
