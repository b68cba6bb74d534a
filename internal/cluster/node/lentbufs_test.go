package node

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Conns answering pipelined batches of cached 12 KB files grow their output
// buffers past a response; once a batch is out, each holds only its own small
// buffer again and the grown ones wait, a bounded few, for the next batch.
// Before, every open connection kept the buffer its largest batch grew.
func TestIdleConnsHoldNoGrownOutput(t *testing.T) {
	root := t.TempDir()
	body := bytes.Repeat([]byte("y"), 12<<10)
	if err := os.WriteFile(filepath.Join(root, "f.bin"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	batch := strings.Repeat("GET /f.bin HTTP/1.1\r\nHost: t\r\n\r\n", 3)
	now := time.Now()
	var conns []*conn
	var outs []*captureConn
	for range 8 {
		cc := &captureConn{}
		conns, outs = append(conns, newConn(srv, cc)), append(outs, cc)
	}
	for round := range 2 {
		for i, c := range conns {
			c.r, c.w = 0, copy(c.buf, batch)
			if !c.process(now) {
				t.Fatalf("round %d, conn %d closed", round, i)
			}
			if cap(c.out) > 4<<10 {
				t.Errorf("round %d, conn %d keeps a %d-byte output buffer after its batch", round, i, cap(c.out))
			}
		}
	}
	for i, cc := range outs {
		if got := bytes.Count(cc.out.Bytes(), body); got != 6 {
			t.Errorf("conn %d sent %d whole bodies, want 6", i, got)
		}
	}
}

// A free list keeps at most its bound and hands items back last in,
// first out, then the zero value.
func TestFreeListBound(t *testing.T) {
	var f freeList[[]byte]
	for i := range 3 * maxOutBufs {
		f.put(make([]byte, 0, 1+i), maxOutBufs)
	}
	if len(f.list) != maxOutBufs {
		t.Errorf("%d kept, want %d", len(f.list), maxOutBufs)
	}
	for i := maxOutBufs; i > 0; i-- {
		if b := f.get(); cap(b) != i {
			t.Errorf("got capacity %d, want %d (the last kept first)", cap(b), i)
		}
	}
	if b := f.get(); b != nil {
		t.Errorf("an empty list gave a buffer of capacity %d", cap(b))
	}
}

// scriptConn hands out its reads in the chunks given (a read takes what
// fits of the next chunk), then io.EOF, and keeps what is written.
type scriptConn struct {
	captureConn
	reads [][]byte
}

func (s *scriptConn) Read(p []byte) (int, error) {
	if len(s.reads) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.reads[0])
	if s.reads[0] = s.reads[0][n:]; len(s.reads[0]) == 0 {
		s.reads = s.reads[1:]
	}
	return n, nil
}

// A conn reads into its own 4 KiB buffer; a pipelined batch that fills it
// and a head larger than it are read on into a full-size buffer lent by the
// server, which goes back as soon as every byte in it is parsed. Every
// request is answered. Before, each conn kept a full-size buffer
// (MaxHead + 4 KiB, 13 KiB by default) for as long as it stayed open.
func TestConnsLendFullReadBuffers(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	get := "GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n"
	batch := strings.Repeat(get, 130) // 4,290 bytes: more than a conn's own buffer
	big := "GET /f.txt HTTP/1.1\r\nHost: t\r\nX-Pad: " + strings.Repeat("p", 6<<10) + "\r\n\r\n"
	sc := &scriptConn{reads: [][]byte{[]byte(batch), []byte(get), []byte(big)}}
	c := newConn(srv, sc)
	now := time.Now()
	full := srv.cfg.MaxHead + 4096
	// want is len(c.buf) after each read: the batch fills the own buffer,
	// is read on in a lent one, which goes back before the next request;
	// the large head likewise.
	for i, want := range []int{ownIn, full, ownIn, ownIn, full} {
		n, err := c.read()
		if n <= 0 || err != nil {
			t.Fatalf("read %d: %d bytes, %v", i, n, err)
		}
		if len(c.buf) != want {
			t.Errorf("read %d: a %d-byte read buffer, want %d", i, len(c.buf), want)
		}
		c.w += n
		if !c.process(now) {
			t.Fatalf("read %d: connection closed", i)
		}
	}
	if n, err := c.read(); n != 0 || err != io.EOF {
		t.Fatalf("last read: %d bytes, %v; want the end", n, err)
	}
	if len(c.buf) != ownIn || len(srv.inBufs.list) != 1 {
		t.Errorf("idle: a %d-byte read buffer and %d lent kept, want %d and 1", len(c.buf), len(srv.inBufs.list), ownIn)
	}
	if got := strings.Count(sc.out.String(), "HTTP/1.1 200 OK"); got != 132 {
		t.Errorf("%d answers, want 132", got)
	}
}
