package accept

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestBackoff: 5 ms doubling to 1 s, and back to 5 ms after a success.
func TestBackoff(t *testing.T) {
	var b Backoff
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d = %v, want %v ms", i, got, w)
		}
	}
	b.Reset()
	if got := b.Next(); got != FirstWait {
		t.Errorf("after Reset: %v, want %v", got, FirstWait)
	}
}

// script is a listener whose Accept returns its steps in order.
type script struct {
	net.Listener
	steps []error // nil: a connection
}

func (s *script) Accept() (net.Conn, error) {
	err := s.steps[0]
	s.steps = s.steps[1:]
	if err != nil {
		return nil, err
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

// TestLoop: descriptor exhaustion is retried with growing waits that a
// connection resets; only a closed listener ends the loop.
func TestLoop(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Err: syscall.EMFILE}
	ln := &script{steps: []error{emfile, emfile, nil, emfile, nil, nil, net.ErrClosed}}
	var waits []time.Duration
	conns := 0
	err := Loop(ln, func(c net.Conn) { conns++; c.Close() }, func(err error, d time.Duration) {
		if !errors.Is(err, syscall.EMFILE) {
			t.Errorf("retried %v", err)
		}
		waits = append(waits, d)
	})
	if !Closed(err) {
		t.Errorf("Loop returned %v, want the listener's close", err)
	}
	if conns != 3 {
		t.Errorf("%d connections handled, want 3", conns)
	}
	want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 5 * time.Millisecond}
	if len(waits) != len(want) || waits[0] != want[0] || waits[1] != want[1] || waits[2] != want[2] {
		t.Errorf("waits %v, want %v", waits, want)
	}
}
