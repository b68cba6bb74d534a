package front

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// TestBatcherPartialHeadGoesTheOrdinaryWay: a head larger than the socket
// buffers cannot go out in the batcher's one non-blocking write; the
// waiting goroutine is woken, sends the rest itself, and its read deadline
// is usable again afterwards. The node reads only after a pause, so the
// first write is certainly partial.
func TestBatcherPartialHeadGoesTheOrdinaryWay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	head := bytes.Repeat([]byte("x"), 4<<20) // far beyond any socket buffer
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		time.Sleep(50 * time.Millisecond)
		b := make([]byte, len(head))
		if _, err := io.ReadFull(c, b); err != nil {
			got <- nil
			return
		}
		got <- b
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc := newNodeConn(c)
	defer nc.c.Close()
	done := make(chan struct{})
	defer close(done)
	b := newBatcher(done)
	if err := nc.sendAwait(head, b); err != nil {
		t.Fatalf("sendAwait: %v", err)
	}
	if nc.flushed.Load() != flushKicked {
		t.Fatalf("flushed = %d, want flushKicked: the test did not exercise the partial write", nc.flushed.Load())
	}
	if b := <-got; !bytes.Equal(b, head) {
		t.Fatalf("node got %d bytes, not the head", len(b))
	}
	nc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := nc.in.fill(nc.c); err != nil || !bytes.HasPrefix(nc.in.bytes(), []byte("HTTP/1.1 204")) {
		t.Fatalf("reading the answer after the kick: %d %v %q", n, err, nc.in.bytes())
	}
}

// TestBatcherAfterCloseWritesInline: once the server is done, a head is
// written by its own goroutine rather than queued for a batcher that has
// stopped.
func TestBatcherAfterCloseWritesInline(t *testing.T) {
	done := make(chan struct{})
	b := newBatcher(done)
	close(done)
	for deadline := time.Now().Add(5 * time.Second); ; {
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("batcher did not stop after done")
		}
		time.Sleep(time.Millisecond)
	}
	a, z := testutil.TCPPair(t)
	nc := newNodeConn(a)
	got := make(chan string, 1)
	go func() { // the node answers once it has the request
		buf := make([]byte, 64)
		z.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := z.Read(buf)
		got <- string(buf[:n])
		io.WriteString(z, "HTTP/1.1 204 No Content\r\n\r\n")
	}()
	nc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := nc.sendAwait([]byte("GET / HTTP/1.1\r\n\r\n"), b); err != nil {
		t.Fatalf("sendAwait: %v", err)
	}
	if nc.flushed.Load() != flushDone {
		t.Fatalf("flushed = %d, want flushDone", nc.flushed.Load())
	}
	if r := <-got; r != "GET / HTTP/1.1\r\n\r\n" {
		t.Fatalf("node got %q", r)
	}
	if !nc.awaited || nc.rerr != nil || !bytes.HasPrefix(nc.in.bytes(), []byte("HTTP/1.1 204")) {
		t.Fatalf("answer: awaited %v, err %v, %q", nc.awaited, nc.rerr, nc.in.bytes())
	}
}

// TestBatcherCountsEveryHead: each relayed request without a body goes out
// through the batcher (BatchMin 1: even a request alone), and Stats counts
// it; with NoBatch none does.
func TestBatcherCountsEveryHead(t *testing.T) {
	for _, noBatch := range []bool{false, true} {
		a := namedBackend(t, "A")
		addr, s, _ := startFront(t, Config{noBatch: noBatch, batchMin: 1}, a.URL)
		c := dialFront(t, addr)
		const n = 5
		for i := range n {
			if resp, body := c.do(get("/x")); resp.StatusCode != 200 || body != "A /x" {
				t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
			}
		}
		st := s.Stats()
		want := uint64(n)
		if noBatch {
			want = 0
		}
		if st.HeadsBatched != want || st.HeadBatches < min(want, 1) || st.HeadBatches > want {
			t.Fatalf("NoBatch=%v: %d heads in %d batches, want %d heads", noBatch, st.HeadsBatched, st.HeadBatches, want)
		}
	}
}

// TestBatcherReadFailsFirst: when the wait cannot even start (the
// connection is already closed), sendAwait returns the error instead of
// waiting for a batch that was never asked for.
func TestBatcherReadFailsFirst(t *testing.T) {
	a, _ := testutil.TCPPair(t)
	nc := newNodeConn(a)
	a.Close()
	done := make(chan struct{})
	defer close(done)
	errc := make(chan error, 1)
	go func() { errc <- nc.sendAwait([]byte("GET / HTTP/1.1\r\n\r\n"), newBatcher(done)) }()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("sendAwait on a closed connection returned nil")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sendAwait hung on a connection closed before the wait")
	}
}
