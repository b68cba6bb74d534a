//go:build linux

package handoff

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

var ctlKey = []byte("0123456789abcdef0123456789abcdef")

// repairPort opens a node's handoff port on loopback with cfg.
func repairPort(t *testing.T, cfg RepairListenerConfig) (*RepairListener, *NodeAuth) {
	t.Helper()
	nodeAuth, _ := NewAuth(ctlKey, 0)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := ListenRepair(ln, nodeAuth, cfg)
	t.Cleanup(func() { rl.Close() })
	front, _ := NewAuth(ctlKey, 0)
	na, err := front.ForNode(ln.Addr().(*net.TCPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	return rl, na
}

// impossibleHandoff is a well-sealed handoff the node must not rebuild:
// the client address is unspecified (Linux would quietly connect it to
// loopback). The node answers it with a failure status.
func impossibleHandoff(na *NodeAuth, id uint64) []byte {
	st := &TCPState{Local: netip.MustParseAddrPort("127.0.0.1:1"), Remote: netip.MustParseAddrPort("0.0.0.0:9"), MSS: 1460,
		RecvQueue: []byte("GET /private HTTP/1.1\r\n\r\n")}
	return na.Seal(nil, ToNode, MsgHandoff, st.AppendBinary(binary.BigEndian.AppendUint64(nil, id)))
}

// exchange dials rl, writes frames, and returns the node's first answer
// (opened with na), or the error that ended the connection instead.
func exchange(t *testing.T, rl *RepairListener, na *NodeAuth, frames ...[]byte) ([]byte, error) {
	t.Helper()
	c, err := net.Dial("tcp4", rl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, f := range frames {
		if _, err := c.Write(f); err != nil {
			return nil, err
		}
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf, err := readFrame(bufio.NewReader(c), nil, na, ToFront, nil, 0)
	if err != nil {
		return nil, err
	}
	k, p, err := na.Open(buf, ToFront)
	if err != nil || k != MsgHandoffAck {
		t.Fatalf("answer: kind %d, %v", k, err)
	}
	return p, nil
}

// TestRepairListenerRefuses sends hand-made frames to a node's handoff
// port, each on its own connection: forged, misdirected and replayed ones
// must end the connection without an answer and be counted, and a
// well-sealed handoff of a connection that cannot be rebuilt must be
// answered with a failure status (so the front can thaw and relay).
func TestRepairListenerRefuses(t *testing.T) {
	rl, front := repairPort(t, RepairListenerConfig{})
	forger, _ := NewAuth([]byte("not the shared key, 32 bytes....."), 0)
	forgerNA, _ := forger.ForNode(netip.MustParseAddrPort(rl.Addr().String()))
	good := impossibleHandoff(front, 42)
	bad := append([]byte(nil), good...)
	bad[len(bad)-40] ^= 0x80 // payload bit flipped after sealing

	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"wrong key", impossibleHandoff(forgerNA, 42)},
		{"payload bit flipped", bad},
		{"sent the node's way back", front.Seal(nil, ToFront, MsgHandoff, good[FrameHeaderLen:])},
	} {
		if p, err := exchange(t, rl, front, tc.frame); err == nil {
			t.Errorf("%s: node answered %q", tc.name, p)
		}
	}
	p, err := exchange(t, rl, front, good)
	if err != nil || len(p) < 9 || binary.BigEndian.Uint64(p) != 42 {
		t.Fatalf("ack: %q, %v", p, err)
	}
	if p[8] == 0 {
		t.Fatalf("rebuild of an impossible state reported success")
	}
	t.Logf("node refused the impossible state: %s", p[9:])
	if p, err := exchange(t, rl, front, good); err == nil {
		t.Fatalf("replay answered: %q", p)
	}
	waitCount(t, "refused channels", &rl.Refused, 4)
	a := rl.Auth()
	if got := [...]uint64{a.Forged.Load(), a.Replayed.Load(), a.Accepted.Load(), rl.Failed.Load(), rl.Restored.Load()}; got != [...]uint64{3, 1, 1, 1, 0} {
		t.Fatalf("forged, replayed, accepted, failed, restored = %v, want [3 1 1 1 0]", got)
	}
}

// waitCount waits for a counter the node's goroutines bump.
func waitCount(t *testing.T, what string, c interface{ Load() uint64 }, want uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.Load() != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", what, c.Load(), want)
		}
	}
}

// TestRepairSealedForOtherNode checks that a frame sealed for node A is
// refused by node B and accepted by A.
func TestRepairSealedForOtherNode(t *testing.T) {
	rlA, forA := repairPort(t, RepairListenerConfig{})
	rlB, forB := repairPort(t, RepairListenerConfig{})
	frame := impossibleHandoff(forA, 7)
	if p, err := exchange(t, rlB, forB, frame); err == nil {
		t.Fatalf("node B answered a frame sealed for node A: %q", p)
	}
	if p, err := exchange(t, rlA, forA, frame); err != nil || binary.BigEndian.Uint64(p) != 7 {
		t.Fatalf("node A: %q, %v", p, err)
	}
	if f, acc := rlB.Auth().Forged.Load(), rlB.Auth().Accepted.Load(); f != 1 || acc != 0 {
		t.Fatalf("node B forged %d accepted %d, want 1 0", f, acc)
	}
}

// TestRepairHugeClaims is a memory attack on the repair port: 40
// connections each send a header claiming the largest payload and one more
// byte. The node must refuse each from its header alone, close it, and
// allocate nothing for the claims (on main: 323 MB of heap).
func TestRepairHugeClaims(t *testing.T) {
	rl, na := repairPort(t, RepairListenerConfig{MaxConns: 64})
	hdr := make([]byte, FrameHeaderLen)
	copy(hdr, frameMagic)
	hdr[4], hdr[5], hdr[6], hdr[8] = frameVersion, byte(MsgHandoff), byte(ToNode), byte(ToNode)
	binary.BigEndian.PutUint32(hdr[offLen:], MaxFramePayload)
	copy(hdr[offNode:], na.id[:]) // public: a hash of the node's address
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var conns []net.Conn
	for range 40 {
		c, err := net.Dial("tcp4", rl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(append(hdr, 'x'))
		conns = append(conns, c)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("connection %d: %v, want the node to close it", i, err)
		}
	}
	runtime.ReadMemStats(&m1)
	grew := int64(m1.TotalAlloc - m0.TotalAlloc)
	t.Logf("40 claims of %d bytes: %d KB allocated in all, heap in use %d -> %d KB",
		MaxFramePayload, grew>>10, m0.HeapInuse>>10, m1.HeapInuse>>10)
	if grew > 16<<20 {
		t.Fatalf("%d MB allocated for 40 unauthenticated claims", grew>>20)
	}
	if f := rl.Auth().Forged.Load(); f != 40 {
		t.Fatalf("forged = %d, want 40", f)
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}

// TestRepairIdleStranger checks the handshake deadline: a connection that
// sends nothing, or half a header, is closed; one that has sent a valid
// frame may then idle past it.
func TestRepairIdleStranger(t *testing.T) {
	const hs = 150 * time.Millisecond
	rl, front := repairPort(t, RepairListenerConfig{handshakeTimeout: hs, frameTimeout: hs})
	for _, send := range [][]byte{nil, impossibleHandoff(front, 1)[:10]} {
		c, err := net.Dial("tcp4", rl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(send)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("silent connection (sent %d bytes): %v, want closed by the node", len(send), err)
		}
		c.Close()
	}
	// Half a frame after a valid one: the frame deadline.
	c, err := net.Dial("tcp4", rl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	ack := func(id uint64) {
		t.Helper()
		c.Write(impossibleHandoff(front, id))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf, err := readFrame(r, nil, front, ToFront, nil, 0)
		if err != nil {
			t.Fatalf("handoff %d: %v", id, err)
		}
		if _, p, err := front.Open(buf, ToFront); err != nil || binary.BigEndian.Uint64(p) != id {
			t.Fatalf("handoff %d: %q %v", id, p, err)
		}
	}
	ack(2)
	time.Sleep(3 * hs) // an authenticated channel may idle
	ack(3)
	f := impossibleHandoff(front, 4)
	c.Write(f[:FrameHeaderLen+3]) // header, then a stall in the payload
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("stalled frame: %v, want closed by the node", err)
	}
}

// TestRepairConnLimit checks MaxConns: a new connection evicts the oldest
// one that has not authenticated, and is refused when all have.
func TestRepairConnLimit(t *testing.T) {
	rl, front := repairPort(t, RepairListenerConfig{MaxConns: 3})
	dial := func() net.Conn {
		c, err := net.Dial("tcp4", rl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF) || isReset(err)
	}
	authed := func(id uint64) net.Conn {
		c := dial()
		c.Write(impossibleHandoff(front, id))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := readFrame(bufio.NewReader(c), nil, front, ToFront, nil, 0); err != nil {
			t.Fatalf("handoff %d: %v", id, err)
		}
		return c
	}
	a1 := authed(1)
	s1 := dial()
	waitCount(t, "channels", lenOf(rl), 2)
	s2 := dial()
	waitCount(t, "channels", lenOf(rl), 3)
	s3 := dial() // evicts s1, the oldest stranger
	if !closed(s1) {
		t.Fatal("oldest stranger not evicted")
	}
	waitCount(t, "limited", &rl.Limited, 1)
	s2.Close()
	s3.Close()
	waitCount(t, "channels", lenOf(rl), 1)
	authed(2)
	authed(3)
	over := dial() // all three authenticated: refused
	if !closed(over) {
		t.Fatal("connection over the limit not closed")
	}
	if closed := rl.Limited.Load(); closed != 2 {
		t.Fatalf("limited = %d, want 2", closed)
	}
	a1.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := a1.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("authenticated channel: %v, want it kept open", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// countFunc adapts a function to waitCount.
type countFunc func() uint64

func (f countFunc) Load() uint64 { return f() }

// lenOf counts rl's open control connections.
func lenOf(rl *RepairListener) countFunc {
	return func() uint64 {
		rl.mu.Lock()
		defer rl.mu.Unlock()
		return uint64(len(rl.chans))
	}
}

// TestRepairHello: a client with a VIP greets the node when it dials, and
// Dial returns once the node has answered (here: not guarded, since a
// handoff port on loopback has no interface to guard), so the mover knows
// how to steer before its first handoff. A node's answer to a hello for an
// address it does not guard must never claim it does.
func TestRepairHello(t *testing.T) {
	rl, _ := repairPort(t, RepairListenerConfig{})
	if g, err := rl.Guard(); g != nil || err == nil {
		t.Fatalf("loopback handoff port: guard %v, err %v; want none and a reason", g, err)
	}
	auth, _ := NewAuth(ctlKey, 0)
	c := NewRepairClient(RepairClientConfig{Addr: rl.Addr().String(), Auth: auth, Timeout: time.Minute,
		VIP: netip.MustParseAddr("10.9.0.100")})
	defer c.Close()
	if c.Connected() {
		t.Fatal("connected before Dial")
	}
	if err := c.Dial(); err != nil {
		t.Fatal(err)
	}
	if !c.Connected() {
		t.Error("not connected after Dial")
	}
	c.wmu.Lock()
	hello := c.hello
	c.wmu.Unlock()
	select {
	case <-hello:
	default:
		t.Error("Dial returned before the node answered the hello")
	}
	if c.Guarded() {
		t.Error("node without a guard answered guarded")
	}
}

// TestFinFrameBatch: a MsgFinHandoff of several records (a tag-mode node's
// batch) reaches OnFins whole, and OnFin record by record; a truncated
// last record is left out.
func TestFinFrameBatch(t *testing.T) {
	want := []FinNotice{{testFlow(1), 7}, {testFlow(2), 0xfeedface}, {testFlow(3), 1}}
	var p []byte
	for _, n := range want {
		p = AppendFin(p, n.Flow, n.Tag)
	}
	p = append(p, 1, 2, 3) // a truncated record
	var got []FinNotice
	c := NewRepairClient(RepairClientConfig{Addr: "127.0.0.1:1", Auth: mustAuth(t), OnFins: func(ns []FinNotice) {
		if got != nil {
			t.Error("OnFins called twice for one frame")
		}
		got = append([]FinNotice{}, ns...)
	}})
	c.finFrame(p)
	if len(got) != len(want) {
		t.Fatalf("OnFins got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %v, want %v", i, got[i], want[i])
		}
	}
	var one []FinNotice
	c = NewRepairClient(RepairClientConfig{Addr: "127.0.0.1:1", Auth: mustAuth(t),
		OnFin: func(f Flow, tag uint32) { one = append(one, FinNotice{f, tag}) }})
	c.finFrame(p)
	if len(one) != len(want) {
		t.Errorf("OnFin got %v, want %v", one, want)
	}
}

func mustAuth(t *testing.T) *Auth {
	t.Helper()
	a, err := NewAuth(ctlKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
