//go:build linux

package handoff

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// memFlowMap is a flowMap in memory: the mover's bookkeeping without a
// kernel.
type memFlowMap map[Flow]uint32

func (m memFlowMap) put(f Flow, mark uint32, _ netip.Addr) error { m[f] = mark; return nil }
func (m memFlowMap) putAll(fs []Flow, mark uint32, _ netip.Addr) error {
	for _, f := range fs {
		m[f] = mark
	}
	return nil
}
func (m memFlowMap) del(fs []Flow) error {
	for _, f := range fs {
		delete(m, f)
	}
	return nil
}
func (m memFlowMap) count() (int, error)      { return len(m), nil }
func (m memFlowMap) close() error             { return nil }
func (m memFlowMap) setSlots([][8]byte) error { return nil }

// testFlow is a flow from client port port.
func testFlow(port uint16) Flow {
	return Flow{Client: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), port), VIP: netip.MustParseAddrPort("10.0.0.100:80")}
}

// TestFlowLeftRoundTrip: a MsgFlowLeft of several records decodes to what
// was encoded, and a truncated record is refused.
func TestFlowLeftRoundTrip(t *testing.T) {
	b := AppendFlowLeft(nil, testFlow(1), 7, 3)
	b = AppendFlowLeft(b, testFlow(2), 0xfeedface, 1)
	for i, want := range []struct {
		f        Flow
		inc, seq uint32
	}{{testFlow(1), 7, 3}, {testFlow(2), 0xfeedface, 1}} {
		f, inc, seq, rest, err := ParseFlowLeft(b)
		if err != nil || f != want.f || inc != want.inc || seq != want.seq {
			t.Fatalf("record %d: %v %d %d %v, want %v %d %d", i, f, inc, seq, err, want.f, want.inc, want.seq)
		}
		b = rest
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left over", len(b))
	}
	if _, _, _, _, err := ParseFlowLeft(AppendFlowLeft(nil, testFlow(1), 1, 1)[:flowLeftLen-1]); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated record: err %v, want ErrMalformed", err)
	}
}

// TestRepairMoverFlowsLeft: the front ends a flow a node reports left only
// if it steers the flow to that node, at the same incarnation and an older
// move than the report's, and only if no later move came during the
// grace; an ended flow goes from the kernel map and reaches OnEnd.
func TestRepairMoverFlowsLeft(t *testing.T) {
	kmap := memFlowMap{}
	a := netip.MustParseAddr("10.0.0.11")
	st := &Steer{cfg: SteerConfig{Backend: "bpf"}, m: kmap, flows: map[Flow]int{}, nodes: map[int]netip.Addr{0: a, 1: a, 2: a}}
	type ended struct {
		node int
		conn uint64
	}
	var ends []ended
	m := &RepairMover{steer: st, flows: map[Flow]movedFlow{}, conns: map[uint64]Flow{},
		cfg: RepairMoverConfig{OnEnd: func(node int, conn uint64) { ends = append(ends, ended{node, conn}) }}}
	const inc = 100
	flows := []struct {
		port uint16
		mf   movedFlow
	}{
		{1, movedFlow{tag: inc, node: 0, seq: 3, conn: 11}},                // left: ended
		{2, movedFlow{tag: inc, node: 1, seq: 3, conn: 12}},                // steered to another node
		{3, movedFlow{tag: inc, node: 0, seq: 4, conn: 13}},                // the move away was applied
		{4, movedFlow{tag: inc - 1, node: 0, seq: 1, conn: 14}},            // another incarnation
		{5, movedFlow{tag: inc, node: 0, seq: 2, conn: 15}},                // moved on during the grace
		{6, movedFlow{tag: inc, node: 0, seq: 0, conn: 16, pending: true}}, // the front's own move under way
	}
	for _, c := range flows {
		f := testFlow(c.port)
		if err := st.Add(f, c.mf.node); err != nil {
			t.Fatal(err)
		}
		m.flows[f], m.conns[c.mf.conn] = c.mf, f
	}
	var p []byte
	for _, c := range flows {
		p = AppendFlowLeft(p, testFlow(c.port), inc, 4)
	}
	p = append(p, 1, 2, 3) // a malformed tail is ignored
	cand := m.leftCandidates(0, p)
	var got []uint16
	for _, c := range cand {
		got = append(got, c.f.Client.Port())
	}
	if !slices.Equal(got, []uint16{1, 5}) {
		t.Fatalf("candidates: client ports %v, want [1 5]", got)
	}
	// Flow 5's next holder reports a later move before the grace ends.
	m.flowMoved(2, testFlow(5), TagMove{Conn: 15, Inc: inc, Seq: 5, Node: 2})
	m.dropLeft(cand)
	if m.Left.Load() != 1 || len(ends) != 1 || ends[0] != (ended{0, 11}) {
		t.Errorf("left %d, ends %v: want 1, [{0 11}]", m.Left.Load(), ends)
	}
	if _, ok := kmap[testFlow(1)]; ok || m.Live(11) || st.Len() != len(flows)-1 {
		t.Errorf("flow 1 still steered (kernel map %v, live %v), %d flows steered: want %d", ok, m.Live(11), st.Len(), len(flows)-1)
	}
	if n, ok := st.flows[testFlow(5)]; !ok || n != 2 {
		t.Errorf("flow 5 steered to %d (%v), want node 2", n, ok)
	}
}

// TestRepairRouterPeerDown: when a node's channel breaks, the flows moved
// there and still remembered are queued as left, once per break; one moved
// while the channel broke is queued at once; one taken back is not.
func TestRepairRouterPeerDown(t *testing.T) {
	r := newRepairRouter(&RepairListener{})
	r.peers[1] = netip.MustParseAddrPort("10.0.0.12:7070")
	r.peers[2] = netip.MustParseAddrPort("10.0.0.13:7070")
	r.forward(testFlow(1), 1, 7, 2, r.downEpoch(1))
	r.forward(testFlow(2), 2, 7, 3, r.downEpoch(2))
	r.forward(testFlow(3), 1, 8, 1, r.downEpoch(1))
	r.unforward(testFlow(3)) // moved back here
	ep := r.downEpoch(1)
	r.peerDown(1)
	r.forward(testFlow(4), 1, 9, 5, ep) // its move was under way during the break
	want := AppendFlowLeft(AppendFlowLeft(nil, testFlow(1), 7, 2), testFlow(4), 9, 5)
	if string(r.left) != string(want) {
		t.Errorf("queued %x, want flows 1 and 4: %x", r.left, want)
	}
	if r.l.Left.Load() != 2 {
		t.Errorf("Left %d, want 2", r.l.Left.Load())
	}
}

// TestRepairMoverFlowsMovedBatch: one MsgFlowMoved frame of several moves
// steers each applicable flow to its sender in order (a flow moved twice
// in the frame ends at its later move; an older or repeated move, another
// incarnation, an unknown flow and one still pending are refused), and
// OnMoved hears the applied ones with their connections and the stale ones
// of a known incarnation without.
func TestRepairMoverFlowsMovedBatch(t *testing.T) {
	kmap := memFlowMap{}
	a := netip.MustParseAddr("10.0.0.11")
	st := &Steer{cfg: SteerConfig{Backend: "bpf"}, m: kmap, flows: map[Flow]int{}, nodes: map[int]netip.Addr{0: a, 1: a, 2: a}}
	var moved []TagMove
	m := &RepairMover{steer: st, flows: map[Flow]movedFlow{}, conns: map[uint64]Flow{},
		cfg: RepairMoverConfig{OnMoved: func(i int, ts []TagMove) {
			if i != 2 {
				t.Errorf("OnMoved for node %d, want 2", i)
			}
			moved = append(moved, ts...)
		}}}
	const inc = 100
	for port, mf := range map[uint16]movedFlow{
		1: {tag: inc, node: 0, seq: 1, conn: 11},
		2: {tag: inc, node: 1, seq: 4, conn: 12},
		3: {tag: inc - 1, node: 0, seq: 1, conn: 13},
		4: {tag: inc, node: 0, conn: 14, pending: true},
	} {
		if err := st.Add(testFlow(port), mf.node); err != nil {
			t.Fatal(err)
		}
		m.flows[testFlow(port)], m.conns[mf.conn] = mf, testFlow(port)
	}
	var p []byte
	for _, r := range []struct {
		port     uint16
		inc, seq uint32
	}{
		{1, inc, 2}, // applied
		{2, inc, 5}, // applied
		{2, inc, 5}, // repeated: stale
		{1, inc, 3}, // applied again, later
		{1, inc, 2}, // older than the last applied: stale
		{3, inc, 2}, // another incarnation: refused, unheard
		{4, inc, 1}, // pending: refused
		{9, inc, 1}, // unknown
	} {
		p = AppendFlowMoved(p, testFlow(r.port), TagMove{Inc: r.inc, Seq: r.seq, Node: 2, URL: "/x"})
	}
	m.tagMsg(2, MsgFlowMoved, p)
	if m.Retagged.Load() != 3 || m.Stale.Load() != 5 {
		t.Errorf("retagged %d, stale %d: want 3, 5", m.Retagged.Load(), m.Stale.Load())
	}
	for port, want := range map[uint16]int{1: 2, 2: 2, 3: 0, 4: 0} {
		if n := st.flows[testFlow(port)]; n != want {
			t.Errorf("flow %d steered to %d, want %d", port, n, want)
		}
	}
	if mf := m.flows[testFlow(1)]; mf.seq != 3 || mf.node != 2 {
		t.Errorf("flow 1: node %d move %d, want node 2 move 3", mf.node, mf.seq)
	}
	var conns []uint64
	stale := 0
	for _, t := range moved {
		if t.Conn == 0 {
			stale++
		} else {
			conns = append(conns, t.Conn)
		}
	}
	slices.Sort(conns)
	if !slices.Equal(conns, []uint64{11, 11, 12}) || stale != 3 {
		t.Errorf("OnMoved: connections %v and %d stale, want [11 11 12] and 3 (repeated, older, pending)", conns, stale)
	}
}

// TestUntilTick: the wait ends on the next multiple of the period, at most
// a period away.
func TestUntilTick(t *testing.T) {
	const p = 10 * time.Millisecond
	base := time.Unix(1700000000, 0) // on a tick
	for _, c := range []struct{ at, want time.Duration }{
		{0, p}, {time.Microsecond, p - time.Microsecond}, {3 * time.Millisecond, 7 * time.Millisecond},
		{p - time.Nanosecond, time.Nanosecond}, {p, p},
	} {
		if got := untilTick(base.Add(c.at), p); got != c.want {
			t.Errorf("untilTick(tick+%v) = %v, want %v", c.at, got, c.want)
		}
	}
}
