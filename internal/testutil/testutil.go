// Package testutil holds what the tests of several packages share and each
// used to copy: re-running the test binary as a helper process (helper.go)
// and waiting for its READY line (the lab tests of internal/cluster/handoff and
// internal/cluster/l4 start such helpers inside network namespaces), a loopback TCP
// connection pair (net.go), serving a server on a loopback port for the
// length of a test, an admin API call with its bearer token (http.go), a
// buffer that a process's output goroutine may write while the test reads
// it, document trees and bodies (tree.go), and a check of written figures
// (figure.go). Only _test.go files import it, and it imports no shoal
// package, so any package's tests can use it.
package testutil

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// ReadyTimeout bounds how long StartReady waits for the READY line.
const ReadyTimeout = 20 * time.Second

// Proc is a process started by StartReady.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{} // closed once all of its stdout was read
}

// Wait returns the process's exit status once all its output was read
// (exec.Cmd.Wait alone may close the pipe before the last line is read).
func (p *Proc) Wait() error {
	<-p.done
	return p.Cmd.Wait()
}

// StartReady starts cmd with its stdin and stdout piped and returns once it
// printed a line "READY"; its later stdout lines are copied to out (nil:
// dropped). It fails the test if cmd exits before READY or does not print
// it within ReadyTimeout (what names it in the message), and kills it when
// the test ends.
func StartReady(t testing.TB, cmd *exec.Cmd, out io.Writer, what string) (*Proc, io.WriteCloser) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() { cmd.Process.Kill(); <-p.done; cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			switch {
			case !ok && sc.Text() == "READY":
				ok = true
				ready <- true
			case out != nil:
				fmt.Fprintln(out, sc.Text())
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("%s exited before READY", what)
		}
	case <-time.After(ReadyTimeout):
		t.Fatalf("%s not ready after %v", what, ReadyTimeout)
	}
	return p, stdin
}

// SyncBuf is a bytes.Buffer safe for one goroutine writing (a process's
// output) while another reads String.
type SyncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Server is what Serve runs: net/http's Server and shoal's node and front
// servers all have these two methods.
type Server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// Serve runs srv on a fresh 127.0.0.1 port until the test ends (then shuts
// it down, waiting at most 5 s) and returns the address, "127.0.0.1:port".
func Serve(t testing.TB, srv Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// WaitOrKill waits for cmd, already told to stop (a signal, stdin closed),
// to exit, and kills it if it has not after grace.
func WaitOrKill(cmd *exec.Cmd, grace time.Duration) {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
	}
}
