package node

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

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

// BenchmarkServeUncached1K is the same with the memory tier off: every
// request opens the file and sends it from the page cache, what most
// requests do in a budget too small to cache the working set, where what
// each allocates sets how often the collector runs.
func BenchmarkServeUncached1K(b *testing.B) {
	benchServeCache(b, 1024, 8, 1, -1)
}

// BenchmarkServeMiss4K serves 512 files of 4 KB in turn from a 64 KiB
// memory tier: nearly every request misses, the node opens the file and
// the policy decides whether to keep it, as in a small budget.
func BenchmarkServeMiss4K(b *testing.B) {
	benchServeCache(b, 4<<10, 8, 512, 64<<10)
}

func benchServe(b *testing.B, size, conns int) { benchServeCache(b, size, conns, 1, 0) }

// benchServeCache serves files files of size bytes (all with one mtime, so
// every response has the same length) in turn to conns keep-alive
// connections from a node whose memory tier is cacheBytes (0: the default;
// negative: off).
func benchServeCache(b *testing.B, size, conns, files int, cacheBytes int64) {
	root := b.TempDir()
	reqs := make([][]byte, files)
	mtime := time.Unix(1_700_000_000, 0)
	for i := range files {
		name := fmt.Sprintf("f%04d.bin", i)
		if err := os.WriteFile(filepath.Join(root, name), bytes.Repeat([]byte("x"), size), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(root, name), mtime, mtime); err != nil {
			b.Fatal(err)
		}
		reqs[i] = []byte("GET /" + name + " HTTP/1.1\r\nHost: bench\r\n\r\n")
	}
	srv, err := New(Config{Root: root, CacheBytes: cacheBytes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	addr := testutil.Serve(b, srv)
	req := reqs[0]

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
			for k := range n {
				if _, err := c.Write(reqs[(i*7+k)%files]); err != nil {
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
