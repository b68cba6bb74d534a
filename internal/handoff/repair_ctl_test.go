//go:build linux

package handoff

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestRepairListenerRefuses sends hand-made frames to a node's handoff
// port: forged and replayed ones must be refused and counted without any
// answer, and a well-signed handoff of a connection that cannot be rebuilt
// must be answered with a failure status (so the front can thaw and relay).
func TestRepairListenerRefuses(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	nodeAuth, _ := NewAuth(key, 0)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := ListenRepair(ln, nodeAuth)
	defer rl.Close()
	c, err := net.Dial("tcp4", rl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	front, _ := NewAuth(key, 0)
	forger, _ := NewAuth([]byte("not the shared key, 32 bytes....."), 0)

	// A well-signed state the node must not rebuild: the client address
	// is unspecified (Linux would quietly connect it to loopback).
	st := &TCPState{Local: netip.MustParseAddrPort("127.0.0.1:1"), Remote: netip.MustParseAddrPort("0.0.0.0:9"), MSS: 1460}
	payload := binary.BigEndian.AppendUint64(nil, 42)
	payload = st.AppendBinary(payload)
	good := front.Seal(nil, MsgHandoff, payload)

	send := func(b []byte) {
		t.Helper()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	send(forger.Seal(nil, MsgHandoff, payload)) // wrong key
	bad := bytes.Clone(good)
	bad[len(bad)-40] ^= 0x80 // payload bit flipped after signing
	send(bad)
	send(good)
	send(good) // replay

	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	frame, err := readFrame(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, p, err := front.Open(frame)
	if err != nil || k != MsgHandoffAck || len(p) < 9 || binary.BigEndian.Uint64(p) != 42 {
		t.Fatalf("ack: kind %d payload %q err %v", k, p, err)
	}
	if p[8] == 0 {
		t.Fatalf("rebuild of an impossible state reported success")
	}
	t.Logf("node refused the impossible state: %s", p[9:])
	// No second answer: the replay was dropped.
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := readFrame(r, nil); err == nil {
		t.Fatal("node answered a replayed or forged frame")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("reading after refusals: %v", err)
		}
	}
	if got := [...]uint64{nodeAuth.Forged.Load(), nodeAuth.Replayed.Load(), nodeAuth.Accepted.Load(), rl.Failed.Load(), rl.Restored.Load()}; got != [...]uint64{2, 1, 1, 1, 0} {
		t.Fatalf("forged, replayed, accepted, failed, restored = %v, want [2 1 1 1 0]", got)
	}
}
