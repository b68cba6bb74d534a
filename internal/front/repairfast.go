//go:build linux

package front

import (
	"errors"
	"time"

	"shoal/internal/cluster"
	"shoal/internal/handoff"
	"shoal/internal/policy"
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
	s     *Server
	p     *RepairPath
	fd    int
	id    uint64
	b     *cluster.Backend
	pr    policy.Request // the policy's view of the request (for Done)
	start time.Time      // zero without an Observer
}

// repair hands the connection on fd, whose first bytes are data, to the
// node the policy picks without waiting for the node, and reports whether
// it did (the answer then finishes the connection: repairHandoff.done). If
// not, the caller serves the connection on the normal path with id as its
// id (0: allocate one), relaying its first request without a handoff when
// relay is set.
func (ra *rawAccept) repair(fd int, data []byte) (id uint64, relay, ok bool) {
	s, p := ra.s, ra.rp
	id, b, start := ra.pick(data)
	if b == nil {
		return id, false, false // the normal path answers it (400, 503, …)
	}
	pr := &ra.pr
	if !p.mover.Connected(b.Index) {
		s.cl.Done(b, pr)
		// Counted against b until the normal path picks again, so that
		// connections queued behind a first dial are seen (held.go).
		s.cl.Hold(b, id)
		return id, false, false // a node without a channel yet: the normal path dials
	}
	h := &repairHandoff{s: s, p: p, fd: fd, id: id, b: b, pr: *pr, start: start}
	s.cl.Hold(b, id) // until FIN-HANDOFF (held.go)
	err := p.mover.MoveFD(fd, data, b.Index, id, h.done)
	if err == nil {
		return id, false, true
	}
	s.cl.Release(id)
	s.cl.Done(b, pr)
	switch {
	case errors.Is(err, handoff.ErrNoChannel):
		s.cl.Hold(b, id)        // as for a node without a channel above
		return id, false, false // the normal path dials
	case errors.Is(err, handoff.ErrNotFrozen):
		p.fallbackFreeze.Add(1)
		return id, true, false
	case errors.Is(err, handoff.ErrNotMoved):
		p.fallbackNode.Add(1)
		s.logf("front: repair to %s: %v; relaying", b.URL, err)
		return id, true, false
	default: // the descriptor could not be given back and is closed
		s.ctr.connsAccepted.Add(1)
		s.cl.CloseConn(id)
		s.logf("front: repair: %v; connection dropped", err)
		return id, false, true
	}
}

// done receives the node's answer (on the control channel's reader, or
// the client's timeout sweep) and finishes the connection.
func (h *repairHandoff) done(err error, read []byte) {
	s, p := h.s, h.p
	s.cl.Done(h.b, &h.pr)
	if err != nil {
		s.cl.Release(h.id)
	}
	switch {
	case err == nil: // the mover closed the frozen descriptor: no FIN, no RST
		p.moved.Add(1)
		s.ctr.connsAccepted.Add(1)
		s.ctr.requests.Add(1)
		s.pathCounter(p.Name()).Add(1)
		p.fast.Add(1)
		// The policy's connection ends at FIN-HANDOFF (RepairPath.end).
		if o := s.cfg.Observer; o != nil {
			o.Observe(Observation{Node: h.b.Index, NodeURL: h.b.URL, Path: p.Name(), Elapsed: time.Since(h.start)})
		}
	case errors.Is(err, handoff.ErrNotMoved): // thawed
		p.fallbackNode.Add(1)
		s.handoff.fastFallback.Add(1)
		s.logf("front: repair to %s: %v; relaying", h.b.URL, err)
		s.serveFD(h.fd, h.id, read, true)
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
