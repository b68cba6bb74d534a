package front

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// cannedBackend answers every request head it reads with the same response
// of a body of size bytes, without allocating, so that a benchmark measures
// the front and not the node.
func cannedBackend(b *testing.B, size int) string {
	resp := append([]byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nServer: canned\r\nContent-Type: application/octet-stream\r\n"+
		"Content-Length: %d\r\n\r\n", size)), bytes.Repeat([]byte("x"), size)...)
	return rawBackend(b, func(c net.Conn) {
		// buf[:3] keeps the end of the previous read, to find a "\r\n\r\n"
		// split across two reads.
		buf := make([]byte, 64<<10)
		end := []byte("\r\n\r\n")
		for {
			n, err := c.Read(buf[3:])
			if n > 0 {
				for i := bytes.Count(buf[:3+n], end); i > 0; i-- {
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
				copy(buf[:3], buf[n:n+3])
			}
			if err != nil {
				return
			}
		}
	})
}

// benchClient is a keep-alive connection that sends one request and reads a
// response of known length.
type benchClient struct {
	c    net.Conn
	req  []byte
	buf  []byte
	size int
}

func newBenchClient(b *testing.B, addr, path string) *benchClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	bc := &benchClient{c: c, req: []byte("GET " + path + " HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n")}
	// Learn the relayed response's exact length from the first one.
	c.Write(bc.req)
	var raw bytes.Buffer
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(c, &raw)), nil)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	head := bytes.Index(raw.Bytes(), []byte("\r\n\r\n")) + 4
	bc.size = head + len(body)
	bc.buf = make([]byte, bc.size)
	return bc
}

func (bc *benchClient) do() error {
	if _, err := bc.c.Write(bc.req); err != nil {
		return err
	}
	_, err := io.ReadFull(bc.c, bc.buf)
	return err
}

// BenchmarkRelay measures the relay hot path end to end over loopback: one
// keep-alive client, the front, one pooled connection to a canned node.
// Allocations are per request, counted over all three parties (the client
// and the node allocate nothing per request).
func BenchmarkRelay(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			node := cannedBackend(b, size)
			addr, _, _ := startFront(b, Config{}, node)
			bc := newBenchClient(b, addr, "/obj")
			defer bc.c.Close()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := bc.do(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRelayParallel is BenchmarkRelay with one client connection per
// benchmark goroutine (GOMAXPROCS×-cpu of them), as wrk -c would load it.
func BenchmarkRelayParallel(b *testing.B) {
	node := cannedBackend(b, 1<<10)
	addr, _, _ := startFront(b, Config{}, node)
	b.SetBytes(1 << 10)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		bc := newBenchClient(b, addr, "/obj")
		defer bc.c.Close()
		for pb.Next() {
			if err := bc.do(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkChunkScan measures the chunked-framing scanner alone.
func BenchmarkChunkScan(b *testing.B) {
	var body []byte
	for i := 0; i < 64; i++ {
		body = append(body, "400\r\n"...)
		body = append(body, bytes.Repeat([]byte("y"), 0x400)...)
		body = append(body, "\r\n"...)
	}
	body = append(body, "0\r\n\r\n"...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var ch chunker
		p := body
		for len(p) > 0 {
			n, _, _, fin, err := ch.scan(p)
			if err != nil {
				b.Fatal(err)
			}
			p = p[n:]
			if fin {
				break
			}
		}
	}
}
