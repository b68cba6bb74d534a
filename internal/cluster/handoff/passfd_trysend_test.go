package handoff

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/testutil"
)

// TestTrySendRaw: the non-waiting send delivers the descriptor and the
// bytes in one record, still works after a blocking Send's write deadline
// has expired (it must not see that deadline), and reports ErrWouldBlock at
// once, keeping the descriptor, when the node's socket is full.
func TestTrySendRaw(t *testing.T) {
	sock, ul := listenPacket(t)
	c := NewFDClient(FDClientConfig{Path: sock, SendTimeout: 10 * time.Millisecond})
	defer c.Close()
	client, server := testutil.TCPPair(t)
	defer client.Close()
	rc, _ := server.SyscallConn()
	var fd int
	rc.Control(func(f uintptr) { fd = int(f) })

	h := FDHeader{Kind: FDHandoff, Node: 1, Moves: 1, Conn: 7}
	if err := c.SendRaw(h, fd, []byte("first")); err != nil { // arms a 10 ms deadline
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // the deadline is now in the past
	if err := c.TrySendRaw(h, fd, []byte("GET / HTTP/1.1\r\n"), []byte("\r\n")); err != nil {
		t.Fatalf("after an expired deadline: %v", err)
	}
	peer, err := ul.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	buf := make([]byte, FDHeaderLen+FDMaxData)
	for i, want := range []string{"first", "GET / HTTP/1.1\r\n\r\n"} {
		m, err := RecvRawFD(peer, buf)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Header != h || !bytes.Equal(m.Data, []byte(want)) || m.FD < 0 {
			t.Fatalf("message %d: %+v %q, want %+v %q and a descriptor", i, m.Header, m.Data, h, want)
		}
		m.close()
	}

	// Nobody reads peer now: fill its queue.
	data := make([]byte, 8<<10)
	start := time.Now()
	for i := 0; ; i++ {
		err := c.TrySendRaw(h, fd, data)
		if errors.Is(err, ErrWouldBlock) {
			break
		}
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if i > 10000 {
			t.Fatal("the socket never filled")
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("filling took %v: a send waited", d)
	}
	// The descriptor is still ours and the socket still works once read.
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if m, err := RecvRawFD(peer, buf); err != nil || m.FD < 0 {
		t.Fatalf("drain: %v", err)
	} else {
		m.close()
	}
	if err := c.TrySendRaw(h, fd, []byte("again")); err != nil {
		t.Fatalf("after draining one: %v", err)
	}
}

// TestTrySendRawAllocatesNothing: the raw accept loop's send builds the
// record, its message header and control data in a pooled sender, so a
// passed connection costs the front no allocation.
func TestTrySendRawAllocatesNothing(t *testing.T) {
	sock, ul := listenPacket(t)
	c := NewFDClient(FDClientConfig{Path: sock})
	defer c.Close()
	client, server := testutil.TCPPair(t)
	defer client.Close()
	rc, _ := server.SyscallConn()
	var fd int
	rc.Control(func(f uintptr) { fd = int(f) })
	h := FDHeader{Kind: FDHandoff, Node: 1, Moves: 1, Conn: 7}
	head := []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if err := c.TrySendRaw(h, fd, head); err != nil { // dials
		t.Fatal(err)
	}
	peer, err := ul.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	rd, err := newFDReader(peer)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, FDHeaderLen+FDMaxData)
	var failed error
	recv := func() {
		m, err := rd.recv(buf)
		if err != nil || m.FD < 0 {
			failed = fmt.Errorf("recv: %v, descriptor %d", err, m.FD)
			return
		}
		unix.Close(m.FD)
	}
	recv()
	n := testing.AllocsPerRun(200, func() {
		if err := c.TrySendRaw(h, fd, head); err != nil {
			failed = err
			return
		}
		recv()
	})
	if failed != nil {
		t.Fatal(failed)
	}
	if n != 0 {
		t.Errorf("TrySendRaw (and the zero-allocation receive) allocate %v times a send, want 0", n)
	}
}

// listenPacket listens on a unixpacket socket in a temporary folder, as a
// node's handoff socket does, closed when the test ends.
func listenPacket(t *testing.T) (string, *net.UnixListener) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "n.sock")
	ul, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ul.Close() })
	return sock, ul
}
