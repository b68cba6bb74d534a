//go:build linux

package l4

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/cluster/handoff"
)

// RepairConfig configures the repair path: the front's side of a cross-host
// TCP handoff (internal/cluster/handoff's RepairMover).
type RepairConfig struct {
	// Key is the cluster key shared with the nodes (≥ 16 bytes).
	Key []byte
	// VIP is the address and port the front listens on; the nodes hold the
	// same address on lo (arp_ignore/arp_announce) and reply from it.
	VIP netip.AddrPort
	// Dev is the interface towards the nodes; default: the one holding VIP.
	Dev string
	// Steer picks the steering backend ("bpf", "nftables", "auto"/"") and
	// may override its tables and marks.
	Steer handoff.SteerConfig
	// Timeout bounds one handoff: dial, send and the node's answer
	// (default 2 s).
	Timeout time.Duration
}

// newMover builds the repair path's mover in the current network namespace
// from cfg.Nodes' Repair addresses.
func newMover(cfg Config, log *slog.Logger) (*handoff.RepairMover, error) {
	var nodes []netip.AddrPort
	for i, n := range cfg.Nodes {
		ap, err := netip.ParseAddrPort(n.Repair)
		if err != nil {
			return nil, fmt.Errorf("l4: node %d repair address %q (want IPv4:port): %w", i, n.Repair, err)
		}
		nodes = append(nodes, ap)
	}
	rc := cfg.Repair
	m, err := handoff.NewRepairMover(handoff.RepairMoverConfig{
		Key: rc.Key, VIP: rc.VIP, Dev: rc.Dev, Nodes: nodes, Timeout: rc.Timeout, Steer: rc.Steer,
		OnNodeDown: func(i, dropped int, err error) {
			log.Warn("l4: repair channel to node broke; its flows unsteered", "node", cfg.Nodes[i].Repair, "dropped", dropped, "err", err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("l4: repair: %w", err)
	}
	return m, nil
}

// repair moves one client connection, unread (seed 002 migrates right after
// the handshake; the front waits only for the request's first segment to be
// queued, see waitData), to a node on another host. There is no fallback to relay
// (each measurement is of one path alone): a connection that could not be
// moved is closed, and its node leaves the rotation for RetryAfter.
func (f *Front) repair(c *net.TCPConn) {
	defer f.wg.Done()
	defer f.untrack(c)
	i := f.pickFor(c)
	if i < 0 {
		return
	}
	err := waitData(c, f.cfg.Repair.Timeout)
	if err == nil {
		err = f.mover.Move(c, nil, i)
	} else {
		c.Close()
	}
	// The policy's count ends with the handoff: the front cannot see the
	// connection's end on the node (FIN-HANDOFF does not name the node's
	// policy slot, and counting it would make lc/p2c wait on the client).
	f.done(i)
	if err == nil {
		f.passed.Add(1)
		return
	}
	if errors.Is(err, handoff.ErrNotMoved) {
		c.Close() // thawed: the client sees a FIN
	}
	if !errors.Is(err, handoff.ErrNotEstablished) && !errors.Is(err, errNoData) { // a client's fault is not the node's
		f.nodeFailed(i, err)
	}
	f.failed.Add(1)
}

// errNoData is waitData's error for a client that sent nothing in time.
var errNoData = errors.New("l4: repair: client sent no data")

// waitData blocks until the client's first bytes are in c's receive queue
// (or its FIN), reading nothing, for at most timeout.
//
// Why: the repair path freezes the socket, then steers the flow to the node,
// then sends the state; until the node has rebuilt the socket (one control
// round trip) a client segment steered to it finds no socket there and
// draws a reset, and one that reaches the front between the freeze and the
// steering lands in the frozen copy and is lost. Seed 002's client sends
// its request right after connecting, which is exactly that window; the
// HTTP front avoids it by reading the request head first. Waiting for the
// first segment means the request — when it fits in one segment, as seed
// 002's 100 bytes do — travels in the frozen receive queue, and the client
// sends nothing more until it has the reply. A request of several segments
// can still meet the window (see the README's crossover subsection).
func waitData(c *net.TCPConn, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("l4: repair: %w", err)
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return n > 0 || rerr == nil || rerr != unix.EAGAIN // data, FIN or an error: stop waiting
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errNoData, err)
	}
	return nil
}
