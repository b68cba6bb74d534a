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

// TestHandleCachedNoAlloc: a cached GET, with and without a site rule, a
// precompressed variant and virtual hosts, allocates nothing per request.
func TestHandleCachedNoAlloc(t *testing.T) {
	root := t.TempDir()
	site := filepath.Join(root, "a.example")
	os.MkdirAll(site, 0o755)
	os.WriteFile(filepath.Join(site, "f.css"), bytes.Repeat([]byte("x"), 1024), 0o644)
	os.WriteFile(filepath.Join(site, "f.css.gz"), bytes.Repeat([]byte("z"), 100), 0o644)
	os.WriteFile(filepath.Join(site, SiteFile), []byte("[[headers]]\nmatch = \"*.css\"\nexpires = \"1h\"\n"), 0o644)
	srv, err := New(Config{Root: root, VHosts: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	c := newConn(srv, discardConn{})
	now := time.Now()
	for _, req := range []string{
		"GET /f.css HTTP/1.1\r\nHost: a.example\r\n\r\n",
		"GET /f.css HTTP/1.1\r\nHost: A.Example:80\r\nAccept-Encoding: gzip, br\r\n\r\n",
		"GET /f.css HTTP/1.1\r\nHost: a.example\r\nRange: bytes=0-9\r\nIf-Match: *\r\n\r\n",
	} {
		run := func() {
			c.r, c.w = 0, copy(c.buf, req)
			c.process(now)
		}
		run() // fills the cache and the variant index
		if n := testing.AllocsPerRun(200, run); n != 0 {
			t.Errorf("%q: %v allocations per request", req, n)
		}
	}
}
