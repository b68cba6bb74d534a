//go:build linux

package node

import (
	"fmt"

	"shoal/internal/cluster/handoff"
)

// ListenRepair opens the node's handoff port for the front's repair data
// path (seed 002; SPEC §4): it accepts the front's control channel on addr,
// rebuilds each TCP connection handed over with TCP_REPAIR, and serves it
// on s like any accepted connection, answering from the virtual IP straight
// to the client. When such a connection ends the node sends FIN-HANDOFF so
// the front removes its steering entry. key is the cluster key shared with the
// front, from which each message's key is derived (per node, bound to addr's
// address as the front dials it); forged, replayed, stale and misdirected
// messages are refused and counted in the returned listener's Auth(), and
// cfg bounds the connections the port holds. The node must hold the virtual IP locally
// (e.g. on lo with arp_ignore=1, arp_announce=2) and run with
// CAP_NET_ADMIN, which TCP_REPAIR requires.
//
// With CAP_BPF as well (and a kernel with TCX), the port also attaches the
// node's guard (handoff.Guard) to the interface holding addr: segments to
// a virtual IP on lo that find no connection here are dropped rather than
// answered with a reset, so the front may steer a flow before the node has
// rebuilt it and the client's early segments and ACKs are retransmitted or
// reach the node instead of ending the connection. Without it the node
// still works, and the front holds each flow until the node has
// acknowledged (handoff.RepairMover); the log says which.
//
// It returns once the port is open; serving runs on its own goroutine
// until Shutdown (which closes the listener like any other).
func (s *Server) ListenRepair(addr string, key []byte, cfg handoff.RepairListenerConfig) (*handoff.RepairListener, error) {
	rl, err := handoff.ListenRepairAddr(addr, key, cfg)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if g, err := rl.Guard(); g != nil {
		s.cfg.Logger.Info("repair: guarding virtual IPs: early segments are dropped, not reset", "devs", g.Devs())
	} else {
		s.cfg.Logger.Info("repair: not guarding; the front holds each flow until this node acknowledges", "why", err)
	}
	go s.Serve(rl)
	return rl, nil
}
