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

// The buffers kept for lending are bounded: a burst of conns each growing
// its own leaves at most maxOutBufs behind, none larger than maxLentOut.
func TestOutBufsBound(t *testing.T) {
	var o outBufs
	for i := range 3 * maxOutBufs {
		o.put(make([]byte, 10, 8<<10+i))
	}
	o.put(make([]byte, 0, 2*maxLentOut))
	if len(o.list) != maxOutBufs {
		t.Errorf("%d buffers kept, want %d", len(o.list), maxOutBufs)
	}
	for range maxOutBufs {
		if b := o.get(); len(b) != 0 || cap(b) < 8<<10 || cap(b) > maxLentOut {
			t.Errorf("lent a buffer of length %d, capacity %d", len(b), cap(b))
		}
	}
	if b := o.get(); b != nil {
		t.Errorf("lent a buffer from an empty list: capacity %d", cap(b))
	}
}
