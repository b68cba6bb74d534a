//go:build linux

package front

import (
	"errors"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/policy"
)

// The repair path's raw accept handoff. RepairPath.Serve, on a connection's
// own goroutine, waits for the node's acknowledgement before it lets the
// socket go; with one request per connection that made every connection
// cost the front a goroutine, a net.Conn, a channel, a timer and three
// wakeups (accept, head, acknowledgement). Here the accept loop has the
// mover freeze the descriptor, steer (or hold) the flow and send the state
// without waiting (RepairMover.MoveFD); the node's control channel reader
// finishes the connection when the answer arrives: the mover has closed the
// frozen descriptor silently on success, or thawed it when the node refused
// or nothing was sent, and it is then served on the normal path (relaying
// that request).

// repairHandoff is one connection handed off from the accept loop, waiting
// for the node's answer.
type repairHandoff struct {
	s  *Server
	p  *RepairPath
	fd int
	id uint64
	b  *control.Backend
	t  ticket         // the request's route, finished when the answer comes
	pr policy.Request // the policy's view of the request (t.pr)
}

// moveRaw hands the connection of m to t's node through the repair mover
// without waiting for the node (the answer then finishes the connection:
// repairHandoff.done), or reports how the normal path is to serve it.
func (p *RepairPath) moveRaw(s *Server, t *ticket, m *rawMove) rawOutcome {
	b, fd, id, data := t.b, m.fd, m.id, m.data
	if !p.mover.Connected(b.Index) {
		// Counted against b until the normal path picks again, so that
		// connections queued behind a first dial are seen (held.go).
		s.cl.Hold(b, id)
		return rawNormal // a node without a channel yet: the normal path dials
	}
	if p.tagOn(s) {
		p.kickPush() // the pick may have changed the shared table
	}
	h := &repairHandoff{s: s, p: p, fd: fd, id: id, b: b, t: *t, pr: *t.pr}
	h.t.pr = &h.pr
	s.cl.Hold(b, id) // until FIN-HANDOFF (held.go)
	err := p.mover.MoveFD(fd, data, b.Index, id, handoff.FetchOf(t.d.Fetch, t.d.Node), h.done)
	if err == nil {
		return rawPending
	}
	s.cl.Release(id)
	switch {
	case errors.Is(err, handoff.ErrNoChannel):
		s.cl.Hold(b, id) // as for a node without a channel above
		return rawNormal // the normal path dials
	case errors.Is(err, handoff.ErrNotFrozen):
		p.fallbackFreeze.Add(1)
		return rawRelay
	case errors.Is(err, handoff.ErrNotMoved):
		p.fallbackNode.Add(1)
		s.logf("front: repair to %s: %v; relaying", b.URL, err)
		return rawRelay
	default: // the descriptor could not be given back and is closed
		s.ctr.connsAccepted.Add(1)
		s.cl.CloseConn(id)
		s.logf("front: repair: %v; connection dropped", err)
		return rawGone
	}
}

// done receives the node's answer (on the control channel's reader, or
// the client's timeout sweep) and finishes the connection.
func (h *repairHandoff) done(err error, read []byte) {
	s, p := h.s, h.p
	s.release(&h.t)
	if err != nil {
		s.cl.Release(h.id)
	}
	switch {
	case err == nil: // the mover closed the frozen descriptor: no FIN, no RST
		p.moved.Add(1)
		s.ctr.connsAccepted.Add(1)
		p.fast.Add(1)
		// The policy's connection ends at FIN-HANDOFF (RepairPath.end).
		s.finish(&h.t, Result{}, nil)
	case errors.Is(err, handoff.ErrNotMoved): // thawed
		p.fallbackNode.Add(1)
		s.ctr.fallback(fallbackFast)
		s.logf("front: repair to %s: %v; relaying", h.b.URL, err)
		s.serveFD(&rawMove{fd: h.fd, data: read, id: h.id, holder: -1}, true)
	default:
		// No answer: the node may own the socket, and the mover closed
		// the front's copy (RepairPath.Serve).
		p.lost.Add(1)
		s.ctr.connsAccepted.Add(1)
		s.ctr.requests.Add(1)
		s.cl.Failed(h.b, err)
		s.cl.CloseConn(h.id)
		s.logf("front: repair to %s: %v; connection dropped", h.b.URL, err)
	}
}
