//go:build linux

package l4

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"shoal/internal/cluster/handoff"
	"shoal/internal/tools/loadgen"
)

// payload is the request size of the tests: large enough that a relay moves
// it in several splice(2) rounds and a handed-off socket is read in parts.
const payload = 100 << 10

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startNode runs an echoing loadgen.Sink on a loopback TCP port and a
// handoff socket, as `shoal bench sink --handoff-socket` does.
func startNode(t *testing.T) (Node, *handoff.FDListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "node.sock")
	fl, err := handoff.ListenFD(sock)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	s := &loadgen.Sink{Recv: payload, Echo: true}
	errs := make(chan error, 2)
	go func() { errs <- s.Serve(ln) }()
	go func() { errs <- s.Serve(fl) }()
	t.Cleanup(func() {
		s.Close()
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("sink: %v", err)
			}
		}
	})
	return Node{Addr: ln.Addr().String(), Socket: sock}, fl
}

// startFront runs a Front on a loopback port; Close is registered with the
// test, and the returned stop closes it early (to read final Stats).
func startFront(t *testing.T, cfg Config) (addr string, f *Front, stop func()) {
	t.Helper()
	cfg.Logger = quiet
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- f.Serve(ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			f.Close()
			if err := <-served; !errors.Is(err, ErrClosed) {
				t.Errorf("Serve returned %v, want ErrClosed", err)
			}
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), f, stop
}

// op is one seed-002 operation with a random payload: connect, send,
// (half-close when asked), read the echo, and compare checksums.
func op(addr string, halfClose bool) error { return opN(addr, payload, halfClose) }

// opN is op with an n-byte payload.
func opN(addr string, n int, halfClose bool) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	// A generous bound so that a broken front fails the test instead of
	// hanging it; it is no timing assertion.
	c.SetDeadline(time.Now().Add(30 * time.Second))
	req := make([]byte, n)
	rand.Read(req)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(req)
		if err == nil && halfClose {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if len(got) != len(req) || sha256.Sum256(got) != sha256.Sum256(req) {
		return fmt.Errorf("echo differs: sent %d bytes %x, got %d bytes %x", len(req), sha256.Sum256(req), len(got), sha256.Sum256(got))
	}
	return nil
}

// TestPaths moves concurrent checksummed connections through each path to
// two real sinks and checks that both nodes took part and that nothing
// failed.
func TestPaths(t *testing.T) {
	const clients, ops = 16, 8
	for _, path := range []Path{Relay, PassFD} {
		t.Run(string(path), func(t *testing.T) {
			n1, fl1 := startNode(t)
			n2, fl2 := startNode(t)
			addr, f, stop := startFront(t, Config{Nodes: []Node{n1, n2}, Path: path})
			var wg sync.WaitGroup
			errs := make(chan error, clients*ops)
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range ops {
						if err := op(addr, (i+j)%2 == 0); err != nil {
							errs <- err
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			stop()
			st := f.Stats()
			want := Stats{Accepted: clients * ops}
			if path == Relay {
				want.Relayed = clients * ops
			} else {
				want.Passed = clients * ops
			}
			if st != want {
				t.Errorf("stats %+v, want %+v", st, want)
			}
			r1, r2 := fl1.Stats().Received, fl2.Stats().Received
			if path == PassFD && (r1 == 0 || r2 == 0 || r1+r2 != clients*ops) {
				t.Errorf("nodes received %d and %d connections, want both > 0 summing to %d", r1, r2, clients*ops)
			}
			if path == Relay && r1+r2 != 0 {
				t.Errorf("relay handed off %d connections", r1+r2)
			}
		})
	}
}

// TestDeadNode: a client whose node is unreachable gets its connection
// ended (reset or end of file), not a hang; the node is then left out of
// the rotation, so with a live second node the next operations succeed.
func TestDeadNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()
	deadSock := filepath.Join(t.TempDir(), "gone.sock")
	dead := Node{Addr: deadAddr, Socket: deadSock}
	for _, path := range []Path{Relay, PassFD} {
		t.Run(string(path), func(t *testing.T) {
			addr, f, stop := startFront(t, Config{Nodes: []Node{dead}, Path: path})
			err := op(addr, false)
			if err == nil {
				t.Fatal("operation through a dead node succeeded")
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("client hung until its deadline: %v", err)
			}
			stop()
			if st := f.Stats(); st.Failed != 1 || st.Relayed+st.Passed != 0 {
				t.Errorf("stats %+v, want one failure", st)
			}
		})
		t.Run(string(path)+"+live", func(t *testing.T) {
			live, _ := startNode(t)
			addr, f, stop := startFront(t, Config{Nodes: []Node{dead, live}, Path: path, RetryAfter: time.Hour})
			failures := 0
			for range 10 {
				if op(addr, false) != nil {
					failures++
				}
			}
			stop()
			// rr tries the dead node first; after that it is out of the
			// rotation for RetryAfter.
			if st := f.Stats(); failures != 1 || st.Failed != 1 || st.Relayed+st.Passed != 9 {
				t.Errorf("%d client failures, stats %+v; want exactly the first operation to fail", failures, st)
			}
		})
	}
}

// TestConfig: New refuses what it cannot run.
func TestConfig(t *testing.T) {
	bad := []Config{
		{},
		{Nodes: []Node{{Addr: "127.0.0.1:1"}}, Path: "nat"},
		{Nodes: []Node{{Socket: "/x"}}, Path: Relay},
		{Nodes: []Node{{Addr: "127.0.0.1:1"}}, Path: PassFD},
		{Nodes: []Node{{Addr: "127.0.0.1:1"}}, Policy: "nosuch"},
	}
	for _, cfg := range bad {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	for _, w := range []string{"relay", "passfd"} {
		if p, err := ParsePath(w); err != nil || string(p) != w {
			t.Errorf("ParsePath(%q) = %q, %v", w, p, err)
		}
	}
}
