package handoff

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testutil"

	"golang.org/x/sys/unix"
)

// fdSeqpair returns two connected SOCK_SEQPACKET Unix sockets.
func fdSeqpair(t testing.TB) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "seq")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return wrap(fds[0]), wrap(fds[1])
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []FDHeader{
		{Kind: FDHandoff},
		{Kind: FDReturn, Flags: FDFlagReturn, Node: 7, Moves: 3, Conn: 1<<63 + 5},
		{Kind: FDEnded, Node: -1, Conn: 42},
		{Kind: FDHandoff, Node: 2, Conn: 9, Fetch: 4}, // fetch from node 3
	} {
		b := AppendFDHeader(nil, h)
		if len(b) != FDHeaderLen {
			t.Fatalf("header is %d bytes, want %d", len(b), FDHeaderLen)
		}
		got, err := ParseFDHeader(append(b, "tail"...))
		if err != nil || got != h {
			t.Errorf("ParseFDHeader(AppendFDHeader(%+v)) = %+v, %v", h, got, err)
		}
	}
	// The fetch field sits in the bytes that were reserved (6 and 7,
	// little-endian), so older headers read as "no fetch".
	if b := AppendFDHeader(nil, FDHeader{Kind: FDHandoff, Fetch: 0x0102}); b[6] != 2 || b[7] != 1 {
		t.Errorf("fetch bytes % x, want 02 01", b[6:8])
	}
	for _, tc := range []struct{ fetch, node, want int }{{-1, 0, 0}, {0, 0, 0}, {0, 1, 1}, {3, 1, 4}, {0xffff, 0, 0}} {
		if got := FetchOf(tc.fetch, tc.node); int(got) != tc.want {
			t.Errorf("FetchOf(%d, %d) = %d, want %d", tc.fetch, tc.node, got, tc.want)
		}
	}
	bad := [][]byte{
		nil,
		[]byte("shf1"),
		append([]byte("xxxx"), make([]byte, 20)...),
		AppendFDHeader(nil, FDHeader{Kind: 0}),
		AppendFDHeader(nil, FDHeader{Kind: fdMaxKind + 1}),
	}
	for _, b := range bad {
		if _, err := ParseFDHeader(b); !errors.Is(err, ErrFDMessage) {
			t.Errorf("ParseFDHeader(%q) err = %v, want ErrFDMessage", b, err)
		}
	}
}

// TestSendRecv moves a live TCP connection with its bytes and checks that
// the receiver can answer the client on it after the sender closed its copy.
func TestSendRecv(t *testing.T) {
	a, b := fdSeqpair(t)
	client, server := testutil.TCPPair(t)
	h := FDHeader{Kind: FDHandoff, Flags: FDFlagReturn, Node: 2, Moves: 1, Conn: 99}
	data := []byte("GET /x HTTP/1.1\r\nHost: h\r\n\r\nGET /y")
	if _, err := SendFD(a, h, server, time.Second, nil, data[:10], data[10:]); err != nil {
		t.Fatal(err)
	}
	server.Close() // the sender's copy; the connection must survive it
	buf := make([]byte, FDHeaderLen+FDMaxData)
	r, err := RecvFD(b, buf)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Conn.Close()
	if r.Header != h || !bytes.Equal(r.Data, data) || r.Stray != 0 {
		t.Fatalf("got %+v %q stray %d", r.Header, r.Data, r.Stray)
	}
	if _, ok := r.Conn.(*net.TCPConn); !ok {
		t.Fatalf("received %T, want *net.TCPConn", r.Conn)
	}
	if _, err := r.Conn.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "pong" {
		t.Fatalf("client read %q, %v", got, err)
	}
	r.Conn.Close()
	if n, err := client.Read(got); err != io.EOF {
		t.Fatalf("after the receiver closed: %d, %v; want EOF", n, err)
	}
}

// receivers are the two ways a message is read: RecvFD (fronts, wrapping
// with net.FileConn) and a node's fdReader, adopting the socket.
var receivers = []struct {
	name string
	recv func(uc *net.UnixConn, buf []byte) (FDMessage, error)
}{
	{"RecvFD", RecvFD},
	{"adopt", func(uc *net.UnixConn, buf []byte) (FDMessage, error) {
		rd, err := newFDReader(uc)
		if err != nil {
			return FDMessage{}, err
		}
		return recvAdopt(rd, buf)
	}},
}

// TestRecvRefuses checks that bad messages are refused, their descriptors
// closed (the client sees EOF, not a hang), and that reading goes on.
func TestRecvRefuses(t *testing.T) {
	good := AppendFDHeader(nil, FDHeader{Kind: FDHandoff, Conn: 1})
	tests := []struct {
		name    string
		msg     []byte
		fds     int // TCP descriptors attached
		bufSize int
		want    error
		stray   int
	}{
		{"garbage", []byte("hello, world, this is not a header"), 1, 0, ErrFDMessage, 0},
		{"no descriptor", good, 0, 0, ErrNoDescriptor, 0},
		{"record truncated", append(good, make([]byte, 100)...), 1, FDHeaderLen + 10, ErrFDTruncated, 0},
		{"too many descriptors", good, 5, 0, ErrFDTruncated, 0}, // 5 > oob room for 4
		{"two descriptors", good, 2, 0, nil, 1},
	}
	for _, rv := range receivers {
		for _, tc := range tests {
			t.Run(rv.name+"/"+tc.name, func(t *testing.T) {
				recv := rv.recv
				a, b := fdSeqpair(t)
				var clients []*net.TCPConn
				var rights []int
				for range tc.fds {
					c, s := testutil.TCPPair(t)
					clients = append(clients, c)
					f, err := s.File()
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					rights = append(rights, int(f.Fd()))
					s.Close()
				}
				var oob []byte
				if len(rights) > 0 {
					oob = unix.UnixRights(rights...)
				}
				if _, _, err := a.WriteMsgUnix(tc.msg, oob, nil); err != nil {
					t.Fatal(err)
				}
				// Close our dup'ed files so the kernel's copies are the last.
				for _, fd := range rights {
					unix.Close(fd)
				}
				size := tc.bufSize
				if size == 0 {
					size = FDHeaderLen + FDMaxData
				}
				r, err := recv(b, make([]byte, size))
				if tc.want != nil {
					if !errors.Is(err, tc.want) {
						t.Fatalf("err = %v, want %v", err, tc.want)
					}
					if !isFDMessageError(err) {
						t.Fatalf("%v is not a per-message error", err)
					}
					for i, c := range clients {
						c.SetReadDeadline(time.Now().Add(5 * time.Second))
						if _, err := c.Read(make([]byte, 1)); err != io.EOF {
							t.Errorf("client %d: %v, want EOF (descriptor closed)", i, err)
						}
					}
				} else {
					if err != nil {
						t.Fatal(err)
					}
					defer r.Conn.Close()
					if r.Stray != tc.stray {
						t.Errorf("stray %d, want %d", r.Stray, tc.stray)
					}
					for i, c := range clients[1:] {
						c.SetReadDeadline(time.Now().Add(5 * time.Second))
						if _, err := c.Read(make([]byte, 1)); err != io.EOF {
							t.Errorf("stray client %d: %v, want EOF", i+1, err)
						}
					}
				}
				// The socket still works for the next message.
				c, s := testutil.TCPPair(t)
				if _, err := SendFD(a, FDHeader{Kind: FDHandoff}, s, time.Second, nil); err != nil {
					t.Fatal(err)
				}
				s.Close()
				r, err = recv(b, make([]byte, FDHeaderLen+FDMaxData))
				if err != nil {
					t.Fatalf("next message: %v", err)
				}
				r.Conn.Close()
				_ = c
			})
		}
	}
}

func TestRecvEOF(t *testing.T) {
	a, b := fdSeqpair(t)
	a.Close()
	_, err := RecvFD(b, make([]byte, 128))
	if err == nil || isFDMessageError(err) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("err = %v, want a closed-socket error", err)
	}
}

func TestSendTooLarge(t *testing.T) {
	a, _ := fdSeqpair(t)
	_, s := testutil.TCPPair(t)
	if _, err := SendFD(a, FDHeader{Kind: FDHandoff}, s, 0, nil, make([]byte, FDMaxData), []byte{1}); err == nil {
		t.Fatal("sent more than FDMaxData")
	}
}

// TestListenerClient runs the whole exchange over a real socket path:
// handoff, hand back, end notice, and the listener's counters.
func TestListenerClient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.sock")
	l, err := ListenFD(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := ListenFD(path); err == nil {
		t.Fatal("second Listen on a live socket succeeded")
	}
	returned := make(chan FDMessage, 1)
	ended := make(chan FDHeader, 1)
	cl := NewFDClient(FDClientConfig{
		Path:     path,
		OnReturn: func(r FDMessage) { returned <- r },
		OnEnded:  func(h FDHeader) { ended <- h },
	})
	defer cl.Close()

	client, server := testutil.TCPPair(t)
	if err := cl.Send(FDHeader{Kind: FDHandoff, Flags: FDFlagReturn, Node: 1, Moves: 1, Conn: 7}, server, []byte("he"), []byte("ad")); err != nil {
		t.Fatal(err)
	}
	server.Close()
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	hc := nc.(*FDConn)
	if string(hc.Preread()) != "head" || !hc.OneRequest() || hc.Header.Conn != 7 {
		t.Fatalf("accepted %+v %q", hc.Header, hc.Preread())
	}
	hc.NetConn().Write([]byte("A"))
	if err := hc.HandBack([]byte("next")); err != nil {
		t.Fatal(err)
	}
	hc.Close()
	hc.Ended() // no-op after HandBack
	var r FDMessage
	select {
	case r = <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("no return")
	}
	if r.Header.Kind != FDReturn || r.Header.Moves != 2 || r.Header.Conn != 7 || r.Header.Node != 1 || string(r.Data) != "next" {
		t.Fatalf("returned %+v %q", r.Header, r.Data)
	}
	r.Conn.Write([]byte("B"))

	// Second move: the node ends the connection and says so.
	if err := cl.Send(FDHeader{Kind: FDHandoff, Flags: FDFlagReturn, Node: 2, Moves: 3, Conn: 7}, r.Conn.(syscall.Conn)); err != nil {
		t.Fatal(err)
	}
	r.Conn.Close()
	nc, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	hc = nc.(*FDConn)
	hc.Ended()
	hc.Close()
	select {
	case h := <-ended:
		if h.Kind != FDEnded || h.Conn != 7 || h.Node != 2 {
			t.Fatalf("ended %+v", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no end notice")
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(client)
	if string(got) != "AB" || err != nil {
		t.Fatalf("client read %q, %v", got, err)
	}
	st := l.Stats() // two peers: the client and the second ListenFD's liveness probe
	if st.Peers != 2 || st.Received != 2 || st.Returned != 1 || st.Ended != 1 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket file left behind: %v", err)
	}
}

// TestClientRedials checks that a client recovers when the node restarts.
func TestClientRedials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.sock")
	l, err := ListenFD(path)
	if err != nil {
		t.Fatal(err)
	}
	cl := NewFDClient(FDClientConfig{Path: path})
	defer cl.Close()
	_, s := testutil.TCPPair(t)
	if err := cl.Send(FDHeader{Kind: FDHandoff}, s); err != nil {
		t.Fatal(err)
	}
	c, _ := l.Accept()
	c.Close()
	l.Close()
	// The node is gone: sends fail (and the caller keeps its connection).
	deadline := time.Now().Add(5 * time.Second)
	for cl.Send(FDHeader{Kind: FDHandoff}, s) == nil {
		if time.Now().After(deadline) {
			t.Fatal("sends to a closed listener keep succeeding")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatalf("connection unusable after a failed send: %v", err)
	}
	l, err = ListenFD(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := cl.Send(FDHeader{Kind: FDHandoff}, s); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	c, _ = l.Accept()
	c.Close()
}

// BenchmarkSendRecvFD measures one move: sendmsg with a descriptor and a
// 300-byte request head, recvmsg, net.FileConn, and closing both copies.
func BenchmarkSendRecvFD(b *testing.B) {
	a, r := fdSeqpair(b)
	_, s := testutil.TCPPair(b)
	head := bytes.Repeat([]byte("x"), 300)
	buf := make([]byte, FDHeaderLen+FDMaxData)
	var scratch []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if scratch, err = SendFD(a, FDHeader{Kind: FDHandoff}, s, 0, scratch, head); err != nil {
			b.Fatal(err)
		}
		m, err := RecvFD(r, buf)
		if err != nil {
			b.Fatal(err)
		}
		m.Conn.Close()
	}
}

// TestRawForward receives a descriptor without wrapping it, forwards it
// with SendRawFD, and wraps it at the far end.
func TestRawForward(t *testing.T) {
	a, b := fdSeqpair(t)
	c, d := fdSeqpair(t)
	client, server := testutil.TCPPair(t)
	if _, err := SendFD(a, FDHeader{Kind: FDReturn, Conn: 3}, server, time.Second, nil, []byte("x")); err != nil {
		t.Fatal(err)
	}
	server.Close()
	buf := make([]byte, FDHeaderLen+FDMaxData)
	r, err := RecvRawFD(b, buf)
	if err != nil || r.FD < 0 || r.Conn != nil || string(r.Data) != "x" {
		t.Fatalf("raw: %+v, %v", r, err)
	}
	if _, err := SendRawFD(c, FDHeader{Kind: FDHandoff, Conn: 3}, r.FD, time.Second, nil, r.Data, []byte("y")); err != nil {
		t.Fatal(err)
	}
	unix.Close(r.FD)
	r2, err := RecvFD(d, buf)
	if err != nil || r2.FD != -1 || string(r2.Data) != "xy" {
		t.Fatalf("wrapped: %+v, %v", r2, err)
	}
	r2.Conn.Write([]byte("ok"))
	r2.Conn.Close()
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := io.ReadAll(client); string(got) != "ok" || err != nil {
		t.Fatalf("client read %q, %v", got, err)
	}
}
