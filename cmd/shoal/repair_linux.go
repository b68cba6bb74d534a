package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"

	"shoal/internal/cluster/front"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/node"
	"shoal/internal/tools/loadgen"
)

// frontPath builds the repair data path for a front listening on listen
// (which must be the VIP:port). The caller closes it after the server
// stops; close also logs its counters.
func (rf *repairFlags) frontPath(listen string, logger *slog.Logger) (front.DataPath, func(), error) {
	key, err := readRepairKey(*rf.keyFile)
	if err != nil {
		return nil, nil, err
	}
	vip, err := netip.ParseAddrPort(listen)
	if err != nil {
		return nil, nil, fmt.Errorf("--path repair: --listen must be VIP:port, got %q: %w", listen, err)
	}
	moves, err := front.ParseMoveMode(*rf.moves)
	if err != nil {
		return nil, nil, fmt.Errorf("--repair-moves: %w", err)
	}
	if *rf.accept != "front" && *rf.accept != "nodes" {
		return nil, nil, fmt.Errorf("--repair-accept %q: want front or nodes", *rf.accept)
	}
	rp, err := front.Repair(front.RepairConfig{Key: key, VIP: vip, Dev: *rf.dev, Port: *rf.port,
		Steer: handoff.SteerConfig{Backend: *rf.steer}, Moves: moves, NodesAccept: *rf.accept == "nodes"})
	if err != nil {
		return nil, nil, err
	}
	logger.Info("repair: steering flows", "backend", rp.Steer().Backend(), "vip", vip)
	return rp, func() {
		logger.Info("repair: closing", "stats", fmt.Sprintf("%+v", rp.Stats()))
		if err := rp.Close(); err != nil {
			logger.Error("repair: close", "err", err)
		}
	}, nil
}

// startNode opens the node's handoff port if --repair-listen is set.
func (rf *repairFlags) startNode(srv *node.Server, logf func(msg string, args ...any)) (func(), error) {
	if *rf.listen == "" {
		return func() {}, nil
	}
	key, err := readRepairKey(*rf.keyFile)
	if err != nil {
		return nil, err
	}
	rl, err := srv.ListenRepair(*rf.listen, key, handoff.RepairListenerConfig{MaxConns: *rf.maxConn})
	if err != nil {
		return nil, err
	}
	logf("repair handoff port open", "addr", rl.Addr().String())
	return func() {
		a := rl.Auth()
		logf("repair handoff port closed", "restored", rl.Restored.Load(), "failed", rl.Failed.Load(),
			"fin_handoff", rl.Fins.Load(), "moved_out", rl.MovedOut.Load(), "move_failed", rl.MoveFailed.Load(),
			"move_lost", rl.MoveLost.Load(), "flows_left", rl.Left.Load(), "asked", rl.Asked.Load(), "accepted", rl.Accepted.Load(), "forward_late", rl.ForwardLate.Load(), "guard_dropped", guardDropped(rl), "limited", rl.Limited.Load(), "refused", rl.Refused.Load(), "forged", a.Forged.Load(), "replayed", a.Replayed.Load(),
			"stale", a.Stale.Load(), "malformed", a.Malformed.Load())
		rl.Close()
	}, nil
}

// guardDropped is the number of segments the node's guard dropped, 0
// without a guard.
func guardDropped(rl *handoff.RepairListener) uint64 {
	g, _ := rl.Guard()
	return g.Dropped()
}

// serveRepairSink opens a repair handoff port for `shoal bench sink` (the
// listener `shoal node --repair-listen` serves, whose accepted connections
// are the rebuilt client sockets) and serves s on it, sending Serve's end
// to errs. report prints the port's counters.
func serveRepairSink(s *loadgen.Sink, addr string, key []byte, errs chan<- error) (report func(), err error) {
	rl, err := handoff.ListenRepairAddr(addr, key, handoff.RepairListenerConfig{})
	if err != nil {
		return nil, err
	}
	go func() { errs <- s.Serve(rl) }()
	fmt.Fprintf(os.Stderr, "sink repair handoff port %s\n", rl.Addr())
	return func() {
		fmt.Fprintf(os.Stderr, "sink repair port closed: restored %d, failed %d, fin_handoff %d\n",
			rl.Restored.Load(), rl.Failed.Load(), rl.Fins.Load())
	}, nil
}
