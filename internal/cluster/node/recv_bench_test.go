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

	"shoal/internal/cluster/handoff"
	"shoal/internal/testutil"
)

// BenchmarkTagMoveRecv measures what a node pays to receive a connection
// handed to it in passfd tag mode, the way tbccrd moves connections on the
// NASA trace: two real node Servers, each serving a handoff socket, share a
// table sending /a.bin (1 KB) to node 0 and /b.bin (1 KB) to node 1; one
// client connection alternates between the two with 300-byte GET heads, so
// every request moves the connection to the other node (FDMove, FDAck,
// notes to the front) and is answered there from its memory. One op is one
// request: the client's write, a move, a receive, the answer read.
// allocs/op and B/op count both nodes and the test front (process-wide).
func BenchmarkTagMoveRecv(b *testing.B) {
	dir, err := os.MkdirTemp("", "shoal-recv-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	root := filepath.Join(dir, "site")
	os.Mkdir(root, 0o755)
	for _, n := range []string{"a.bin", "b.bin"} {
		if err := os.WriteFile(filepath.Join(root, n), bytes.Repeat([]byte("x"), 1024), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var socks [2]string
	var fls [2]*handoff.FDListener
	for i := range socks {
		socks[i] = filepath.Join(dir, string(rune('a'+i))+".sock")
		fl, err := handoff.ListenFD(socks[i])
		if err != nil {
			b.Fatal(err)
		}
		srv, err := New(Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		fls[i] = fl
		go srv.Serve(fl)
		b.Cleanup(func() { srv.Shutdown(b.Context()) })
	}
	var tbl []byte
	for i, s := range socks {
		tbl = handoff.AppendTable(tbl, handoff.TablePeer, i, s)
	}
	tbl = handoff.AppendTable(tbl, handoff.TableTag, 0, "/a.bin")
	tbl = handoff.AppendTable(tbl, handoff.TableTag, 1, "/b.bin")
	var fronts [2]*handoff.FDClient
	for i, s := range socks {
		fronts[i] = handoff.NewFDClient(handoff.FDClientConfig{Path: s, OnNotes: func(handoff.FDHeader, []byte) {}})
		b.Cleanup(func() { fronts[i].Close() })
		if err := fronts[i].SendMsg(handoff.FDHeader{Kind: handoff.FDTable, Node: int32(i)}, tbl); err != nil {
			b.Fatal(err)
		}
	}
	pad := "X-Pad: " + strings.Repeat("p", 300-len("GET /a.bin HTTP/1.1\r\nHost: bench\r\n")-len("X-Pad: \r\n\r\n")) + "\r\n"
	heads := [2][]byte{
		[]byte("GET /a.bin HTTP/1.1\r\nHost: bench\r\n" + pad + "\r\n"),
		[]byte("GET /b.bin HTTP/1.1\r\nHost: bench\r\n" + pad + "\r\n"),
	}
	client, server := testutil.TCPPair(b)
	time.Sleep(50 * time.Millisecond) // both tables applied before the first route
	h := handoff.FDHeader{Kind: handoff.FDHandoff, Flags: handoff.FDFlagTag, Node: 0, Moves: 1, Conn: 1}
	if err := fronts[0].Send(h, server, heads[0]); err != nil {
		b.Fatal(err)
	}
	server.Close()
	client.SetDeadline(time.Now().Add(time.Hour))
	resp := make([]byte, 64<<10)
	respLen := readResponse(b, client, resp, 0)
	b.ReportAllocs()
	b.SetBytes(300)
	i := 0
	for b.Loop() {
		i ^= 1
		if _, err := client.Write(heads[i]); err != nil {
			b.Fatal(err)
		}
		readResponse(b, client, resp, respLen)
	}
	b.StopTimer()
	if got := fls[0].Stats().Received + fls[1].Stats().Received; got < uint64(b.N) {
		b.Fatalf("%d connections received for %d requests: not every request moved", got, b.N)
	}
}

// readResponse reads one answer of want bytes (0: up to the end of a
// 1 KB body after the head) from c.
func readResponse(b *testing.B, c io.Reader, buf []byte, want int) int {
	n := 0
	for {
		m, err := c.Read(buf[n:])
		if err != nil {
			b.Fatalf("read after %d bytes: %v", n, err)
		}
		n += m
		if want > 0 {
			if n >= want {
				return n
			}
			continue
		}
		if i := bytes.Index(buf[:n], []byte("\r\n\r\n")); i >= 0 && n >= i+4+1024 {
			return n
		}
	}
}
