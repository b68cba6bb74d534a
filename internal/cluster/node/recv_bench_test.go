package node

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/handoff"
	"shoal/internal/testutil"
)

// tagMover is two real node Servers, each serving a handoff socket, sharing
// a table that sends /a.bin to node 0 and /b.bin to node 1, and one client
// connection handed to node 0: alternating between the two URLs with
// 300-byte GET heads moves the connection on every request (FDMove, FDAck,
// notes to the front), and each answer comes from the receiving node's
// memory.
type tagMover struct {
	client net.Conn
	heads  [2][]byte
	fls    [2]*handoff.FDListener
	resp   []byte
	size   int // body bytes of each answer
	i      int
}

func newTagMover(tb testing.TB, size int) *tagMover {
	dir := tb.TempDir()
	root := filepath.Join(dir, "site")
	os.Mkdir(root, 0o755)
	for _, n := range []string{"a.bin", "b.bin"} {
		if err := os.WriteFile(filepath.Join(root, n), bytes.Repeat([]byte("x"), size), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	m := &tagMover{resp: make([]byte, size+64<<10), size: size}
	var socks [2]string
	for i := range socks {
		socks[i] = filepath.Join(dir, string(rune('a'+i))+".sock")
		fl, err := handoff.ListenFD(socks[i])
		if err != nil {
			tb.Fatal(err)
		}
		srv, err := New(Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			tb.Fatal(err)
		}
		m.fls[i] = fl
		go srv.Serve(fl)
		tb.Cleanup(func() { srv.Shutdown(tb.Context()) })
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
		tb.Cleanup(func() { fronts[i].Close() })
		if err := fronts[i].SendMsg(handoff.FDHeader{Kind: handoff.FDTable, Node: int32(i)}, tbl); err != nil {
			tb.Fatal(err)
		}
	}
	pad := "X-Pad: " + strings.Repeat("p", 300-len("GET /a.bin HTTP/1.1\r\nHost: bench\r\n")-len("X-Pad: \r\n\r\n")) + "\r\n"
	m.heads = [2][]byte{
		[]byte("GET /a.bin HTTP/1.1\r\nHost: bench\r\n" + pad + "\r\n"),
		[]byte("GET /b.bin HTTP/1.1\r\nHost: bench\r\n" + pad + "\r\n"),
	}
	client, server := testutil.TCPPair(tb)
	time.Sleep(50 * time.Millisecond) // both tables applied before the first route
	h := handoff.FDHeader{Kind: handoff.FDHandoff, Flags: handoff.FDFlagTag, Node: 0, Moves: 1, Conn: 1}
	if err := fronts[0].Send(h, server, m.heads[0]); err != nil {
		tb.Fatal(err)
	}
	server.Close()
	client.SetDeadline(time.Now().Add(time.Hour))
	m.client = client
	m.read(tb)
	return m
}

// next asks for the other URL and reads its whole answer.
func (m *tagMover) next(tb testing.TB) {
	m.i ^= 1
	if _, err := m.client.Write(m.heads[m.i]); err != nil {
		tb.Fatal(err)
	}
	m.read(tb)
}

// read reads one answer: its head, then size body bytes.
func (m *tagMover) read(tb testing.TB) {
	n := 0
	for {
		k, err := m.client.Read(m.resp[n:])
		if err != nil {
			tb.Fatalf("read after %d bytes: %v", n, err)
		}
		n += k
		if i := bytes.Index(m.resp[:n], []byte("\r\n\r\n")); i >= 0 && n >= i+4+m.size {
			return
		}
	}
}

// received is the connections both nodes took off their handoff sockets.
func (m *tagMover) received() uint64 { return m.fls[0].Stats().Received + m.fls[1].Stats().Received }

// BenchmarkTagMoveRecv measures what a node pays to receive a connection
// handed to it in passfd tag mode, the way tbccrd moves connections on the
// NASA trace (tagMover): one op is one request, the client's write, a move,
// a receive and the answer read, for a 1 KB body and for a 12 KB one (held
// in the store's arena and copied into the connection's output buffer).
// allocs/op and B/op count both nodes and the test front (process-wide).
func BenchmarkTagMoveRecv(b *testing.B) {
	for _, size := range []int{1 << 10, 12 << 10} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			m := newTagMover(b, size)
			b.ReportAllocs()
			b.SetBytes(300)
			for b.Loop() {
				m.next(b)
			}
			b.StopTimer()
			if got := m.received(); got < uint64(b.N) {
				b.Fatalf("%d connections received for %d requests: not every request moved", got, b.N)
			}
		})
	}
}

// TestMovedConnKeepsBuffers: a node that receives a moved connection per
// request reuses the conns of the connections that ended, with their read
// and output buffers, across garbage collections. Before, each moved
// connection allocated its 12 KiB read buffer once the collector had
// cleared the pool, and grew a fresh 4 KiB output buffer to hold a 12 KB
// body: about 45 KB a request.
func TestMovedConnKeepsBuffers(t *testing.T) {
	m := newTagMover(t, 12<<10)
	for range 20 {
		m.next(t) // warm: every conn and buffer the steady state needs
	}
	const moves = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range moves {
		m.next(t)
		if i%20 == 0 {
			runtime.GC() // what a node under a memory limit does often
		}
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / moves
	t.Logf("%d bytes allocated per moved request (both nodes, the test's front and client)", per)
	if per > 4<<10 {
		t.Errorf("%d bytes allocated per moved request, want at most 4 KiB: the conns' buffers are not reused", per)
	}
}
