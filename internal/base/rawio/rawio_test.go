//go:build unix

package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"shoal/internal/testutil"
	"syscall"
	"testing"
	"time"
)

func TestConnWriteRead(t *testing.T) {
	big := make([]byte, 8<<20) // larger than the socket buffers: partial writes and waits
	for i := range big {
		big[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name string
		a, b []byte
	}{
		{"head only", []byte("HTTP/1.1 200 OK\r\n\r\n"), nil},
		{"head and body", []byte("head:"), []byte("body")},
		{"body only", nil, []byte("body")},
		{"large body", []byte("head:"), big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := testutil.TCPPair(t)
			var w, r Conn
			if !w.Bind(s) || !r.Bind(c) {
				t.Fatal("a TCP connection did not bind")
			}
			want := append(append([]byte(nil), tc.a...), tc.b...)
			done := make(chan error, 1)
			go func() {
				n, err := w.Write(tc.a, tc.b)
				if err == nil && n != len(want) {
					err = errors.New("short write")
				}
				s.Close()
				done <- err
			}()
			got := make([]byte, 0, len(want))
			buf := make([]byte, 64<<10)
			for {
				n, err := r.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("read %d bytes, want %d (or different bytes)", len(got), len(want))
			}
		})
	}
}

func TestConnReadDeadline(t *testing.T) {
	c, _ := testutil.TCPPair(t)
	var r Conn
	r.Bind(c)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := r.Read(make([]byte, 10))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%v is not a net.Error timeout", err)
	}
}

func TestBindOnlyTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var c Conn
	if c.Bind(a) || c.Active() {
		t.Fatal("bound a net.Pipe")
	}
}

// TestLoopKeepsReadiness: within one Loop, bytes that arrive while the
// callback runs, after its last read came back short, wake the next wait:
// the guarantee that lets a caller wait without the read that would answer
// EAGAIN. If Go's poller forgot readiness between the calls of one
// RawConn.Read, this would hang.
func TestLoopKeepsReadiness(t *testing.T) {
	c, s := testutil.TCPPair(t)
	var r Conn
	r.Bind(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	got, calls := 0, 0
	err := r.Loop(func(fd uintptr) bool {
		calls++
		if calls == 1 {
			s.Write([]byte("a")) // arrives before the first read
		}
		for {
			n, err := Read(int(fd), buf)
			if err != nil || n == 0 {
				return err != syscall.EAGAIN // EAGAIN: wait
			}
			got += n
			if got == 3 {
				return true
			}
			if n < len(buf) { // short: drained; now more arrives before the wait
				s.Write([]byte("b"))
				time.Sleep(20 * time.Millisecond)
				return false
			}
		}
	})
	if err != nil || got != 3 {
		t.Fatalf("Loop: %v, %d bytes read, want 3", err, got)
	}
}

// TestLoopShutdown: Shutdown from another goroutine wakes a Loop waiting
// for bytes, whose read then answers the end of the stream.
func TestLoopShutdown(t *testing.T) {
	c, _ := testutil.TCPPair(t)
	var r Conn
	r.Bind(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	go func() {
		time.Sleep(20 * time.Millisecond)
		r.Shutdown()
	}()
	var n int
	var rerr error
	err := r.Loop(func(fd uintptr) bool {
		n, rerr = Read(int(fd), make([]byte, 8))
		return rerr != syscall.EAGAIN
	})
	if err != nil || rerr != nil || n != 0 {
		t.Fatalf("Loop: %v; last read %d, %v; want the end of the stream", err, n, rerr)
	}
}

// fdOf is c's descriptor (valid while c is open).
func fdOf(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// TestTryReadWrite: TryRead answers again on an empty socket, the bytes
// once they are there and io.EOF at the end; TryWrite answers again with
// the bytes a full socket took.
func TestTryReadWrite(t *testing.T) {
	c, s := testutil.TCPPair(t)
	fd := fdOf(t, c)
	buf := make([]byte, 16)
	if n, again, err := TryRead(fd, buf); !again || n != 0 || err != nil {
		t.Fatalf("empty socket: %d, %v, %v; want again", n, again, err)
	}
	s.Write([]byte("ab"))
	time.Sleep(20 * time.Millisecond)
	if n, again, err := TryRead(fd, buf); n != 2 || again || err != nil {
		t.Fatalf("after 2 bytes: %d, %v, %v", n, again, err)
	}
	s.CloseWrite()
	time.Sleep(20 * time.Millisecond)
	if n, again, err := TryRead(fd, buf); n != 0 || again || err != io.EOF {
		t.Fatalf("after the peer's FIN: %d, %v, %v; want io.EOF", n, again, err)
	}

	c.SetWriteBuffer(1) // the kernel's minimum; the peer reads nothing
	s.SetReadBuffer(1)
	big := make([]byte, 8<<20)
	n, again, err := TryWrite(fd, big)
	if !again || err != nil || n <= 0 || n >= len(big) {
		t.Fatalf("TryWrite of %d bytes to a peer that does not read: %d, %v, %v; want again after part", len(big), n, again, err)
	}
	s.Close()
	time.Sleep(20 * time.Millisecond)
	for i := 0; i < 3 && err == nil; i++ { // the RST of the closed peer fails a write
		_, _, err = TryWrite(fd, big[:1])
	}
	if err == nil {
		t.Fatal("TryWrite to a peer that closed with unread bytes did not fail")
	}
}

// TestConnTryWrite: Conn.TryWrite takes what the socket takes and returns
// without waiting for a peer that does not read.
func TestConnTryWrite(t *testing.T) {
	c, s := testutil.TCPPair(t)
	var rc Conn
	if !rc.Bind(c) {
		t.Fatal("Bind failed on a TCP connection")
	}
	if n, err := rc.TryWrite([]byte("ab"), []byte("cd")); n != 4 || err != nil {
		t.Fatalf("small write: %d, %v", n, err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "abcd" {
		t.Fatalf("peer read %q, %v", got, err)
	}
	c.SetWriteBuffer(1)
	s.SetReadBuffer(1)
	big := make([]byte, 8<<20)
	done := make(chan struct{})
	var n int
	var err error
	go func() { n, err = rc.TryWrite([]byte("head"), big); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("TryWrite waited for a peer that does not read")
	}
	if err != nil || n <= 0 || n >= len(big)+4 {
		t.Fatalf("TryWrite to a peer that does not read: %d, %v; want part", n, err)
	}
}

// TestDiscard: Discard drops exactly what it is asked for (waiting for
// bytes still in flight), leaves what follows to Read, and reports the end
// of the stream.
func TestDiscard(t *testing.T) {
	c, s := testutil.TCPPair(t)
	var r Conn
	if !r.Bind(c) {
		t.Fatal("a TCP connection did not bind")
	}
	body := make([]byte, 300<<10) // more than one read's worth of segments
	go func() {
		s.Write(body)
		time.Sleep(5 * time.Millisecond) // the tail arrives while Discard waits
		s.Write([]byte("tail"))
		s.Close()
	}()
	left := len(body)
	for left > 0 {
		n, err := r.Discard(left)
		if err != nil || n <= 0 || n > left {
			t.Fatalf("Discard(%d) = %d, %v", left, n, err)
		}
		left -= n
	}
	got, err := io.ReadAll(readerFunc(r.Read))
	if err != nil || string(got) != "tail" {
		t.Fatalf("after the discard read %q, %v; want \"tail\"", got, err)
	}
	if n, err := r.Discard(10); n != 0 || err != io.EOF {
		t.Fatalf("Discard at the end = %d, %v; want 0, io.EOF", n, err)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
