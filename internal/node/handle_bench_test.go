package node

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// discardConn is a net.Conn whose writes vanish, so a benchmark measures
// the server's own work per request without the network.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error) { return len(b), nil }
func (discardConn) Close() error                { return nil }

// BenchmarkHandleCached1K is the server's CPU per cached 1 KB GET: parse,
// lookup, cache hit, response head and body into the output buffer, and
// the write, in process (no syscalls). It isolates the request path from
// the loopback noise of BenchmarkServeCached1K.
func BenchmarkHandleCached1K(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f.bin"), bytes.Repeat([]byte("x"), 1024), 0o644); err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(b.Context())
	c := newConn(srv, discardConn{})
	req := []byte("GET /f.bin HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		c.r, c.w = 0, copy(c.buf, req)
		if !c.process(now) {
			b.Fatal("connection closed")
		}
	}
}
