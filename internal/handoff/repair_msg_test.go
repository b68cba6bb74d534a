package handoff

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"
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
	sender := newAuth()
	good := sender.Seal(nil, MsgHandoff, []byte("payload"))

	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	other, _ := NewAuth([]byte("another key, also 32 bytes long!"), 0)
	other.now = sender.now
	old := newAuth()
	old.now = func() time.Time { return now.Add(-6 * time.Second) }
	future := newAuth()
	future.now = func() time.Time { return now.Add(6 * time.Second) }
	edge := newAuth()
	edge.now = func() time.Time { return now.Add(-5 * time.Second) }

	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"good", good, nil},
		{"payload bit flipped", flip(frameHeader + 1), ErrForged},
		{"kind changed", flip(5), ErrForged},
		{"timestamp changed", flip(31), ErrForged},
		{"mac bit flipped", flip(len(good) - 1), ErrForged},
		{"wrong key", other.Seal(nil, MsgHandoff, []byte("payload")), ErrForged},
		{"stale", old.Seal(nil, MsgHandoff, nil), ErrStale},
		{"from the future", future.Seal(nil, MsgHandoff, nil), ErrStale},
		{"at the skew limit", edge.Seal(nil, MsgHandoff, nil), nil},
		{"truncated", good[:len(good)-1], ErrMalformed},
		{"bad magic", append([]byte("XHRP"), good[4:]...), ErrMalformed},
		{"empty", nil, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAuth()
			k, p, err := a.Open(tc.frame)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			if tc.want == nil && tc.name == "good" && (k != MsgHandoff || string(p) != "payload") {
				t.Fatalf("Open = %d %q", k, p)
			}
		})
	}

	// Replay: the same frame twice within the window.
	a := newAuth()
	if _, _, err := a.Open(good); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Open(good); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second Open: %v, want ErrReplayed", err)
	}
	// After the window the nonce is forgotten, but the frame is stale.
	now = now.Add(10 * time.Second)
	if _, _, err := a.Open(good); !errors.Is(err, ErrStale) {
		t.Fatalf("late Open: %v, want ErrStale", err)
	}
	if a.Accepted.Load() != 1 || a.Replayed.Load() != 1 || a.Stale.Load() != 1 {
		t.Fatalf("counters accepted %d replayed %d stale %d", a.Accepted.Load(), a.Replayed.Load(), a.Stale.Load())
	}
	if _, _, err := a.Open(sender.Seal(nil, MsgFinHandoff, nil)); err != nil {
		t.Fatal(err)
	}
	if len(a.seen) != 1 {
		t.Fatalf("%d nonces kept, want only the newest (older ones expired)", len(a.seen))
	}
	if _, err := NewAuth([]byte("short"), 0); err == nil {
		t.Fatal("NewAuth accepted a 5-byte key")
	}
}

func TestStateRoundTrip(t *testing.T) {
	st := &TCPState{
		Local: netip.MustParseAddrPort("10.201.0.100:80"), Remote: netip.MustParseAddrPort("10.201.0.2:40000"),
		SndSeq: 0xfffffff0, RcvSeq: 7, MSS: 1448, SndWscale: 7, RcvWscale: 9, Wscale: true, SACK: true,
		Timestamps: true, TSVal: 123456, Window: RepairWindow{1, 2, 3, 4, 5},
		RecvQueue: []byte("GET / HTTP/1.1\r\n\r\n"), SendQueue: []byte("HTTP/1.1 100 Continue\r\n\r\n"), Unsent: 4,
	}
	b := st.AppendBinary(nil)
	got, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Local != st.Local || got.Remote != st.Remote || got.SndSeq != st.SndSeq || got.RcvSeq != st.RcvSeq ||
		got.MSS != st.MSS || got.SndWscale != 7 || got.RcvWscale != 9 || !got.Wscale || !got.SACK || !got.Timestamps ||
		got.TSVal != st.TSVal || got.Window != st.Window || got.Unsent != 4 ||
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

// BenchmarkSealOpen signs and verifies one handoff-sized frame (a state
// with a 200-byte request), the MAC work the front does per moved
// connection besides the acknowledgement and FIN-HANDOFF it opens.
func BenchmarkSealOpen(b *testing.B) {
	a, err := NewAuth([]byte("0123456789abcdef0123456789abcdef"), 0)
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 8+stateFixed+200)
	var frame []byte
	b.ReportAllocs()
	for b.Loop() {
		frame = a.Seal(frame[:0], MsgHandoff, p)
		if _, _, err := a.Open(frame); err != nil {
			b.Fatal(err)
		}
	}
}
