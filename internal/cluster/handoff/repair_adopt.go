//go:build linux

package handoff

import (
	"fmt"
	"time"
)

// The front's side of nodes that accept (repair_accept.go): which nodes
// new connections go to, and the flows nodes report accepting.

// acceptPort is the port nodes are asked to accept on (MsgHello): the
// VIP's under NodesAccept, else 0.
func (m *RepairMover) acceptPort() uint16 {
	if !m.cfg.NodesAccept {
		return 0
	}
	return m.cfg.VIP.Port()
}

// Accepts reports whether node i's channel is up and the node said it
// accepts new connections on the VIP.
func (m *RepairMover) Accepts(i int) bool {
	c := m.client(i)
	return c != nil && c.Connected() && c.Accepts()
}

// SetAccepting sends the VIP's new connections to nodes (Steer.SetSlots):
// none gives them back to the front; the slots of the nodes in gone (they
// left recently) go to the front.
func (m *RepairMover) SetAccepting(nodes, gone []int) error {
	if err := m.steer.SetSlots(nodes, gone); err != nil {
		return fmt.Errorf("handoff: repair mover: %w", err)
	}
	return nil
}

// maxAdopted bounds the flows the mover steers (the kernel map's size):
// a node cannot make it hold more.
const maxAdopted = bpfMaxFlows

// adopt records flow f, which node reported accepting (or, reordered, a
// later move of it), as a flow of incarnation t.Inc and connection t.Conn,
// replacing an earlier incarnation of the 4-tuple; false when f's
// incarnation ended already (its end overtook the report) or the table is
// full. Called with m.mu held; the caller steers it.
func (m *RepairMover) adopt(f Flow, t TagMove, now time.Time) bool {
	if m.ended.has(f, t.Inc, now, m.cfg.LeftGrace) || len(m.flows) >= maxAdopted {
		m.Stale.Add(1)
		return false
	}
	if old, ok := m.flows[f]; ok {
		m.dropFlow(f, old)
	}
	m.flows[f] = movedFlow{tag: t.Inc, node: -1, conn: t.Conn}
	if t.Conn != 0 {
		m.conns[t.Conn] = f
	}
	m.Adopted.Add(1)
	return true
}

// endedFlows remembers, for a while, the incarnations of flows that ended:
// a node reports a connection it accepted in its next batch, and when the
// connection moved on at once and ended on another node, that node's end
// may reach the front first; without this the late report would steer an
// ended flow for ever.
type endedFlows struct {
	inc map[Flow]uint32
	q   []endedAt // oldest first
}

// endedAt is one ended incarnation and when it ended.
type endedAt struct {
	f   Flow
	inc uint32
	at  time.Time
}

// maxEnded bounds endedFlows (a few seconds of ends at a high rate).
const maxEnded = 1 << 16

// add remembers that f's incarnation inc ended at now, forgetting what is
// older than grace.
func (e *endedFlows) add(f Flow, inc uint32, now time.Time, grace time.Duration) {
	e.prune(now, grace)
	if len(e.q) >= maxEnded {
		e.pop()
	}
	if e.inc == nil {
		e.inc = map[Flow]uint32{}
	}
	e.inc[f] = inc
	e.q = append(e.q, endedAt{f, inc, now})
}

// has reports whether f's incarnation inc ended within grace.
func (e *endedFlows) has(f Flow, inc uint32, now time.Time, grace time.Duration) bool {
	e.prune(now, grace)
	v, ok := e.inc[f]
	return ok && v == inc
}

func (e *endedFlows) prune(now time.Time, grace time.Duration) {
	for len(e.q) > 0 && now.Sub(e.q[0].at) > grace {
		e.pop()
	}
}

func (e *endedFlows) pop() {
	x := e.q[0]
	if v, ok := e.inc[x.f]; ok && v == x.inc {
		delete(e.inc, x.f)
	}
	e.q = e.q[1:]
}
