//go:build linux

package handoff

import (
	"math/rand/v2"
	"net"
	"net/netip"

	"shoal/internal/base/accept"
)

// Nodes that accept: in tag mode across hosts the front may stop accepting
// new connections itself (seed 000's front at layer-4 cost: no accept, no
// freeze, no state sent, no close per connection). Its steering program
// then sends a flow its map does not hold, the SYN included, to the node
// of the flow's slot (Steer.SetSlots); that node accepts it on the VIP,
// which it already holds on lo, routes its requests by the front's table
// like those of a connection the front handed over, moving it to another
// node when the table says so, and reports it to the front in its next
// batch (a MsgFlowMoved record with move count 0), after which the front's
// map holds the flow (so that a change of the slots no longer moves it) and
// the policy counts the connection on the node.
//
//	client ──SYN──▶ front's TCX program: no entry, slot k ──▶ node A (listens on VIP:port)
//	A accepts, A ──MsgFlowMoved{seq 0} (batched ≤ 20 ms)──▶ front, which maps the flow to A
//	A reads a request the table gives B: the node-to-node move (repair_tagmsg.go)
//
// The front asks for it in its MsgHello (the VIP's port after the address)
// and the node answers AckAccepts when it listens there; a node whose
// guard does not cover the VIP does not accept (it could not move the
// connections it accepts).

// AckAccepts is set in a MsgHelloAck's flags when the node listens on the
// VIP and port the hello named, so the front may steer new connections to
// it.
const AckAccepts = 2

// maxAcceptVIPs bounds the VIP listeners fronts may ask a node to open.
const maxAcceptVIPs = 8

// acceptOn listens on vip (once) and reports whether this node accepts the
// connections the front steers to it there.
func (l *RepairListener) acceptOn(vip netip.AddrPort) bool {
	if !l.guard.Covers(vip.Addr()) || vip.Port() == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.accepting[vip] != nil {
		return true
	}
	if len(l.accepting) >= maxAcceptVIPs {
		return false
	}
	select {
	case <-l.done:
		return false
	default:
	}
	ln, err := net.Listen("tcp4", vip.String())
	if err != nil {
		return false
	}
	if l.accepting == nil {
		l.accepting = map[netip.AddrPort]net.Listener{}
	}
	l.accepting[vip] = ln
	go accept.Loop(ln, l.acceptDirect, nil)
	return true
}

// acceptDirect takes a connection accepted on the VIP: in tag mode, with a
// connection id and incarnation of this node's making, reported to the
// front, and served like a moved connection.
func (l *RepairListener) acceptDirect(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return
	}
	r, err1 := addrPortOf(tc.RemoteAddr())
	v, err2 := addrPortOf(tc.LocalAddr())
	if err1 != nil || err2 != nil || !r.Addr().Is4() {
		c.Close()
		return
	}
	f := Flow{Client: r, VIP: v}
	self := l.router.selfIndex()
	inc := rand.Uint32() | 1 // never 0
	t := &TagMove{Conn: nodeConnID(self, l.nextConn.Add(1)), Inc: inc, Node: self, Counted: true}
	l.router.unforward(f) // an earlier connection on the 4-tuple moved away from here
	m := &movedConn{TCPConn: tc, flow: f, tag: inc, l: l, tm: t}
	if self >= 0 {
		l.router.reportMove(f, *t)
	}
	l.Accepted.Add(1)
	l.queue(m)
}

// nodeConnID is the connection id a node gives a connection it accepted:
// the top bit set (the front's own ids count up from 1), then the node's
// index and its count of accepted connections, so that ids of different
// nodes never meet in the front's tables.
func nodeConnID(self int, n uint64) uint64 {
	return 1<<63 | uint64(uint16(self))<<47 | n&(1<<47-1)
}
