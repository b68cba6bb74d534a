//go:build linux

package handoff

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// needRepair skips when this process may not use TCP_REPAIR (it needs
// CAP_NET_ADMIN in the socket's network namespace).
func needRepair(t testing.TB) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, 19 /* TCP_REPAIR */, 1); errors.Is(err, syscall.EPERM) {
		t.Skip("TCP_REPAIR needs CAP_NET_ADMIN: ", err)
	}
}

// TestFreezeRestoreLoopback moves a live loopback connection from one socket
// to a rebuilt one in the same namespace: the client keeps talking to the
// same address and sees one continuous byte stream in both directions.
func TestFreezeRestoreLoopback(t *testing.T) {
	needRepair(t)
	cli, srv := testutil.TCPPair(t)
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	// A little traffic both ways first, so that the sequence numbers and
	// the timestamp clock are not at their initial values.
	if _, err := srv.Write([]byte("greeting\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 9)
	if _, err := io.ReadFull(cli, buf); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Write([]byte("GET /x HTTP/1.1\r\n\r\nBODY")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	head := make([]byte, 6)
	if _, err := io.ReadFull(srv, head); err != nil {
		t.Fatal(err)
	}
	st, err := Freeze(srv, head)
	if err != nil {
		t.Fatal(err)
	}
	want := "GET /x HTTP/1.1\r\n\r\nBODY"
	if string(st.RecvQueue) != want {
		t.Fatalf("receive queue %q, want %q", st.RecvQueue, want)
	}
	if !st.Timestamps || st.MSS == 0 {
		t.Fatalf("state %+v: want timestamps and an MSS on loopback", st)
	}
	if err := srv.Close(); err != nil { // silent: repair mode
		t.Fatal(err)
	}
	// Through the wire format, as a node would receive it.
	got, err := UnmarshalState(st.AppendBinary(nil))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := Restore(got)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	rb := make([]byte, len(want))
	if _, err := io.ReadFull(nc, rb); err != nil || string(rb) != want {
		t.Fatalf("restored read %q, %v", rb, err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	go func() { nc.Write(big); nc.CloseWrite() }()
	all, err := io.ReadAll(cli)
	if err != nil || !bytes.Equal(all, big) {
		t.Fatalf("client read %d bytes (%v), want %d identical", len(all), err, len(big))
	}
	if _, err := cli.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	rb = rb[:4]
	if _, err := io.ReadFull(nc, rb); err != nil || string(rb) != "more" {
		t.Fatalf("restored read after response %q, %v", rb, err)
	}
}

// BenchmarkFreezeRestore measures the kernel work of one move on loopback:
// Freeze on the old socket, encoding and AES-GCM sealing and opening of the
// state, silent close, and Restore of the new socket (closed again).
func BenchmarkFreezeRestore(b *testing.B) {
	needRepair(b)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	auth, _ := NewAuth([]byte("0123456789abcdef0123456789abcdef"), 0)
	na, _ := auth.ForNode(netip.MustParseAddrPort("127.0.0.1:7070"))
	req := []byte("GET /index.html HTTP/1.1\r\nHost: example\r\n\r\n")
	var frame []byte
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		cli, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		srv, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		cli.Write(req)
		b.StartTimer()
		st, err := Freeze(srv.(*net.TCPConn), nil)
		if err != nil {
			b.Fatal(err)
		}
		frame = na.Seal(frame[:0], ToNode, MsgHandoff, st.AppendBinary(nil))
		srv.Close()
		_, p, err := na.Open(frame, ToNode)
		if err != nil {
			b.Fatal(err)
		}
		got, err := UnmarshalState(p)
		if err != nil {
			b.Fatal(err)
		}
		nc, err := Restore(got)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		nc.SetLinger(0)
		nc.Close()
		cli.Close()
		b.StartTimer()
	}
}
