package handoff

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// nodeA and nodeB are two nodes' handoff addresses (their identities).
var (
	nodeA = netip.MustParseAddrPort("10.0.0.11:7070")
	nodeB = netip.MustParseAddrPort("10.0.0.12:7070")
)

func TestAuthRefusals(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	newAuth := func() *Auth {
		a, err := NewAuth(key, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		a.now = func() time.Time { return now }
		return a
	}
	forA := func(a *Auth) *NodeAuth {
		na, err := a.ForNode(nodeA)
		if err != nil {
			t.Fatal(err)
		}
		return na
	}
	sender := newAuth()
	good := forA(sender).Seal(nil, ToNode, MsgHandoff, []byte("payload"))

	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	other, _ := NewAuth([]byte("another key, also 32 bytes long!"), 0)
	other.now = sender.now
	toB, _ := sender.ForNode(nodeB)
	mapped, _ := sender.ForNode(netip.AddrPortFrom(netip.MustParseAddr("::ffff:10.0.0.11"), 7070))
	old := newAuth()
	old.now = func() time.Time { return now.Add(-6 * time.Second) }
	future := newAuth()
	future.now = func() time.Time { return now.Add(6 * time.Second) }
	edge := newAuth()
	edge.now = func() time.Time { return now.Add(-5 * time.Second) }
	v1 := bytes.Clone(good)
	v1[4] = 1

	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"good", good, nil},
		{"payload bit flipped", flip(FrameHeaderLen + 1), ErrForged},
		{"kind changed", flip(5), ErrForged},
		{"direction changed", flip(6), ErrForged},
		{"nonce changed", flip(12), ErrForged},
		{"timestamp changed", flip(27), ErrForged},
		{"length changed", flip(31), ErrForged},
		{"node changed", flip(offNode + 7), ErrForged},
		{"header tag bit flipped", flip(frameHeader), ErrForged},
		{"payload tag bit flipped", flip(len(good) - 1), ErrForged},
		{"wrong cluster key", forA(other).Seal(nil, ToNode, MsgHandoff, []byte("payload")), ErrForged},
		{"sealed for node B", toB.Seal(nil, ToNode, MsgHandoff, []byte("payload")), ErrForged},
		{"IPv4-mapped address is the same node", mapped.Seal(nil, ToNode, MsgHandoff, nil), nil},
		{"travelling the other way", forA(sender).Seal(nil, ToFront, MsgHandoff, []byte("payload")), ErrForged},
		{"stale", forA(old).Seal(nil, ToNode, MsgHandoff, nil), ErrStale},
		{"from the future", forA(future).Seal(nil, ToNode, MsgHandoff, nil), ErrStale},
		{"at the skew limit", forA(edge).Seal(nil, ToNode, MsgHandoff, nil), nil},
		{"truncated", good[:len(good)-1], ErrMalformed},
		{"trailing byte", append(bytes.Clone(good), 0), ErrMalformed},
		{"header only", good[:FrameHeaderLen-1], ErrMalformed},
		{"bad magic", append([]byte("XHRP"), good[4:]...), ErrMalformed},
		{"version 1", v1, ErrMalformed},
		{"empty", nil, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAuth()
			k, p, err := forA(a).Open(bytes.Clone(tc.frame), ToNode)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			if tc.want == nil && tc.name == "good" && (k != MsgHandoff || string(p) != "payload") {
				t.Fatalf("Open = %d %q", k, p)
			}
		})
	}

	// Replay: the same frame twice within the window, also on another
	// channel to the same node (the window is the Auth's).
	a := newAuth()
	if _, _, err := forA(a).Open(bytes.Clone(good), ToNode); err != nil {
		t.Fatal(err)
	}
	if _, _, err := forA(a).Open(bytes.Clone(good), ToNode); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second Open: %v, want ErrReplayed", err)
	}
	if _, err := forA(a).OpenHeader(good, ToNode); !errors.Is(err, ErrReplayed) {
		t.Fatalf("OpenHeader of a replay: %v, want ErrReplayed before the payload is read", err)
	}
	// After the window the nonce is forgotten, but the frame is stale.
	now = now.Add(10 * time.Second)
	if _, _, err := forA(a).Open(bytes.Clone(good), ToNode); !errors.Is(err, ErrStale) {
		t.Fatalf("late Open: %v, want ErrStale", err)
	}
	if a.Accepted.Load() != 1 || a.Replayed.Load() != 2 || a.Stale.Load() != 1 {
		t.Fatalf("counters accepted %d replayed %d stale %d", a.Accepted.Load(), a.Replayed.Load(), a.Stale.Load())
	}
	if _, _, err := forA(a).Open(forA(sender).Seal(nil, ToNode, MsgFinHandoff, nil), ToNode); err != nil {
		t.Fatal(err)
	}
	if len(a.seen) != 1 {
		t.Fatalf("%d nonces kept, want only the newest (older ones expired)", len(a.seen))
	}
	if _, err := NewAuth([]byte("short"), 0); err == nil {
		t.Fatal("NewAuth accepted a 5-byte key")
	}
}

// TestSealHides checks that a sealed frame does not carry its payload in
// clear: no 4-byte run of a request head appears in it.
func TestSealHides(t *testing.T) {
	a, _ := NewAuth([]byte("0123456789abcdef0123456789abcdef"), 0)
	na, _ := a.ForNode(nodeA)
	st := &TCPState{Local: netip.MustParseAddrPort("10.0.0.100:80"), Remote: netip.MustParseAddrPort("10.0.0.2:40000"),
		RecvQueue: []byte("GET /account/secret?token=hunter2 HTTP/1.1\r\nCookie: session=s3cr3t\r\n\r\n")}
	frame := na.Seal(nil, ToNode, MsgHandoff, st.AppendBinary(nil))
	q := st.RecvQueue
	for i := 0; i+4 <= len(q); i++ {
		if bytes.Contains(frame, q[i:i+4]) {
			t.Fatalf("sealed frame holds %q of the request in clear", q[i:i+4])
		}
	}
	_, p, err := na.Open(frame, ToNode)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := UnmarshalState(p); err != nil || string(got.RecvQueue) != string(st.RecvQueue) {
		t.Fatalf("round trip: %v %q", err, got.RecvQueue)
	}
}

// TestOpenHeaderClaims checks that a header's claimed length is believed
// only after its tag verified, from the header bytes alone.
func TestOpenHeaderClaims(t *testing.T) {
	a, _ := NewAuth([]byte("0123456789abcdef0123456789abcdef"), 0)
	na, _ := a.ForNode(nodeA)
	forged := make([]byte, FrameHeaderLen) // what an attacker without the key sends
	copy(forged, frameMagic)
	forged[4], forged[5], forged[6], forged[8] = frameVersion, byte(MsgHandoff), byte(ToNode), byte(ToNode)
	binary.BigEndian.PutUint32(forged[offLen:], MaxFramePayload)
	copy(forged[offNode:], na.id[:]) // public: a hash of the node's address
	if n, err := na.OpenHeader(forged, ToNode); !errors.Is(err, ErrForged) {
		t.Fatalf("forged header claiming %d bytes: length %d, %v; want ErrForged", MaxFramePayload, n, err)
	}
	big := na.Seal(nil, ToNode, MsgHandoff, make([]byte, 100))
	if n, err := na.OpenHeader(big, ToNode); err != nil || n != len(big) {
		t.Fatalf("good header: %d, %v; want %d", n, err, len(big))
	}
}

func TestStateRoundTrip(t *testing.T) {
	st := &TCPState{
		Local: netip.MustParseAddrPort("10.201.0.100:80"), Remote: netip.MustParseAddrPort("10.201.0.2:40000"),
		SndSeq: 0xfffffff0, RcvSeq: 7, MSS: 1448, SndWscale: 7, RcvWscale: 9, Wscale: true, SACK: true,
		Timestamps: true, TSVal: 123456, Window: RepairWindow{1, 2, 3, 4, 5},
		RecvQueue: []byte("GET / HTTP/1.1\r\n\r\n"), SendQueue: []byte("HTTP/1.1 100 Continue\r\n\r\n"), Unsent: 4,
		Fetch: 3, // fetch from node 2 (peer fetch)
	}
	b := st.AppendBinary(nil)
	got, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Local != st.Local || got.Remote != st.Remote || got.SndSeq != st.SndSeq || got.RcvSeq != st.RcvSeq ||
		got.MSS != st.MSS || got.SndWscale != 7 || got.RcvWscale != 9 || !got.Wscale || !got.SACK || !got.Timestamps ||
		got.TSVal != st.TSVal || got.Window != st.Window || got.Unsent != 4 || got.Fetch != 3 ||
		string(got.RecvQueue) != string(st.RecvQueue) || string(got.SendQueue) != string(st.SendQueue) {
		t.Fatalf("round trip: %+v\nwant %+v", got, st)
	}
	for _, n := range []int{0, 10, stateFixed - 1, len(b) - 1} {
		if _, err := UnmarshalState(b[:n]); !errors.Is(err, ErrMalformed) {
			t.Errorf("UnmarshalState(%d of %d bytes) = %v, want ErrMalformed", n, len(b), err)
		}
	}
	bad := bytes.Clone(b)
	bad[12+16+1] = 15 // SndWscale beyond RFC 7323's 14
	if _, err := UnmarshalState(bad); !errors.Is(err, ErrMalformed) {
		t.Errorf("wscale 15 accepted: %v", err)
	}
}

func FuzzUnmarshalState(f *testing.F) {
	st := &TCPState{Local: netip.MustParseAddrPort("10.0.0.1:80"), Remote: netip.MustParseAddrPort("10.0.0.2:9"), RecvQueue: []byte("x")}
	f.Add(st.AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, err := UnmarshalState(b); err == nil {
			if again, err := UnmarshalState(got.AppendBinary(nil)); err != nil || again.RcvSeq != got.RcvSeq {
				t.Fatalf("re-encoding failed: %v", err)
			}
		}
	})
}

// BenchmarkSealOpen seals and opens one handoff-sized frame (a state with a
// 200-byte request), the crypto work done per moved connection besides the
// acknowledgement and FIN-HANDOFF.
func BenchmarkSealOpen(b *testing.B) {
	a, err := NewAuth([]byte("0123456789abcdef0123456789abcdef"), 0)
	if err != nil {
		b.Fatal(err)
	}
	na, _ := a.ForNode(nodeA)
	p := make([]byte, 8+stateFixed+200)
	var frame []byte
	b.ReportAllocs()
	for b.Loop() {
		frame = na.Seal(frame[:0], ToNode, MsgHandoff, p)
		if _, _, err := na.Open(frame, ToNode); err != nil {
			b.Fatal(err)
		}
	}
}
