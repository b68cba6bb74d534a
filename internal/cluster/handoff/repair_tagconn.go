//go:build linux

package handoff

import (
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// rebuild decodes a handoff's payload (after its id), rebuilds the socket
// and returns the moved connection. A tag-mode handoff from the front (move
// count 0) names the front's channel and this node's index; one from
// another node is reported to the front (MsgFlowMoved, batched; the front
// then steers the flow here), ahead of anything this node says later about
// the connection on the same channel (its notes, its FIN-HANDOFF, which
// goes in the same batch after the reports).
func (l *RepairListener) rebuild(ch *channel, k MsgKind, p []byte) (net.Conn, *TCPState, error) {
	var tm *TagMove
	if k == MsgTagHandoff {
		t, rest, err := UnmarshalTagMove(p)
		if err != nil {
			return nil, nil, err
		}
		tm, p = &t, rest
	}
	st, err := UnmarshalState(p)
	if err != nil {
		return nil, nil, err
	}
	front := ch
	if tm != nil && tm.Seq == 0 {
		l.router.setFront(ch, tm.Node)
		tm.Inc = st.RcvSeq // the front's incarnation tag for the flow
	} else if tm != nil {
		if front = l.router.frontChannel(); front == nil {
			return nil, nil, errNoFront
		}
		if self := l.router.selfIndex(); self != tm.Node {
			return nil, nil, fmt.Errorf("handoff: move for node %d reached node %d", tm.Node, self)
		}
	}
	// A flow this node moved away and now takes back is no longer
	// forwarded (nor held) here.
	l.router.unforward(Flow{Client: st.Remote, VIP: st.Local})
	tc, err := Restore(st)
	if err != nil {
		return nil, nil, err
	}
	m := &movedConn{TCPConn: tc, flow: Flow{Client: st.Remote, VIP: st.Local}, tag: st.RcvSeq, ch: front, l: l,
		fetch: st.Fetch, tm: tm}
	if tm != nil {
		m.tag = tm.Inc
	}
	if tm != nil && tm.Seq > 0 {
		m.forwarded = l.router.expectForwarding(m.flow, tm.Seq)
		l.router.reportMove(m.flow, *tm)
		l.router.movedHere()
	}
	return m, st, nil
}

// forwardWait bounds how long a connection moved here waits for the old
// holder's MsgForwarding before it is served anyway.
const forwardWait = time.Second

// serveForwarded queues m for Accept once the old holder forwards its flow
// here (MsgForwarding) or forwardWait passed.
func (l *RepairListener) serveForwarded(m *movedConn) {
	t := time.NewTimer(forwardWait)
	defer t.Stop()
	select {
	case <-m.forwarded:
	case <-t.C:
		l.router.forgetForwarding(m.flow, m.tm.Seq)
		l.ForwardLate.Add(1)
	case <-l.done:
		m.Close()
		return
	}
	l.queue(m)
}

// The node's server (internal/cluster/node) routes each request on a moved
// connection in tag mode through these methods: they make *movedConn a
// node.Handed and node.TagRouted, as passfd's FDConn is.

// errNoHandBack: across hosts a connection is never handed back to the
// front; a request nobody can take is served where it is.
var errNoHandBack = errors.New("handoff: repair connections are not handed back")

// NetConn is the connection itself (the node serves it directly).
func (m *movedConn) NetConn() net.Conn { return m }

// Preread is empty: the request bytes are in the rebuilt receive queue.
func (m *movedConn) Preread() []byte { return nil }

// OneRequest is false: a moved connection is served until it ends or moves.
func (m *movedConn) OneRequest() bool { return false }

// HandBack always fails (errNoHandBack).
func (m *movedConn) HandBack([]byte) error { return errNoHandBack }

// Ended does nothing: the end is reported by Close (FIN-HANDOFF).
func (m *movedConn) Ended() {}

// TagMode reports whether the front handed the connection over in tag mode.
func (m *movedConn) TagMode() bool { return m.tm != nil }

// Self is this node's index in the front's cluster.
func (m *movedConn) Self() int { return m.l.router.selfIndex() }

// Route is the node that should serve a request for key: the table's
// entry, else the front's answer to an ask; -1 when neither can be used
// (the node then serves the request itself).
func (m *movedConn) Route(key string) int {
	r := m.l.router
	to, ok := r.route(key)
	if !ok {
		m.l.Asked.Add(1)
		if to = r.ask(m.tm.Conn, key); to < 0 {
			return -1
		}
		m.asked = key
	}
	if to == r.selfIndex() {
		return to
	}
	if !r.usable(to) || !m.l.guard.Covers(m.flow.VIP.Addr()) {
		return -1 // no port to move to, or no guard to hold the flow
	}
	return to
}

// Served records a request this node served by the table (or kept): the
// front hears of it in the next notes frame, unless it answered an ask for
// it and so counted it already.
func (m *movedConn) Served(key string) {
	if m.asked == key && key != "" {
		m.asked = ""
		return
	}
	m.l.router.note(m.tm.Seq, m.tm.Conn, key)
}

// MoveTo moves the connection, with rest (the client bytes this node read
// and did not consume), to node: seed 000's back-end to back-end handoff
// with seed 002's state transfer. It waits until the client acknowledged
// every answer byte sent so far (bounded; otherwise the move fails and the
// connection stays), holds the flow in the node's guard so that the socket
// frozen next takes no segment the new node would miss, freezes it, and
// sends the sealed state to node, which reports the move to the front (the
// front steers the flow there) before it acknowledges. Then the hold turns
// into a forward (segments the front still steers here go on to node, see
// repairRouter.forward) and the frozen copy is closed silently. nil: the connection left this node (moved, or given up when
// the outcome is unknown); an error: it is still here, normal again.
func (m *movedConn) MoveTo(node int, key string, rest []byte) error {
	counted := m.asked == key
	m.asked = ""
	cl, err := m.l.router.client(node)
	if err != nil {
		return err
	}
	if err := m.drained(); err != nil {
		m.l.MoveFailed.Add(1)
		return err
	}
	g, r := m.l.guard, m.l.router
	epoch := r.downEpoch(node)
	r.unforward(m.flow)
	if err := g.Hold(m.flow); err != nil {
		return err
	}
	st, err := Freeze(m.TCPConn, rest)
	if err != nil {
		g.Unhold(m.flow)
		m.l.MoveFailed.Add(1)
		return fmt.Errorf("handoff: move to node %d: %w", node, err)
	}
	t := TagMove{Conn: m.tm.Conn, Seq: m.tm.Seq + 1, Inc: m.tag, Node: node, Counted: counted, URL: key}
	err = cl.HandoffTag(t.AppendBinary(nil), st)
	if err != nil && !NodeMayOwn(err) {
		terr := Thaw(m.TCPConn)
		g.Unhold(m.flow)
		if terr == nil {
			m.l.MoveFailed.Add(1)
			return fmt.Errorf("handoff: move to node %d: %w", node, err)
		}
	}
	if errors.Is(err, ErrChannelBroken) && m.reset() {
		// The node's channel broke with the state on it: most likely the
		// node died, and with it any copy it rebuilt. The client, whose
		// request this node had acknowledged, would wait for an answer
		// without sending anything: reset it instead.
		g.Unhold(m.flow)
		r.reportLeft(m.flow, m.tag, t.Seq) // node's report of it, if any, may be lost too
		m.l.MoveLost.Add(1)
		return nil
	}
	// Moved, or no answer (node may have it): either way this node lets
	// go, and the flow's segments go on to node — to the rebuilt socket,
	// or, if node's process died, to a kernel without its guard that
	// resets the client instead of leaving it hanging.
	m.gone = true
	r.forward(m.flow, node, m.tag, t.Seq, epoch)
	if err == nil {
		r.movedAway(node)
	}
	m.TCPConn.Close() // frozen: no FIN, no RST
	if err == nil {
		cl.SendMsg(MsgForwarding, AppendForwarding(nil, m.flow, t.Seq)) // node may answer now
	}
	if err != nil {
		m.l.MoveLost.Add(1)
	} else {
		m.l.MovedOut.Add(1)
	}
	return nil
}

// reset thaws the frozen socket and closes it with a reset (SO_LINGER 0),
// and reports whether that worked; the connection is gone either way.
func (m *movedConn) reset() bool {
	m.gone = true
	if Thaw(m.TCPConn) != nil {
		m.TCPConn.Close() // still frozen: silent
		return false
	}
	m.TCPConn.SetLinger(0)
	m.TCPConn.Close()
	return true
}

// moveDrainTimeout bounds MoveTo's wait for the client's ACK of the answers
// already sent.
const moveDrainTimeout = 2 * time.Second

// drained waits until the socket's send queue is empty: a move while the
// previous answer is still being sent waits for it, since the client's ACKs
// for it would reach the old node (held) and the new one would have to
// retransmit it after a full timeout.
func (m *movedConn) drained() error {
	rc, err := m.TCPConn.SyscallConn()
	if err != nil {
		return fmt.Errorf("handoff: move: %w", err)
	}
	deadline := time.Now().Add(moveDrainTimeout)
	wait := 20 * time.Microsecond
	for {
		var n int
		var ierr error
		if cerr := rc.Control(func(fd uintptr) { n, ierr = rawIoctlInt(int(fd), unix.SIOCOUTQ) }); cerr != nil {
			return fmt.Errorf("handoff: move: %w", cerr)
		}
		if ierr != nil {
			return fmt.Errorf("handoff: move: SIOCOUTQ: %w", ierr)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("handoff: move: %d answer bytes still unacknowledged after %v", n, moveDrainTimeout)
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Millisecond)
	}
}
