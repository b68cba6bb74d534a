//go:build linux

package handoff

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

// TestTagMoveRoundTrip: a MsgFlowMoved of several records decodes to the
// flows and moves that were encoded, and truncated input is refused.
func TestTagMoveRoundTrip(t *testing.T) {
	flows := []Flow{
		{Client: netip.MustParseAddrPort("10.0.0.2:40000"), VIP: netip.MustParseAddrPort("10.0.0.100:80")},
		{Client: netip.MustParseAddrPort("10.0.0.3:40001"), VIP: netip.MustParseAddrPort("10.0.0.100:80")},
	}
	moves := []TagMove{
		{Conn: 7, Seq: 3, Inc: 0xdeadbeef, Node: 2, URL: "/f00001"},
		{Conn: 1 << 40, Seq: 1, Inc: 5, Node: 0, Counted: true, URL: ""},
	}
	var b []byte
	for i := range flows {
		b = AppendFlowMoved(b, flows[i], moves[i])
	}
	p := b
	for i := range flows {
		f, m, rest, err := parseFlowMoved(p)
		if err != nil || f != flows[i] || m != moves[i] {
			t.Fatalf("record %d: got %v %+v %v, want %v %+v", i, f, m, err, flows[i], moves[i])
		}
		p = rest
	}
	if len(p) != 0 {
		t.Fatalf("%d bytes left over", len(p))
	}
	if _, _, _, err := parseFlowMoved(b[:len(b)-1-len(b)/2]); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated record: err %v, want ErrMalformed", err)
	}
}

// TestRepairRouterRoute: the node's copy of the table answers a URL with
// one cache holder itself, takes tbccrd's step (1) for a URL with several
// (least loaded, the connection not counted against this node, a tie
// keeping it here), and asks for a full holder, an unknown peer and an
// unknown URL.
func TestRepairRouterRoute(t *testing.T) {
	count := func(n int) string { return string(binary.BigEndian.AppendUint32(nil, uint32(n))) }
	b := binary.BigEndian.AppendUint32(nil, 1) // this node is node 1
	b = AppendTable(b, TablePeer, 0, "10.0.0.11:7070")
	b = AppendTable(b, TablePeer, 2, "10.0.0.13:7070")
	b = AppendTable(b, TableLoad, 0, count(3))
	b = AppendTable(b, TableLoad, 1, count(4)) // 3 besides the connection itself
	b = AppendTable(b, TableLoad, 2, count(2))
	b = AppendTable(b, TableLimit, 0, count(4))
	b = AppendTable(b, TableTag, 2, "/one")
	b = AppendTable(b, TableHolders, 0b111, "/all")
	b = AppendTable(b, TableHolders, 0b011, "/tie")
	b = AppendTable(b, TableHolders, 0b1001, "/nopeer") // node 3's port is unknown
	b = AppendTable(b, TableTag, 3, "/gone")
	r := newRepairRouter(&RepairListener{})
	if err := r.applyTable(nil, b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		node int
		ok   bool
	}{
		{"/one", 2, true},
		{"/all", 2, true},    // loads 3, 3 (4 − itself), 2
		{"/tie", 1, true},    // 3 and 3: stays
		{"/nopeer", 0, true}, // node 3 skipped
		{"/gone", -1, false}, // no port for node 3
		{"/unknown", -1, false},
	} {
		if n, ok := r.route(tc.url); n != tc.node || ok != tc.ok {
			t.Errorf("route(%s) = %d, %v; want %d, %v", tc.url, n, ok, tc.node, tc.ok)
		}
	}
	// With the limit at 2 even the least loaded holder (node 2, at 2) is
	// full: step (2) is the front's.
	r.applyTable(nil, AppendTable(binary.BigEndian.AppendUint32(nil, 1), TableLimit, 0, count(2)))
	if n, ok := r.route("/all"); ok {
		t.Errorf("route(/all) at limit 2 = %d, want an ask", n)
	}
	// A reset drops every entry.
	r.applyTable(nil, AppendTable(binary.BigEndian.AppendUint32(nil, 1), TableReset, 0, ""))
	if n, ok := r.route("/one"); ok {
		t.Errorf("route(/one) after a reset = %d, want an ask", n)
	}
}
