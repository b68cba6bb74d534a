package handoff

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"shoal/internal/base/rawio"
	"shoal/internal/testutil"

	"golang.org/x/sys/unix"
)

// TestSockConn: a socket a node adopts is the client's connection: it
// reads what the client sent, writes (also by writev through rawio), knows
// both addresses, keeps deadlines, and closing it ends the connection.
func TestSockConn(t *testing.T) {
	a, b := fdSeqpair(t)
	client, server := testutil.TCPPair(t)
	if _, err := SendFD(a, FDHeader{Kind: FDMove, Conn: 9}, server, time.Second, nil, []byte("GET /")); err != nil {
		t.Fatal(err)
	}
	server.Close()
	r, err := adoptOne(t, b)
	if err != nil || r.Header.Conn != 9 || string(r.Data) != "GET /" {
		t.Fatalf("received %+v %q, %v", r.Header, r.Data, err)
	}
	sc, ok := r.Conn.(*SockConn)
	if !ok {
		t.Fatalf("received %T, want *SockConn", r.Conn)
	}
	defer sc.Close()
	if got, want := sc.RemoteAddr().String(), client.LocalAddr().String(); got != want {
		t.Errorf("RemoteAddr %s, want %s", got, want)
	}
	if got, want := sc.LocalAddr().String(), client.RemoteAddr().String(); got != want {
		t.Errorf("LocalAddr %s, want %s", got, want)
	}
	client.Write([]byte("ping"))
	got := make([]byte, 4)
	sc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != "ping" {
		t.Fatalf("read %q, %v", got, err)
	}
	sc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := sc.Read(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	var rio rawio.Conn
	if !rio.Bind(sc) {
		t.Fatal("rawio does not bind an adopted socket")
	}
	bufs := net.Buffers{[]byte("he"), nil, []byte("llo"), []byte(" world")}
	if n, err := rio.WriteBuffers(&bufs); n != 11 || err != nil || len(bufs) != 0 {
		t.Fatalf("WriteBuffers = %d, %v, %d left", n, err, len(bufs))
	}
	sc.Close()
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if all, err := io.ReadAll(client); string(all) != "hello world" || err != nil {
		t.Fatalf("client read %q, %v", all, err)
	}
}

// TestSockConnBlocking: a blocking socket (no shoal sender passes one, but
// a test or another program may) is made non-blocking and served through
// the poller: a read past its deadline returns instead of blocking.
func TestSockConnBlocking(t *testing.T) {
	a, b := fdSeqpair(t)
	client, server := testutil.TCPPair(t)
	f, err := server.File()
	if err != nil {
		t.Fatal(err)
	}
	server.Close()
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.WriteMsgUnix(AppendFDHeader(nil, FDHeader{Kind: FDMove}), unix.UnixRights(int(f.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := adoptOne(t, b)
	if err != nil {
		t.Fatalf("blocking socket: %v", err)
	}
	defer r.Conn.Close()
	r.Conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := r.Conn.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	client.Write([]byte("x"))
	r.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := r.Conn.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
}

// TestAdoptNoDelay: a connection from the front (whose raw accept sets no
// socket option) gets TCP_NODELAY, so small answers do not wait for the
// client's ACK; a move between nodes leaves the socket's option as it is.
func TestAdoptNoDelay(t *testing.T) {
	for _, tc := range []struct {
		kind uint8
		want int
	}{{FDHandoff, 1}, {FDMove, 0}} {
		a, b := fdSeqpair(t)
		_, server := testutil.TCPPair(t)
		server.SetNoDelay(false)
		if _, err := SendFD(a, FDHeader{Kind: tc.kind}, server, time.Second, nil); err != nil {
			t.Fatal(err)
		}
		server.Close()
		r, err := adoptOne(t, b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := unix.GetsockoptInt(r.Conn.(*SockConn).fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
		r.Conn.Close()
		if err != nil || (got != 0) != (tc.want != 0) {
			t.Errorf("kind %d: TCP_NODELAY %d, %v; want %d", tc.kind, got, err, tc.want)
		}
	}
}

// adoptOne receives one message on b the way a node does (recvAdopt).
func adoptOne(t *testing.T, b *net.UnixConn) (FDMessage, error) {
	t.Helper()
	rd, err := newFDReader(b)
	if err != nil {
		t.Fatal(err)
	}
	return recvAdopt(rd, make([]byte, FDHeaderLen+FDMaxData))
}
