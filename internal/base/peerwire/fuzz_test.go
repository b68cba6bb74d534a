package peerwire

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// script is a net.Conn whose peer says the bytes of in and then closes;
// what this side writes is kept in out. Deadlines are accepted and ignored
// (the script never blocks).
type script struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (s *script) Read(b []byte) (int, error)       { return s.in.Read(b) }
func (s *script) Write(b []byte) (int, error)      { return s.out.Write(b) }
func (s *script) Close() error                     { return nil }
func (s *script) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (s *script) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 2} }
func (s *script) SetDeadline(time.Time) error      { return nil }
func (s *script) SetReadDeadline(time.Time) error  { return nil }
func (s *script) SetWriteDeadline(time.Time) error { return nil }

func newScript(in []byte) *script { return &script{in: bytes.NewReader(in)} }

func fuzzConfig() Config {
	c := DefaultConfig(2, seedA)
	c.Stats = &Stats{}
	return c
}

// fixedLink is an established link of transcript hash th that both seals
// and opens with the client-to-server key: what a fuzz target's known-key
// peer would send, this side opens.
func fixedLink(nc net.Conn, cfg *Config, th []byte) *Conn {
	k, err := deriveKey(cfg.Seed, th, "client to server")
	if err != nil {
		panic(err)
	}
	return &Conn{nc: nc, cfg: cfg, peer: 1, send: k, recv: k, limit: cfg.MaxFrame}
}

// sealedFrame returns the bytes c sends for payload.
func sealedFrame(c *Conn, payload []byte) []byte {
	w := newScript(nil)
	c.nc = w
	if err := c.Send(payload); err != nil {
		panic(err)
	}
	return w.out.Bytes()
}

// FuzzHandshake feeds arbitrary bytes to both sides of the handshake as
// what the peer says. No fixed byte string may complete it: each side's
// nonce is fresh, so a peer must hold the seed and answer this connection's
// transcript; a reflection of a side's own hello or proof, a hello naming
// its own ID and any frame beyond the proof cap are in the seed corpus
// (testdata/fuzz/FuzzHandshake). Nothing may panic, and a refusal must
// never have read a frame beyond the proof cap.
func FuzzHandshake(f *testing.F) {
	f.Add(hello(1, make([]byte, nonceLen)))
	f.Add(append(hello(2, make([]byte, nonceLen)), 0, 0, 0, 62, Version, 0, 0, 0, 0, 0, 0, 0, 1))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, client := range []bool{false, true} {
			cfg := fuzzConfig()
			s := newScript(in)
			c, err := handshake(s, &cfg, client)
			if err == nil {
				t.Fatalf("client=%v: a scripted peer without the seed completed the handshake as PoP %x", client, c.Peer())
			}
			if !client && cfg.Stats.Accepted.Load() != 0 {
				t.Fatal("accepted counted for a refused handshake")
			}
		}
	})
}

// FuzzRecv feeds arbitrary bytes to an established link's frame reader.
// The seed corpus (testdata/fuzz/FuzzRecv) holds sealed frames of the
// link's keys, in order, replayed, truncated and with altered lengths, so
// mutations reach the opening and sequence checks. Recv must not panic,
// must return only frames that open under the link's key in sequence, and
// must keep no buffer above maxKept.
func FuzzRecv(f *testing.F) {
	th := make([]byte, 32)
	cfg := fuzzConfig()
	w := fixedLink(nil, &cfg, th)
	f.Add(sealedFrame(w, []byte("hello")))
	f.Add(append(sealedFrame(w, nil), sealedFrame(w, bytes.Repeat([]byte{7}, 9000))...))
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg := fuzzConfig()
		cfg.MaxFrame = 256 << 10 // keeps each run fast; the cap's logic is the same
		c := fixedLink(newScript(in), &cfg, th)
		for i := uint64(1); ; i++ {
			got, err := c.Recv()
			if err != nil {
				break
			}
			if c.recvSeq != i {
				t.Fatalf("frame %d accepted with sequence %d", i, c.recvSeq)
			}
			if len(got) > cfg.MaxFrame {
				t.Fatalf("frame of %d bytes above the cap", len(got))
			}
			if cap(c.rbuf) > maxKept {
				t.Fatalf("kept a %d-byte buffer", cap(c.rbuf))
			}
		}
		if cap(c.rbuf) > maxKept {
			t.Fatalf("kept a %d-byte buffer", cap(c.rbuf))
		}
	})
}
