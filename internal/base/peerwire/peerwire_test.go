package peerwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// tap records what is written through it and, while hold is set, keeps it
// from the wire, so a test can replay or alter a real frame.
type tap struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	last []byte
}

func (t *tap) Write(b []byte) (int, error) {
	t.mu.Lock()
	t.last = append([]byte(nil), b...)
	hold := t.hold
	t.mu.Unlock()
	if hold {
		return len(b), nil
	}
	return t.Conn.Write(b)
}

var seedA = []byte("0123456789abcdef0123456789abcdef")
var seedB = []byte("fedcba9876543210fedcba9876543210")

type side struct {
	conn *Conn
	err  error
	cfg  *Config
	logs []string
}

// pair connects a client (seed cs) to a server (seed ss) over loopback TCP.
func pair(t *testing.T, cs, ss []byte) (cl *side, sv *side, tp *tap) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sc := DefaultConfig(2, ss)
	sc.Stats = &Stats{}
	sv = &side{cfg: &sc}
	sc.Log = func(f string, a ...any) { sv.logs = append(sv.logs, fmt.Sprintf(f, a...)) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			sv.err = err
			return
		}
		sv.conn, sv.err = Server(nc, &sc)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tp = &tap{Conn: nc}
	cc := DefaultConfig(1, cs)
	cl = &side{cfg: &cc}
	cl.conn, cl.err = Client(tp, &cc)
	<-done
	t.Cleanup(func() {
		nc.Close()
		if sv.conn != nil {
			sv.conn.Close()
		}
	})
	return cl, sv, tp
}

func TestExchange(t *testing.T) {
	cl, sv, _ := pair(t, seedA, seedA)
	if cl.err != nil || sv.err != nil {
		t.Fatalf("handshake: %v / %v", cl.err, sv.err)
	}
	if cl.conn.Peer() != 2 || sv.conn.Peer() != 1 {
		t.Fatalf("peers %d %d", cl.conn.Peer(), sv.conn.Peer())
	}
	for _, msg := range []string{"ping", "", string(bytes.Repeat([]byte("x"), 60000))} {
		if err := cl.conn.Send([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got, err := sv.conn.Recv()
		if err != nil || string(got) != msg {
			t.Fatalf("got %d bytes, %v", len(got), err)
		}
		if err := sv.conn.Send([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got, err := cl.conn.Recv(); err != nil || string(got) != msg {
			t.Fatalf("back: %d bytes, %v", len(got), err)
		}
	}
	if sv.cfg.Stats.Accepted.Load() != 1 {
		t.Fatal("accept not counted")
	}
}

func TestWrongSeedRefused(t *testing.T) {
	cl, sv, _ := pair(t, seedB, seedA)
	if !errors.Is(cl.err, ErrAuth) {
		t.Fatalf("client: %v, want ErrAuth", cl.err)
	}
	if !errors.Is(sv.err, ErrAuth) {
		t.Fatalf("server: %v, want ErrAuth", sv.err)
	}
	if n := sv.cfg.Stats.Refused.Load(); n != 1 {
		t.Fatalf("refused counted %d times", n)
	}
	if len(sv.logs) != 1 {
		t.Fatalf("logs %q", sv.logs)
	}
	t.Logf("client sees: %v", cl.err)
	t.Logf("server logs: %s", sv.logs[0])
}

func TestReplayRefused(t *testing.T) {
	cl, sv, tp := pair(t, seedA, seedA)
	if cl.err != nil || sv.err != nil {
		t.Fatal(cl.err, sv.err)
	}
	cl.conn.Send([]byte("pay me once"))
	frame := tp.last
	if _, err := sv.conn.Recv(); err != nil {
		t.Fatal(err)
	}
	tp.Conn.Write(frame) // the same frame again
	if _, err := sv.conn.Recv(); !errors.Is(err, ErrReplay) {
		t.Fatalf("replayed frame: %v, want ErrReplay", err)
	}
	if sv.cfg.Stats.Replays.Load() != 1 {
		t.Fatal("replay not counted")
	}
}

func TestReplayOnAnotherConnection(t *testing.T) {
	cl, sv, tp := pair(t, seedA, seedA)
	cl.conn.Send([]byte("first connection"))
	frame := tp.last
	sv.conn.Recv()
	cl2, sv2, tp2 := pair(t, seedA, seedA)
	if cl2.err != nil || sv2.err != nil {
		t.Fatal(cl2.err, sv2.err)
	}
	tp2.Conn.Write(frame) // same sequence number, other keys
	if _, err := sv2.conn.Recv(); !errors.Is(err, ErrAuth) {
		t.Fatalf("frame of another connection: %v, want ErrAuth", err)
	}
}

func TestTamperedFrame(t *testing.T) {
	for _, at := range []int{0, 4, 5, hdrLen, hdrLen + 3, -1} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			cl, sv, tp := pair(t, seedA, seedA)
			tp.hold = true
			cl.conn.Send([]byte("transfer 10"))
			f := append([]byte(nil), tp.last...)
			if at < 0 {
				at = len(f) - 1
			}
			if at == 0 {
				f[3]-- // shorter length: the tag no longer matches
			} else {
				f[at] ^= 1
			}
			tp.Conn.Write(f)
			tp.Conn.Write(make([]byte, 64)) // so a longer length does not block
			_, err := sv.conn.Recv()
			if !errors.Is(err, ErrAuth) && !errors.Is(err, ErrVersion) {
				t.Fatalf("tampered byte %d: %v, want ErrAuth", at, err)
			}
		})
	}
}

func TestOversizedLengthRefusedBeforeReading(t *testing.T) {
	cl, sv, tp := pair(t, seedA, seedA)
	_ = cl
	var h [hdrLen]byte
	binary.BigEndian.PutUint32(h[:], uint32(sv.cfg.MaxFrame+1))
	h[4] = Version
	binary.BigEndian.PutUint64(h[5:], 2)
	tp.Conn.Write(h[:]) // no body follows: a reader that waited for it would time out
	sv.cfg.ReadTimeout = 2 * time.Second
	start := time.Now()
	_, err := sv.conn.Recv()
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: %v, want ErrTooLarge", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("the reader waited for the body of an oversized frame")
	}
	if cap(sv.conn.rbuf) > 1024 {
		t.Fatalf("allocated %d bytes for a refused frame", cap(sv.conn.rbuf))
	}
	if sv.cfg.Stats.Oversized.Load() != 1 {
		t.Fatal("not counted")
	}
}

// TestHandshakeFrameCap: before the peer has proved the seed, a frame
// longer than the proof is refused before its body is read or allocated.
func TestHandshakeFrameCap(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	cfg := DefaultConfig(2, seedA)
	cfg.Stats = &Stats{}
	res := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			res <- err
			return
		}
		defer nc.Close()
		_, err = Server(nc, &cfg)
		res <- err
	}()
	nc, _ := net.Dial("tcp", ln.Addr().String())
	defer nc.Close()
	nc.Write(hello(1, make([]byte, nonceLen)))
	var h [hdrLen]byte
	binary.BigEndian.PutUint32(h[:], 512<<10) // half a MiB, under MaxFrame
	h[4] = Version
	binary.BigEndian.PutUint64(h[5:], 1)
	nc.Write(h[:])
	if err := <-res; !errors.Is(err, ErrTooLarge) {
		t.Fatalf("large first frame: %v, want ErrTooLarge", err)
	}
}

func TestSilentPeerTimesOut(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			time.Sleep(2 * time.Second)
			c.Close()
		}
	}()
	nc, _ := net.Dial("tcp", ln.Addr().String())
	defer nc.Close()
	cfg := DefaultConfig(1, seedA)
	cfg.HandshakeTimeout = 200 * time.Millisecond
	if _, err := Client(nc, &cfg); err == nil {
		t.Fatal("handshake with a silent peer succeeded")
	}
}

func TestLoadSeed(t *testing.T) {
	d := t.TempDir()
	short := filepath.Join(d, "short")
	os.WriteFile(short, []byte("tiny"), 0o600)
	if _, err := LoadSeed(short); err == nil {
		t.Fatal("short seed accepted")
	}
	good := filepath.Join(d, "good")
	os.WriteFile(good, seedA, 0o600)
	if b, err := LoadSeed(good); err != nil || !bytes.Equal(b, seedA) {
		t.Fatal(err)
	}
	open := filepath.Join(d, "open")
	os.WriteFile(open, seedA, 0o644)
	os.Chmod(open, 0o644)
	if _, err := LoadSeed(open); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable seed: %v", err)
	}
	if _, err := LoadSeed(filepath.Join(d, "missing")); err == nil {
		t.Fatal("missing seed accepted")
	}
}
