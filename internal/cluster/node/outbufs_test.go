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
