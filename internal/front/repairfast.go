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
// wakeups (accept, head, acknowledgement). Here the accept loop freezes the
// descriptor, steers the flow and sends the state without waiting
// (RepairClient.HandoffAsync); the node's control channel reader finishes
// the connection when the answer arrives: closes the frozen descriptor
// silently on success, or thaws it and serves it on the normal path
// (relaying that request) when the node refused or nothing was sent.

// repairHandoff is one connection handed off from the accept loop, waiting
// for the node's answer.
type repairHandoff struct {
	s     *Server
	p     *RepairPath
	fd    int
	id    uint64
	b     *cluster.Backend
	pr    policy.Request // the policy's view of the request (for Done)
	st    *handoff.TCPState
	n     int // st.RecvQueue[:n] is what the accept loop read
	f     handoff.Flow
	start time.Time // zero without an Observer
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
	c := p.readyClient(b.Index)
	if c == nil {
		s.cl.Done(b, pr)
		// Counted against b until the normal path picks again, so that
		// connections queued behind a first dial are seen (held.go).
		s.cl.Hold(b, id)
		return id, false, false // a node without a channel yet: the normal path dials
	}
	st, err := handoff.FreezeFD(fd, data)
	if err != nil {
		s.cl.Done(b, pr)
		p.fallbackFreeze.Add(1)
		return id, true, false
	}
	h := &repairHandoff{s: s, p: p, fd: fd, id: id, b: b, pr: *pr, st: st, n: len(data),
		f: handoff.Flow{Client: st.Remote, VIP: st.Local}, start: start}
	if err := p.steerFlow(h.f, b.Index, id, st.RcvSeq); err != nil {
		s.cl.Done(b, pr)
		p.fallbackNode.Add(1)
		return id, h.thaw(err), false
	}
	s.cl.Hold(b, id) // until FIN-HANDOFF (held.go)
	st.Fetch = ra.fetch
	if err := c.HandoffAsync(st, h.done); err != nil {
		s.cl.Release(id)
		p.forget(h.f)
		s.cl.Done(b, pr)
		if errors.Is(err, handoff.ErrNoChannel) {
			s.cl.Hold(b, id) // as for c == nil above
			h.thaw(nil)
			return id, false, false // the normal path dials
		}
		p.fallbackNode.Add(1)
		return id, h.thaw(err), false
	}
	return id, false, true
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
	s.cl.Done(h.b, &h.pr)
	if err != nil {
		s.cl.Release(h.id)
	}
	switch {
	case err == nil:
		rawClose(h.fd) // repair mode: no FIN, no RST
		p.moved.Add(1)
		s.ctr.connsAccepted.Add(1)
		s.ctr.requests.Add(1)
		s.pathCounter(p.Name()).Add(1)
		p.fast.Add(1)
		// The policy's connection ends at FIN-HANDOFF (RepairPath.fin).
		if o := s.cfg.Observer; o != nil {
			o.Observe(Observation{Node: h.b.Index, NodeURL: h.b.URL, Path: p.Name(), Elapsed: time.Since(h.start)})
		}
	case !handoff.NodeMayOwn(err):
		p.forget(h.f)
		p.fallbackNode.Add(1)
		s.handoff.fastFallback.Add(1)
		if h.thaw(err) {
			s.serveFD(h.fd, h.id, h.st.RecvQueue[:h.n], true)
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
