//go:build linux

package front

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"shoal/internal/cluster/handoff"
)

// RepairConfig configures the cross-host handoff path (Repair).
type RepairConfig struct {
	// Key is the cluster key shared with the nodes (at least 16 bytes); each
	// node's AES-GCM keys are derived from it (handoff.Auth.ForNode).
	Key []byte
	// VIP is the virtual address and port the front accepts clients on;
	// the nodes hold the same address on a non-ARPing interface.
	VIP netip.AddrPort
	// Dev is the interface towards the nodes. Default: the one holding VIP.
	Dev string
	// Port is the nodes' handoff port (shoal node --repair-listen); the
	// node's host is taken from its URL. Default 7070.
	Port int
	// Timeout bounds a handoff: dial, send, and the node's answer.
	// Default 2 s.
	Timeout time.Duration
	// Linger keeps a flow's steering entry this long after FIN-HANDOFF.
	// Default 0 (remove at once): a node sends FIN-HANDOFF only when its
	// socket is fully closed (all bytes and both FINs acknowledged), so no
	// further client packet is expected; a retransmitted FIN that arrives
	// later meets a harmless reset from the front.
	Linger time.Duration
	// Steer overrides the nftables/routing parameters (VIP and Dev are
	// filled from above).
	Steer handoff.SteerConfig
	// Moves says who moves a connection to the node its next request
	// belongs to under a policy that shares its table (repair_tag.go):
	// MovesNodes (default) hands connections over in tag mode and the
	// nodes move them among themselves; MovesFront keeps the connection
	// where its first request sent it.
	Moves MoveMode
	// TagFlush is how long the front gathers table changes before it
	// pushes them (default DefaultRepairTagFlush).
	TagFlush time.Duration
	// NodesAccept, in tag mode, has the nodes accept new connections
	// themselves (repair_tag.go, handoff's repair_accept.go): the front's
	// steering program sends a new flow's SYN straight to a node and the
	// front never accepts, freezes or hands over a connection while a node
	// accepts. Default false: the front accepts and hands each connection
	// over.
	NodesAccept bool
}

// RepairPath is the repair data path (seed 002, SPEC §4): the front reads a
// request, and handoff.RepairMover freezes the client's TCP socket with
// TCP_REPAIR, steers the flow's later packets to the chosen node
// (handoff.Steer: an eBPF or nftables flow map), sends the socket's state in
// one authenticated message, and on the node's acknowledgement closes the
// front's copy silently. The node rebuilds the socket and answers from the
// VIP straight to the client. When the node reports the connection's end
// (FIN-HANDOFF) the mover removes the steering entry.
//
// This file is the adapter between the front and the mover: it registers
// nodes with the mover as the policy first picks them, keeps the policy's
// count of a moved connection until its FIN-HANDOFF (held.go), and relays
// the request when the mover gives the socket back (thawed). The order of
// the steps, and how segments the client sends while its connection moves
// are kept from the frozen socket and from a node not ready yet (the flow
// hold and the node's guard), are the mover's (handoff.RepairMover).
//
// Limits: IPv4 only. A moved keep-alive connection stays with its node to
// its end (later requests never reach the front, so content-aware policies
// only see the first request of each connection), except in tag mode
// (repair_tag.go: tbccrd), where the nodes move it among themselves by the
// front's table. Stopping the front
// removes the steering, which ends every moved connection (its next packet
// meets a reset from the front). The nodes' handoff port authenticates
// every message but should still be reachable only from the front.
type RepairPath struct {
	cfg   RepairConfig
	mover *handoff.RepairMover
	s     atomic.Pointer[Server] // set on first Serve
	tag   repairTag

	moved, fast, fallbackFreeze, fallbackNode, lost atomic.Uint64
}

// Repair installs the steering table in the current network namespace and
// returns the path. Close removes the steering again.
func Repair(cfg RepairConfig) (*RepairPath, error) {
	if cfg.Port == 0 {
		cfg.Port = DefaultRepairPort
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	p := &RepairPath{cfg: cfg}
	m, err := handoff.NewRepairMover(handoff.RepairMoverConfig{
		Key: cfg.Key, VIP: cfg.VIP, Dev: cfg.Dev, Timeout: cfg.Timeout, Linger: cfg.Linger, Steer: cfg.Steer,
		OnNodeDown: p.nodeDown, OnEnd: p.end, OnMoved: p.tagMoved, OnTag: p.tagMsg, NodesAccept: cfg.NodesAccept,
		OnError: func(err error) {
			if s := p.s.Load(); s != nil {
				s.logf("front: repair: %v", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("front: repair: %w", err)
	}
	p.mover = m
	return p, nil
}

// Name is "repair".
func (p *RepairPath) Name() string { return "repair" }

// Stats returns the path's counters.
func (p *RepairPath) Stats() RepairStats {
	m, a := p.mover, p.mover.Auth()
	return RepairStats{
		Moved: p.moved.Load(), FallbackFreeze: p.fallbackFreeze.Load(), FallbackNode: p.fallbackNode.Load(),
		Lost: p.lost.Load(), Ended: m.Ended.Load(), Dropped: m.Dropped.Load(), Steered: m.Steer().Len(),
		Forged: a.Forged.Load(), Replayed: a.Replayed.Load(), Stale: a.Stale.Load(),
		Malformed: a.Malformed.Load(), Early: m.Early.Load(), Held: m.Held.Load(), Fast: p.fast.Load(),
		Retagged: m.Retagged.Load(), StaleMoves: m.Stale.Load(), Left: m.Left.Load(),
		Adopted: m.Adopted.Load(), MoveReports: m.Reported.Load(),
	}
}

// Steer exposes the steering table (tests compare it with the kernel's).
func (p *RepairPath) Steer() *handoff.Steer { return p.mover.Steer() }

// Mover exposes the mover (its counters: moves steered early or held).
func (p *RepairPath) Mover() *handoff.RepairMover { return p.mover }

// Close ends the control channels and removes the steering table and
// routes. Connections already moved keep working only while their flows
// stay steered, so close the path last.
func (p *RepairPath) Close() error { return p.mover.Close() }

// node registers node idx (at hostport, the node's HTTP address, whose host
// also serves the handoff port cfg.Port) with the mover on first use.
func (p *RepairPath) node(s *Server, idx int, hostport string) error {
	p.s.CompareAndSwap(nil, s)
	if p.mover.HasNode(idx) {
		return nil
	}
	ap, err := resolveHandoff(hostport, p.cfg.Port)
	if err != nil {
		return err
	}
	if err := p.mover.AddNode(idx, ap); err != nil {
		return fmt.Errorf("front: repair: %w", err)
	}
	return nil
}

// resolveHandoff is the handoff port of the node whose HTTP address is
// hostport: its host (an IPv4 literal, else looked up) and port.
func resolveHandoff(hostport string, port int) (netip.AddrPort, error) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("front: repair: node address %q: %w", hostport, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.LookupIP(host)
		if lerr != nil || len(ips) == 0 {
			return netip.AddrPort{}, fmt.Errorf("front: repair: node host %q: %v", host, lerr)
		}
		ip, _ = netip.AddrFromSlice(ips[0].To4())
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}

// end is the mover's OnEnd: a moved connection ended on its node, so the
// policy stops counting it (held.go).
func (p *RepairPath) end(_ int, conn uint64) {
	if s := p.s.Load(); s != nil {
		s.cl.Release(conn)
		s.cl.CloseConn(conn)
	}
}

// nodeDown is the mover's OnNodeDown: the node's connections are gone.
func (p *RepairPath) nodeDown(idx, dropped int, err error) {
	if s := p.s.Load(); s != nil {
		s.cl.ReleaseNode(idx) // held.go
		s.logf("front: repair: channel to node %d broke (%v): dropped %d flows", idx, err, dropped)
	}
	p.kickPush() // no new connections for it (accepting)
}

// Serve moves the client connection of x to x.Backend, or relays when that
// is not possible without loss.
func (p *RepairPath) Serve(x *Exchange) Result {
	cc := x.cc
	s := cc.s
	cc.closeAfter = p.cfg.NodesAccept // for the relays below
	if cc.relayOnce {
		// The raw accept path tried this request's handoff and failed
		// (counted there): relay it, hand off the next ones again.
		cc.relayOnce = false
		return cc.relay(x)
	}
	tc, ok := cc.c.(*net.TCPConn)
	if !ok {
		p.fallbackFreeze.Add(1)
		return cc.relay(x)
	}
	if err := p.node(s, x.Backend.Index, x.Backend.Addr); err != nil {
		p.fallbackNode.Add(1)
		s.logf("%v; relaying", err)
		return cc.relay(x)
	}
	if p.tagOn(s) {
		p.kickPush() // the pick may have changed the shared table
	}
	// Head and Buffered are contiguous in the connection's buffer.
	buf := x.Buffered()
	prefix := make([]byte, 0, len(x.Head)+len(buf))
	prefix = append(append(prefix, x.Head...), buf...)
	// Counted against the node until FIN-HANDOFF (held.go); held before
	// the move, since the end may come before Move returns.
	s.cl.Hold(x.Backend, cc.id)
	err := p.mover.MoveConn(tc, prefix, x.Backend.Index, cc.id, handoff.FetchOf(x.Decision.Fetch, x.Decision.Node))
	if err != nil {
		s.cl.Release(cc.id)
	}
	switch {
	case err == nil:
		p.moved.Add(1)
		cc.holder = -1 // the policy's connection ends at FIN-HANDOFF
		return Result{Detached: true}
	case errors.Is(err, handoff.ErrNotFrozen):
		p.fallbackFreeze.Add(1)
		return cc.relay(x)
	case errors.Is(err, handoff.ErrNotMoved):
		p.fallbackNode.Add(1)
		s.logf("front: repair to %s: %v; relaying", x.Backend.URL, err)
		return cc.relay(x)
	default:
		// No answer: the node may own the socket. Both owning it would
		// corrupt the stream, so the mover let go without a word; if the
		// node does not have it, the client's next packet meets a reset.
		p.lost.Add(1)
		s.logf("front: repair to %s: %v; connection dropped", x.Backend.URL, err)
		return Result{Detached: true, NodeFailed: true, Err: err}
	}
}
