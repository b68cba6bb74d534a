//go:build linux

package uring

import (
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// newRing makes a ring for the calling test, which it locks to its thread
// (the ring is single-issuer) until the test ends.
func newRing(t *testing.T) *Ring {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	r, err := New(4)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func fdOf(t *testing.T, c net.Conn) int {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// A linked send and receive, then a drop of a body's remainder, each
// completing with its own user data and byte count.
func TestSendRecvDiscard(t *testing.T) {
	r := newRing(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 5)
		if _, err := c.Read(b); err == nil && string(b) == "hello" {
			c.Write([]byte("world, and 20 more bytes"))
		}
		time.Sleep(100 * time.Millisecond)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fd := fdOf(t, c)
	if r.Room() != 4 {
		t.Fatalf("room %d, want 4", r.Room())
	}
	got := map[uint64]int32{}
	reap := func(u uint64, res int32) { got[u] = res }
	buf := make([]byte, 5)
	r.Send(fd, []byte("hello"), true, 1)
	r.Recv(fd, buf, 0, 2)
	for deadline := time.Now().Add(5 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
		if err := r.Enter(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		r.Reap(reap)
	}
	if got[1] != 5 || got[2] != 5 || string(buf) != "world" {
		t.Fatalf("send %d recv %d %q, want 5 5 \"world\"", got[1], got[2], buf)
	}
	r.Discard(fd, 19, 3)
	for deadline := time.Now().Add(5 * time.Second); got[3] == 0 && time.Now().Before(deadline); {
		r.Enter(100 * time.Millisecond)
		r.Reap(reap)
	}
	if got[3] != 19 {
		t.Fatalf("discard %d, want 19", got[3])
	}
	// Nothing left: a wait ends at its timeout with no completion.
	start := time.Now()
	r.Recv(fd, buf, syscall.MSG_DONTWAIT, 4)
	r.Enter(50 * time.Millisecond)
	if n := r.Reap(reap); n != 1 || got[4] != -int32(syscall.EAGAIN) {
		t.Errorf("a receive with nothing to read: %d completions, res %d, want 1, -EAGAIN", n, got[4])
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Enter waited %v", d)
	}
}

// A full queue refuses more rather than overwrite what is queued.
func TestQueueFull(t *testing.T) {
	r := newRing(t)
	b := make([]byte, 1)
	for i := 0; i < 4; i++ {
		if !r.Recv(-1, b, 0, uint64(i)) {
			t.Fatalf("queue full after %d", i)
		}
	}
	if r.Room() != 0 || r.Recv(-1, b, 0, 9) {
		t.Fatalf("room %d, a fifth accepted", r.Room())
	}
	r.Enter(time.Millisecond)
	n := 0
	r.Reap(func(_ uint64, res int32) {
		if res == -int32(syscall.EBADF) {
			n++
		}
	})
	if n != 4 || r.Room() != 4 {
		t.Errorf("%d EBADF completions, room %d; want 4, 4", n, r.Room())
	}
}
