//go:build linux

package handoff

import "time"

// Ending flows whose new holder died before it reported them.
//
// In tag mode a node that takes a connection over from another node
// reports it to the front in a batched MsgFlowMoved (≤ RepairNoteDelay).
// If that node dies with the report still batched, the front's map keeps
// naming the old holder, which no longer has the connection, and nothing
// would ever end the entry: no node will send its FIN-HANDOFF, and the
// channel that broke is not the named node's. The entry then only grows
// the table, keeps the connection counted against the old holder, and
// steers a later connection on the same 4-tuple to the wrong node.
//
// The old holder is the one that knows: its channel to the new holder
// breaks, and it still remembers the flows it moved there (they are
// forwarded for forwardLinger, then passed). It reports them in a
// MsgFlowLeft (flow, incarnation, the move count of its move away), as it
// does a flow it reset because the move's outcome was lost with the
// channel. It costs nothing while no channel breaks. An idle sweep (a
// last-seen stamp per flow, as an LRU flow table keeps) would also end
// these entries, but it needs a write per packet in the front's ingress
// program and guesses from idleness: an idle keep-alive connection its node
// still serves would lose its entry. Asking every node which flows it holds
// whenever a channel breaks would cover more failures, at the price of a
// snapshot of every node's connections per failure and of flows in flight
// between two nodes, which neither claims for a moment.
//
// The front trusts a record only for a flow it steers to the sender (the
// frame's per-node key names it, as for MsgFlowMoved), of the same
// incarnation and an older move count than the record's: a node can only
// withdraw steering that points at itself. Since the dead node may have
// moved the flow on before it died (its next holder's report is then on
// its way), the front waits LeftGrace and ends the flow only if nothing
// changed it meanwhile. A report after that would be late anyway: the old
// holder stopped forwarding the flow after forwardLinger.

// DefaultLeftGrace is RepairMoverConfig.LeftGrace's default: the old
// holder's forwardLinger, the time the repair path already allows a move
// report to reach the front.
const DefaultLeftGrace = forwardLinger

// leftFlow is a flow a MsgFlowLeft named, as the front's map had it then.
type leftFlow struct {
	f        Flow
	node     int
	inc, seq uint32
}

// flowsLeft handles node i's MsgFlowLeft: each record naming a flow steered
// to i, of the same incarnation and at an older move, is ended after
// LeftGrace unless the flow changed meanwhile (dropLeft).
func (m *RepairMover) flowsLeft(i int, p []byte) {
	if cand := m.leftCandidates(i, p); len(cand) > 0 {
		time.AfterFunc(m.cfg.LeftGrace, func() { m.dropLeft(cand) })
	}
}

// leftCandidates is the flows of MsgFlowLeft payload p, from node i, that
// the front steers to i at an older move of the same incarnation, as the
// map has them now. A malformed tail is ignored, like MsgFlowMoved's.
func (m *RepairMover) leftCandidates(i int, p []byte) []leftFlow {
	var cand []leftFlow
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(p) > 0 {
		f, inc, seq, rest, err := ParseFlowLeft(p)
		if err != nil {
			break
		}
		p = rest
		if mf, ok := m.flows[f]; ok && !mf.pending && mf.node == i && mf.tag == inc && mf.seq < seq {
			cand = append(cand, leftFlow{f: f, node: i, inc: inc, seq: mf.seq})
		}
	}
	return cand
}

// dropLeft ends the flows of cand that are still as flowsLeft found them:
// their steering goes (one batch, unsteerDead), and OnEnd tells the
// caller, as a FIN-HANDOFF would have.
func (m *RepairMover) dropLeft(cand []leftFlow) {
	var gone []Flow
	var ended []movedFlow
	m.mu.Lock()
	for _, c := range cand {
		mf, ok := m.flows[c.f]
		if !ok || mf.pending || mf.node != c.node || mf.tag != c.inc || mf.seq != c.seq {
			continue // ended, moved again or reused meanwhile
		}
		m.dropFlow(c.f, mf)
		gone = append(gone, c.f)
		ended = append(ended, mf)
	}
	var err error
	if len(gone) > 0 {
		err = m.unsteerDead(gone)
	}
	m.mu.Unlock()
	m.Left.Add(uint64(len(gone)))
	if err != nil && m.cfg.OnError != nil {
		m.cfg.OnError(err)
	}
	if m.cfg.OnEnd != nil {
		for _, mf := range ended {
			m.cfg.OnEnd(mf.node, mf.conn)
		}
	}
}
