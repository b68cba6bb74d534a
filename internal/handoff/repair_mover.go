//go:build linux

package handoff

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// RepairMover is the front half of the repair path as one call: Move freezes
// an accepted client socket, steers its flow to a node, sends the state over
// the node's control channel and lets the front's copy go silently; the
// node's FIN-HANDOFF later removes the steering. It exists so that a front
// other than internal/front (internal/l4's raw-TCP front for seed 002's
// crossover experiment) does not have to repeat the order of those steps,
// the per-flow incarnation check on FIN-HANDOFF, and the rule for when a
// failed handoff may give the socket back. The node set is fixed at
// creation; nodes are addressed by index.
//
// It is safe for concurrent use. It owns a Steer in the current network
// namespace, so create it in the front's namespace and Close it last.
type RepairMover struct {
	steer   *Steer
	auth    *Auth
	clients []*RepairClient

	mu   sync.Mutex
	tags map[Flow]uint32 // steered flow → incarnation (RcvSeq sent)

	// Moved counts connections a node acknowledged; Refused, handoffs that
	// gave the socket back (ErrNotMoved); Lost, handoffs whose outcome is
	// unknown (ErrConnGone); Ended, FIN-HANDOFF notices that removed a
	// steering entry; Dropped, flows unsteered because a node's channel
	// broke.
	Moved, Refused, Lost, Ended, Dropped atomic.Uint64
}

// RepairMoverConfig configures a RepairMover.
type RepairMoverConfig struct {
	// Key is the cluster key shared with the nodes (≥ 16 bytes); per-node
	// AES-GCM keys are derived from it.
	Key []byte
	// VIP is the address and port clients connect to; the nodes hold the
	// address on a non-ARPing interface.
	VIP netip.AddrPort
	// Dev is the interface towards the nodes; default: the one holding VIP.
	Dev string
	// Nodes are the nodes' handoff ports (RepairListener addresses),
	// IPv4 literals; a node's steering route goes to its address.
	Nodes []netip.AddrPort
	// Timeout bounds one handoff: dial, send and the node's answer
	// (default 2 s).
	Timeout time.Duration
	// Steer overrides steering parameters (VIP and Dev are filled in).
	Steer SteerConfig
	// OnNodeDown, if set, is called when node i's control channel breaks,
	// after its flows (dropped of them) were unsteered.
	OnNodeDown func(i, dropped int, err error)
}

// ErrNotMoved wraps a Move failure after which the node certainly does not
// hold the connection and the caller's socket is usable again (thawed):
// it may relay it or close it.
var ErrNotMoved = errors.New("handoff: connection not moved")

// ErrConnGone wraps a Move failure after which the caller's socket is
// closed: the node may own the connection (no answer), or it could not be
// thawed. Both owning it would corrupt the stream, so the front lets go.
var ErrConnGone = errors.New("handoff: connection given up")

// NewRepairMover installs the steering and prepares one control channel per
// node (dialled on first use).
func NewRepairMover(cfg RepairMoverConfig) (*RepairMover, error) {
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("handoff: repair mover: no nodes")
	}
	if !cfg.VIP.Addr().Is4() || cfg.VIP.Port() == 0 {
		return nil, fmt.Errorf("handoff: repair mover: VIP %v: need an IPv4 address and port", cfg.VIP)
	}
	for i, n := range cfg.Nodes {
		if !n.Addr().Is4() || n.Port() == 0 {
			return nil, fmt.Errorf("handoff: repair mover: node %d handoff address %v: need IPv4:port", i, n)
		}
	}
	if cfg.Dev == "" {
		dev, err := InterfaceOf(cfg.VIP.Addr())
		if err != nil {
			return nil, fmt.Errorf("handoff: repair mover: %w", err)
		}
		cfg.Dev = dev
	}
	auth, err := NewAuth(cfg.Key, 0)
	if err != nil {
		return nil, fmt.Errorf("handoff: repair mover: %w", err)
	}
	sc := cfg.Steer
	sc.VIP, sc.Dev = cfg.VIP, cfg.Dev
	st, err := NewSteer(sc)
	if err != nil {
		return nil, fmt.Errorf("handoff: repair mover: %w", err)
	}
	m := &RepairMover{steer: st, auth: auth, tags: map[Flow]uint32{}}
	for i, n := range cfg.Nodes {
		if err := st.AddNode(i, n.Addr()); err != nil {
			st.Close()
			return nil, fmt.Errorf("handoff: repair mover: %w", err)
		}
		m.clients = append(m.clients, NewRepairClient(RepairClientConfig{
			Addr: n.String(), Auth: auth, Timeout: cfg.Timeout, OnFin: m.fin,
			OnDown: func(err error) {
				n, _ := st.RemoveNode(i)
				m.Dropped.Add(uint64(n))
				if cfg.OnNodeDown != nil {
					cfg.OnNodeDown(i, n, err)
				}
			},
		}))
	}
	return m, nil
}

// Steer exposes the steering table (counters, backend name, tests).
func (m *RepairMover) Steer() *Steer { return m.steer }

// Auth exposes the authenticator (its refusal counters).
func (m *RepairMover) Auth() *Auth { return m.auth }

// Move hands c, with prefix (client bytes the caller already read and did
// not consume), to node i. nil: the node owns the connection and c has been
// closed without a packet. An error wrapping ErrNotMoved: c is open and
// normal again. Any other error wraps ErrConnGone: c is closed.
//
// With eBPF steering the flow is held (Steer.Hold) from before the freeze
// until the node has acknowledged the rebuild, and only then steered to
// it: client segments sent meanwhile are dropped and retransmitted, so
// none is acknowledged by the frozen socket or reset by a node that has no
// socket yet. With nftables the flow is steered before the state is sent.
func (m *RepairMover) Move(c *net.TCPConn, prefix []byte, i int) error {
	if i < 0 || i >= len(m.clients) {
		return fmt.Errorf("%w: no node %d", ErrNotMoved, i)
	}
	f, err := connFlow(c)
	if err != nil {
		m.Refused.Add(1)
		return fmt.Errorf("%w: %w", ErrNotMoved, err)
	}
	hold := m.steer.Hold(f) == nil
	st, err := Freeze(c, prefix)
	if err != nil {
		if hold {
			m.steer.Remove(f)
		}
		m.Refused.Add(1)
		return fmt.Errorf("%w: %w", ErrNotMoved, err) // Freeze thawed it
	}
	if !hold {
		if err := m.steer.Add(f, i); err != nil {
			return m.giveBack(c, err)
		}
	}
	m.mu.Lock()
	m.tags[f] = st.RcvSeq
	m.mu.Unlock()
	err = m.clients[i].Handoff(st)
	if err == nil && hold {
		if err = m.steer.Add(f, i); err != nil {
			// The node has the connection but its packets cannot reach
			// it: it is lost either way.
			m.forget(f, st.RcvSeq)
			c.Close()
			m.Lost.Add(1)
			return fmt.Errorf("%w: %w", ErrConnGone, err)
		}
	}
	if err == nil {
		c.Close() // repair mode: no FIN, no RST
		m.Moved.Add(1)
		return nil
	}
	m.forget(f, st.RcvSeq)
	if !NodeMayOwn(err) {
		return m.giveBack(c, err)
	}
	c.Close()
	m.Lost.Add(1)
	return fmt.Errorf("%w: %w", ErrConnGone, err)
}

// connFlow is c's flow as Steer keys it.
func connFlow(c *net.TCPConn) (Flow, error) {
	r, ok1 := c.RemoteAddr().(*net.TCPAddr)
	l, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || r.IP.To4() == nil || l.IP.To4() == nil {
		return Flow{}, errors.New("handoff: not an IPv4 TCP connection")
	}
	return Flow{Client: netip.AddrPortFrom(netip.AddrFrom4([4]byte(r.IP.To4())), uint16(r.Port)),
		VIP: netip.AddrPortFrom(netip.AddrFrom4([4]byte(l.IP.To4())), uint16(l.Port))}, nil
}

// giveBack thaws c after a handoff that certainly did not happen.
func (m *RepairMover) giveBack(c *net.TCPConn, why error) error {
	if err := Thaw(c); err != nil {
		c.Close()
		m.Lost.Add(1)
		return fmt.Errorf("%w: %v; %w", ErrConnGone, why, err)
	}
	m.Refused.Add(1)
	return fmt.Errorf("%w: %w", ErrNotMoved, why)
}

// NodeMayOwn reports whether a failed handoff (err from RepairClient's
// Handoff or HandoffAsync) leaves open that the node rebuilt the socket. If
// not — the node refused the rebuild, the state was never sent, or the
// control channel could not even be dialled — the front may thaw its copy
// and serve the connection itself; if so, it must let go, since two owners
// would corrupt the stream.
func NodeMayOwn(err error) bool {
	var op *net.OpError
	return !errors.Is(err, ErrRebuildFailed) && !errors.Is(err, ErrNotSent) &&
		!(errors.As(err, &op) && op.Op == "dial")
}

// forget unsteers f if it is still the incarnation tag.
func (m *RepairMover) forget(f Flow, tag uint32) {
	m.mu.Lock()
	cur, ok := m.tags[f]
	if ok && cur == tag {
		delete(m.tags, f)
	}
	m.mu.Unlock()
	if ok && cur == tag {
		m.steer.Remove(f)
	}
}

// fin handles FIN-HANDOFF: the node's socket is fully closed, so the flow's
// steering goes. A late notice for an earlier connection on the same
// 4-tuple (tag mismatch: the client reused its port and the flow was
// handed off again) leaves the newer entry alone.
func (m *RepairMover) fin(f Flow, tag uint32) {
	m.mu.Lock()
	cur, ok := m.tags[f]
	if !ok || cur != tag {
		m.mu.Unlock()
		return
	}
	delete(m.tags, f)
	m.mu.Unlock()
	m.steer.Remove(f)
	m.Ended.Add(1)
}

// Close ends the control channels and removes the steering: connections
// already moved stop working (their next packet meets a reset from the
// front), so close the mover last.
func (m *RepairMover) Close() error {
	for _, c := range m.clients {
		c.Close()
	}
	if err := m.steer.Close(); err != nil {
		return fmt.Errorf("handoff: repair mover: %w", err)
	}
	return nil
}
