package node

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"shoal/internal/testutil"
)

// BenchmarkServeCached1K measures a cached 1 KB GET over loopback with
// several keep-alive connections, each sending one request at a time (no
// pipelining), like wrk. Client and server share the machine, so ns/op is
// the cost of both sides; allocs/op is the server's (the client does not
// allocate per request).
func BenchmarkServeCached1K(b *testing.B) {
	benchServe(b, 1024, 8)
}

// BenchmarkServeCached64K is the same for a 64 KB body (writev path).
func BenchmarkServeCached64K(b *testing.B) {
	benchServe(b, 64<<10, 8)
}

func benchServe(b *testing.B, size, conns int) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f.bin"), bytes.Repeat([]byte("x"), size), 0o644); err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	addr := testutil.Serve(b, srv)
	req := []byte("GET /f.bin HTTP/1.1\r\nHost: bench\r\n\r\n")

	// Measure the exact response length once (it is constant: the Date
	// line has a fixed width).
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	nc.Write(req)
	buf := make([]byte, size+4096)
	respLen := 0
	for {
		n, err := nc.Read(buf[respLen:])
		if err != nil {
			b.Fatal(err)
		}
		respLen += n
		if i := bytes.Index(buf[:respLen], []byte("\r\n\r\n")); i >= 0 && respLen >= i+4+size {
			break
		}
	}
	nc.Close()

	clients := make([]net.Conn, conns)
	for i := range clients {
		if clients[i], err = net.Dial("tcp", addr); err != nil {
			b.Fatal(err)
		}
		defer clients[i].Close()
	}
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N / conns
	for i, c := range clients {
		n := per
		if i == 0 {
			n += b.N % conns
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rb := make([]byte, respLen)
			for range n {
				if _, err := c.Write(req); err != nil {
					b.Error(err)
					return
				}
				if _, err := io.ReadFull(c, rb); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
