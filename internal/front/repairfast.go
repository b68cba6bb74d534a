//go:build linux

package front

import (
	"errors"

	"shoal/internal/cluster"
	"shoal/internal/handoff"
	"shoal/internal/policy"
)

// The repair path's raw accept handoff. RepairPath.Serve, on a connection's
// own goroutine, waits for the node's acknowledgement before it lets the
// socket go; with one request per connection that made every connection
// cost the front a goroutine, a net.Conn, a channel, a timer and three
// wakeups (accept, head, acknowledgement). Here the accept loop freezes the
// descriptor, steers the flow and sends the state without waiting
// (RepairClient.HandoffAsync); the node's control channel reader finishes
// the connection when the answer arrives: closes the frozen descriptor
// silently on success, or thaws it and serves it on the normal path
// (relaying that request) when the node refused or nothing was sent.

// repairHandoff is one connection handed off from the accept loop, waiting
// for the node's answer.
type repairHandoff struct {
	s  *Server
	p  *RepairPath
	fd int
	id uint64
	b  *cluster.Backend
	t  ticket         // the request's route, finished when the answer comes
	pr policy.Request // the policy's view of the request (t.pr)
	st *handoff.TCPState
	n  int // st.RecvQueue[:n] is what the accept loop read
	f  handoff.Flow
}

// moveRaw hands the connection of m to t's node without waiting for the
// node (the answer then finishes the connection: repairHandoff.done), or
// reports how the normal path is to serve it.
func (p *RepairPath) moveRaw(s *Server, t *ticket, m *rawMove) rawOutcome {
	b, fd, id, data := t.b, m.fd, m.id, m.data
	c := p.readyClient(b.Index)
	if c == nil {
		// Counted against b until the normal path picks again, so that
		// connections queued behind a first dial are seen (held.go).
		s.cl.Hold(b, id)
		return rawNormal // a node without a channel yet: the normal path dials
	}
	st, err := handoff.FreezeFD(fd, data)
	if err != nil {
		p.fallbackFreeze.Add(1)
		return rawRelay
	}
	h := &repairHandoff{s: s, p: p, fd: fd, id: id, b: b, t: *t, pr: *t.pr, st: st, n: len(data),
		f: handoff.Flow{Client: st.Remote, VIP: st.Local}}
	h.t.pr = &h.pr
	if err := p.steerFlow(h.f, b.Index, id, st.RcvSeq); err != nil {
		p.fallbackNode.Add(1)
		return h.thawed(err)
	}
	s.cl.Hold(b, id) // until FIN-HANDOFF (held.go)
	if err := c.HandoffAsync(st, h.done); err != nil {
		s.cl.Release(id)
		p.forget(h.f)
		if errors.Is(err, handoff.ErrNoChannel) {
			s.cl.Hold(b, id) // as for c == nil above
			if !h.thaw(nil) {
				return rawGone
			}
			return rawNormal // the normal path dials
		}
		p.fallbackNode.Add(1)
		return h.thawed(err)
	}
	return rawPending
}

// thawed thaws the descriptor for relaying: rawRelay, or rawGone when
// thawing failed and the descriptor is closed.
func (h *repairHandoff) thawed(why error) rawOutcome {
	if h.thaw(why) {
		return rawRelay
	}
	return rawGone
}

// thaw takes the frozen descriptor back for relaying and reports whether
// the caller may serve it (false: thawing failed and fd is closed).
func (h *repairHandoff) thaw(why error) bool {
	if err := handoff.ThawFD(h.fd); err != nil {
		rawClose(h.fd)
		h.s.ctr.connsAccepted.Add(1)
		h.s.cl.Release(h.id)
		h.s.cl.CloseConn(h.id)
		h.s.logf("front: repair: %v; %v; connection dropped", why, err)
		return false
	}
	if why != nil {
		h.s.logf("front: repair to %s: %v; relaying", h.b.URL, why)
	}
	return true
}

// done receives the node's answer (on the control channel's reader, or
// the client's timeout sweep) and finishes the connection.
func (h *repairHandoff) done(err error) {
	s, p := h.s, h.p
	s.release(&h.t)
	if err != nil {
		s.cl.Release(h.id)
	}
	switch {
	case err == nil:
		rawClose(h.fd) // repair mode: no FIN, no RST
		p.moved.Add(1)
		s.ctr.connsAccepted.Add(1)
		p.fast.Add(1)
		// The policy's connection ends at FIN-HANDOFF (RepairPath.fin).
		s.finish(&h.t, Result{}, nil)
	case !handoff.NodeMayOwn(err):
		p.forget(h.f)
		p.fallbackNode.Add(1)
		s.ctr.fallback(fallbackFast)
		if h.thaw(err) {
			s.serveFD(&rawMove{fd: h.fd, data: h.st.RecvQueue[:h.n], id: h.id, holder: -1}, true)
		}
	default:
		// No answer: the node may own the socket (RepairPath.Serve).
		p.forget(h.f)
		p.lost.Add(1)
		rawClose(h.fd)
		s.ctr.connsAccepted.Add(1)
		s.ctr.requests.Add(1)
		s.cl.Failed(h.b, err)
		s.cl.CloseConn(h.id)
		s.logf("front: repair to %s: %v; connection dropped", h.b.URL, err)
	}
}
