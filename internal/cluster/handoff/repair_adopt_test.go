//go:build linux

package handoff

import (
	"net/netip"
	"testing"
	"time"
)

// TestRepairMoverAdopt: with nodes accepting, the front takes a flow it
// does not know from a node's report of it (move count 0, or a later move
// that overtook that report), replaces an earlier incarnation of the same
// 4-tuple (ending its connection), never takes back a flow whose end came
// first, and a report that is older than a move already applied only
// counts its request.
func TestRepairMoverAdopt(t *testing.T) {
	kmap := memFlowMap{}
	a := netip.MustParseAddr("10.0.0.11")
	st := &Steer{cfg: SteerConfig{Backend: "bpf"}, m: kmap, flows: map[Flow]int{}, nodes: map[int]netip.Addr{0: a, 1: a, 2: a}}
	var ends []uint64
	var moved []TagMove
	m := &RepairMover{steer: st, flows: map[Flow]movedFlow{}, conns: map[uint64]Flow{},
		cfg: RepairMoverConfig{NodesAccept: true, LeftGrace: time.Minute,
			OnEnd:   func(_ int, conn uint64) { ends = append(ends, conn) },
			OnMoved: func(_ int, ts []TagMove) { moved = append(moved, ts...) }}}
	at := func(step string, f Flow, node int, seq uint32, conn uint64) {
		t.Helper()
		mf, ok := m.flows[f]
		switch {
		case node < 0 && (ok || st.flows[f] != 0 && st.flows[f] != node):
			t.Errorf("%s: flow %v known (%+v), want unknown", step, f, mf)
		case node >= 0 && (!ok || mf.node != node || mf.seq != seq || mf.conn != conn || st.flows[f] != node || !m.Live(conn)):
			t.Errorf("%s: flow %v is %+v (kernel: node %d, live %v), want node %d seq %d conn %d",
				step, f, mf, st.flows[f], m.Live(conn), node, seq, conn)
		}
	}
	f1, f2, f3 := testFlow(1), testFlow(2), testFlow(3)

	// Node 0 accepted f1 and reports it.
	m.flowMoved(0, f1, TagMove{Conn: 101, Inc: 7, Node: 0, Counted: true})
	at("accepted", f1, 0, 0, 101)
	// Node 0 moved it on to node 1, whose report came.
	m.flowMoved(1, f1, TagMove{Conn: 101, Inc: 7, Seq: 1, Node: 1, URL: "/a"})
	at("moved", f1, 1, 1, 101)

	// f2: node 2's report of its move (seq 1) overtakes node 0's report of
	// the accept (seq 0), which is then stale.
	m.flowMoved(2, f2, TagMove{Conn: 102, Inc: 9, Seq: 1, Node: 2, URL: "/b"})
	at("move before accept", f2, 2, 1, 102)
	m.flowMoved(0, f2, TagMove{Conn: 102, Inc: 9, Node: 0, Counted: true})
	at("late accept report", f2, 2, 1, 102)

	// f3 ends on node 1 before node 0's report of accepting it arrives:
	// the report must not bring it back.
	m.fins([]FinNotice{{Flow: f3, Tag: 5}})
	m.flowMoved(0, f3, TagMove{Conn: 103, Inc: 5, Node: 0, Counted: true})
	at("accept report after the end", f3, -1, 0, 0)

	// A new connection on f1's 4-tuple (another incarnation) accepted by
	// node 2 replaces the old one, whose connection ends.
	m.flowMoved(2, f1, TagMove{Conn: 104, Inc: 8, Node: 2, Counted: true})
	at("new incarnation", f1, 2, 0, 104)
	if len(ends) != 1 || ends[0] != 101 {
		t.Errorf("connections ended: %v, want [101] (the replaced incarnation)", ends)
	}
	// The old incarnation's end changes nothing now.
	m.fins([]FinNotice{{Flow: f1, Tag: 7}})
	at("old incarnation's end", f1, 2, 0, 104)
	if m.Adopted.Load() != 3 {
		t.Errorf("adopted %d flows, want 3 (f1 twice, f2)", m.Adopted.Load())
	}
	var stale int
	for _, t := range moved {
		if t.Conn == 0 {
			stale++
		}
	}
	if stale != 1 || len(moved) != 5 {
		t.Errorf("OnMoved heard %d moves, %d stale: want 5, 1 (f2's late accept report): %+v", len(moved), stale, moved)
	}

	// Without NodesAccept, reports about unknown flows are refused.
	m.cfg.NodesAccept = false
	f4 := testFlow(4)
	m.flowMoved(0, f4, TagMove{Conn: 105, Inc: 3, Node: 0, Counted: true})
	at("front accepts", f4, -1, 0, 0)
}

// TestEndedFlowsBounded: the memory of ended flows forgets what is older
// than the grace and never holds more than maxEnded.
func TestEndedFlowsBounded(t *testing.T) {
	var e endedFlows
	t0 := time.Unix(1000, 0)
	e.add(testFlow(1), 1, t0, time.Second)
	if !e.has(testFlow(1), 1, t0.Add(time.Second), time.Second) || e.has(testFlow(1), 2, t0, time.Second) {
		t.Error("ended incarnation not remembered within the grace, or another one matched")
	}
	if e.has(testFlow(1), 1, t0.Add(1001*time.Millisecond), time.Second) {
		t.Error("ended incarnation remembered past the grace")
	}
	for i := range maxEnded + 10 {
		e.add(testFlow(uint16(i)), uint32(i), t0, time.Hour)
	}
	if len(e.q) != maxEnded || len(e.inc) > maxEnded {
		t.Errorf("%d ends queued, %d remembered; bound %d", len(e.q), len(e.inc), maxEnded)
	}
}
