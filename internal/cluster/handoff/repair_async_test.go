//go:build linux

package handoff

import (
	"bufio"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// fakeNode is a handoff port that answers the n-th MsgHandoff (counted
// over all its channels) with answer(n): a status byte, or -1 for no answer
// at all.
func fakeNode(t *testing.T, a *Auth, answer func(n int) int) (addr string, conns chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = make(chan net.Conn, 4)
	var seq atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				ap, _ := addrPortOf(c.LocalAddr())
				na, err := a.ForNode(ap)
				if err != nil {
					return
				}
				var buf []byte
				for {
					if buf, err = readFrame(r, buf, na, ToNode, nil, 0); err != nil {
						return
					}
					k, p, err := na.Open(buf, ToNode)
					if err != nil || k != MsgHandoff {
						continue
					}
					st := answer(int(seq.Add(1) - 1))
					if st < 0 {
						continue
					}
					ack := append(append([]byte(nil), p[:8]...), byte(st))
					if st != 0 {
						ack = append(ack, "refused"...)
					}
					if _, err := c.Write(na.Seal(nil, ToFront, MsgHandoffAck, ack)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), conns
}

func testState() *TCPState {
	return &TCPState{Local: netip.MustParseAddrPort("10.0.0.1:80"), Remote: netip.MustParseAddrPort("10.0.0.2:4000"),
		MSS: 1460, RecvQueue: []byte("GET / HTTP/1.1\r\n\r\n")}
}

// waitDone waits for one callback result.
func waitDone(t *testing.T, ch chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("no callback")
		return nil
	}
}

// TestRepairHandoffAsync: HandoffAsync refuses before the channel exists
// (nothing sent), then reports each answer exactly once through its
// callback: success, a clean refusal (ErrRebuildFailed), no answer (an
// unknown outcome after the timeout), and a channel that breaks or is
// closed with answers outstanding.
func TestRepairHandoffAsync(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	nodeAuth, _ := NewAuth(key, 0)
	answers := []int{0, 0, 1, -1, -1, -1}
	addr, conns := fakeNode(t, nodeAuth, func(n int) int {
		if n < len(answers) {
			return answers[n]
		}
		return -1
	})
	frontAuth, _ := NewAuth(key, 0)
	var downs atomic.Int32
	c := NewRepairClient(RepairClientConfig{Addr: addr, Auth: frontAuth, Timeout: 400 * time.Millisecond,
		OnDown: func(error) { downs.Add(1) }})
	defer c.Close()

	never := func(error) { t.Error("callback after a refused HandoffAsync") }
	if err := c.HandoffAsync(testState(), never); !errors.Is(err, ErrNoChannel) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("before the first Handoff: %v, want ErrNoChannel", err)
	}
	if err := c.Handoff(testState()); err != nil { // dials; answer 0
		t.Fatalf("Handoff: %v", err)
	}
	node := <-conns

	calls := make(chan error, 8)
	var count atomic.Int32
	done := func(err error) { count.Add(1); calls <- err }
	if err := c.HandoffAsync(testState(), done); err != nil { // answer 0
		t.Fatal(err)
	}
	if err := waitDone(t, calls); err != nil {
		t.Fatalf("acknowledged handoff: %v", err)
	}
	if err := c.HandoffAsync(testState(), done); err != nil { // answer 1
		t.Fatal(err)
	}
	if err := waitDone(t, calls); !errors.Is(err, ErrRebuildFailed) {
		t.Fatalf("refused handoff: %v, want ErrRebuildFailed", err)
	}
	if err := c.HandoffAsync(testState(), done); err != nil { // no answer
		t.Fatal(err)
	}
	if err := waitDone(t, calls); err == nil || errors.Is(err, ErrRebuildFailed) || errors.Is(err, ErrNotSent) {
		t.Fatalf("unanswered handoff: %v, want an unknown outcome", err)
	}
	// Two outstanding when the node's end of the channel goes away.
	for range 2 {
		if err := c.HandoffAsync(testState(), done); err != nil {
			t.Fatal(err)
		}
	}
	node.Close()
	for range 2 {
		if err := waitDone(t, calls); err == nil || errors.Is(err, ErrRebuildFailed) || errors.Is(err, ErrNotSent) {
			t.Fatalf("handoff on a broken channel: %v, want an unknown outcome", err)
		}
	}
	if downs.Load() != 1 {
		t.Errorf("OnDown called %d times, want 1", downs.Load())
	}
	// A new channel (Handoff dials again; no answers from here on), and
	// Close with one outstanding.
	go c.Handoff(testState())
	<-conns
	for c.HandoffAsync(testState(), done) != nil {
		time.Sleep(10 * time.Millisecond) // until the redial is done
	}
	c.Close()
	if err := waitDone(t, calls); err == nil {
		t.Fatal("handoff outstanding at Close reported success")
	}
	time.Sleep(100 * time.Millisecond)
	if n := count.Load(); n != 6 {
		t.Errorf("%d callbacks for 6 sent handoffs", n)
	}
	if err := c.HandoffAsync(testState(), never); !errors.Is(err, ErrNotSent) {
		t.Errorf("after Close: %v, want ErrNotSent", err)
	}
}
