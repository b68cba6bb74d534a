package peerwire

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// listenServer runs Server on one accepted connection of a fresh listener
// and delivers its result.
func listenServer(t *testing.T, cfg *Config) (addr string, res <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			ch <- err
			return
		}
		defer nc.Close()
		c, err := Server(nc, cfg)
		if err == nil {
			// An accepted link must still be usable by the attacker to
			// count as accepted: read one frame as the PoP's reader does.
			_, err = c.Recv()
		}
		ch <- err
	}()
	return ln.Addr().String(), ch
}

// readFrame reads one raw frame (header and body) as a keyless peer sees it.
func readFrame(nc net.Conn) ([]byte, error) {
	h := make([]byte, hdrLen)
	if _, err := io.ReadFull(nc, h); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(h))
	if _, err := io.ReadFull(nc, body); err != nil {
		return nil, err
	}
	return append(h, body...), nil
}

// TestReflectedHandshakeRefused: a client with no seed names the server's
// own ID in its hello and echoes the server's proof back. With keys bound
// only to (sender, receiver) both directions would share one key and the
// echo would open; the server must refuse it, count it and never accept a
// frame on such a link.
func TestReflectedHandshakeRefused(t *testing.T) {
	cfg := DefaultConfig(7, seedA)
	cfg.Stats = &Stats{}
	addr, res := listenServer(t, &cfg)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write(hello(7, make([]byte, nonceLen))) // the server's own ID
	// The server may refuse at once; otherwise echo its proof, and once
	// more as the attack did to hold the link.
	if _, err := io.ReadFull(nc, make([]byte, helloLen)); err == nil {
		if f, err := readFrame(nc); err == nil {
			nc.Write(f)
			nc.Write(f)
		}
	}
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("server accepted a reflected handshake and a reflected frame")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server neither refused nor accepted the reflected handshake")
	}
	if cfg.Stats.Accepted.Load() != 0 {
		t.Fatalf("accepted counted %d, want 0", cfg.Stats.Accepted.Load())
	}
	if cfg.Stats.Refused.Load() != 1 {
		t.Fatalf("refused counted %d, want 1", cfg.Stats.Refused.Load())
	}
}

// TestReflectedHandshakeRefusedByClient: a server with no seed echoes the
// client's own hello and proof; the client must not accept the link.
func TestReflectedHandshakeRefusedByClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		h := make([]byte, helloLen)
		if _, err := io.ReadFull(nc, h); err != nil {
			return
		}
		nc.Write(h) // the client's own hello: same ID, same nonce
		if f, err := readFrame(nc); err == nil {
			nc.Write(f)
			nc.Write(f)
		}
		io.Copy(io.Discard, nc)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cfg := DefaultConfig(9, seedA)
	if _, err := Client(nc, &cfg); err == nil {
		t.Fatal("client accepted a server that echoed its own hello and proof")
	}
}

// TestOwnIDRefused: even a holder of the seed may not claim the ID of the
// side it talks to; two PoPs never share an ID, so such a hello is a
// reflection or a misconfiguration.
func TestOwnIDRefused(t *testing.T) {
	cfg := DefaultConfig(3, seedA)
	cfg.Stats = &Stats{}
	addr, res := listenServer(t, &cfg)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cc := DefaultConfig(3, seedA)
	_, cerr := Client(nc, &cc)
	if cerr == nil {
		t.Fatal("client accepted a server with its own ID")
	}
	nc.Close()
	if err := <-res; err == nil {
		t.Fatal("server accepted a client claiming its own ID")
	}
	if cfg.Stats.Refused.Load() != 1 {
		t.Fatalf("refused counted %d, want 1", cfg.Stats.Refused.Load())
	}
}

// TestHandshakeDeadlineCoversProof: a client that sends a good hello and
// then nothing must be dropped at the handshake timeout, not at the (much
// longer) frame read timeout: otherwise slow hellos hold the handshake
// slots of a PoP for the read timeout each.
func TestHandshakeDeadlineCoversProof(t *testing.T) {
	cfg := DefaultConfig(2, seedA)
	cfg.HandshakeTimeout = 100 * time.Millisecond
	cfg.ReadTimeout = time.Hour
	addr, res := listenServer(t, &cfg)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write(hello(1, make([]byte, nonceLen)))
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("handshake without a proof succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a client that never sent its proof held the handshake past the handshake timeout")
	}
}

// TestRecvBufferFollowsBytes: a frame's length is believed only as far
// as its bytes arrive, and a large frame's buffer is not kept: a peer that
// announces a full frame and stalls costs what it sent, not the cap.
func TestRecvBufferFollowsBytes(t *testing.T) {
	cl, sv, tp := pair(t, seedA, seedA)
	if cl.err != nil || sv.err != nil {
		t.Fatal(cl.err, sv.err)
	}
	var h [hdrLen]byte
	binary.BigEndian.PutUint32(h[:], uint32(sv.cfg.MaxFrame))
	h[4] = Version
	binary.BigEndian.PutUint64(h[5:], 1)
	tp.Conn.Write(h[:])
	tp.Conn.Write(make([]byte, 100))
	tp.Conn.(*net.TCPConn).CloseWrite()
	if _, err := sv.conn.Recv(); err == nil {
		t.Fatal("a truncated frame was accepted")
	}
	if c := cap(sv.conn.rbuf); c > maxKept {
		t.Fatalf("a 100-byte stall allocated a %d-byte buffer (keep at most %d)", c, maxKept)
	}

	cl2, sv2, _ := pair(t, seedA, seedA)
	big := make([]byte, sv2.cfg.MaxFrame-64)
	for i := range big {
		big[i] = byte(i)
	}
	for range 2 {
		if err := cl2.conn.Send(big); err != nil {
			t.Fatal(err)
		}
		got, err := sv2.conn.Recv()
		if err != nil || len(got) != len(big) || got[len(got)-1] != big[len(big)-1] {
			t.Fatalf("large frame: %d bytes, %v", len(got), err)
		}
	}
	if c := cap(sv2.conn.rbuf); c > maxKept {
		t.Fatalf("kept a %d-byte read buffer after a large frame (at most %d)", c, maxKept)
	}
	if c := cap(cl2.conn.wbuf); c > maxKept {
		t.Fatalf("kept a %d-byte write buffer after a large frame (at most %d)", c, maxKept)
	}
	if err := cl2.conn.Send([]byte("small")); err != nil {
		t.Fatal(err)
	}
	if got, err := sv2.conn.Recv(); err != nil || string(got) != "small" {
		t.Fatalf("after a large frame: %q, %v", got, err)
	}
}
