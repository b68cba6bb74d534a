//go:build linux

package handoff

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// RepairMover is the front half of the repair path, the one place that knows
// the order of its steps: freeze an accepted client socket, steer its flow to
// a node, send the state over the node's control channel, let the front's
// copy go silently, and remove the steering at the node's FIN-HANDOFF (seed
// 002's handoff protocol over Linux's TCP_REPAIR). The HTTP front
// (internal/cluster/front, synchronously on a connection's goroutine and
// asynchronously from its raw accept loop) and the raw-TCP front
// (internal/cluster/l4) both move connections through it, so the per-flow
// incarnation check on FIN-HANDOFF, the rule for when a failed handoff may
// give the socket back (NodeMayOwn) and the flow hold exist once.
//
// # Segments that arrive while a flow moves
//
// A client may send while its connection moves: the rest of a request of
// several segments, pipelined requests, and the ACKs of the node's first
// answer bytes. None of them may be acknowledged by the frozen socket (its
// bytes would never reach the node) or answered with a reset by a node that
// has not rebuilt the socket yet. Two mechanisms keep them safe:
//
//   - The node's Guard drops, rather than resets, a segment to the virtual
//     IP that finds no connection. The node says in its acknowledgement
//     that it guards (AckGuarded, RepairClient.Guarded). To such a node the
//     flow is steered BEFORE the socket is frozen: a segment sent in the
//     window is dropped at the node and retransmitted to the rebuilt
//     socket, and the ACKs of the answer reach the node as soon as it
//     sends.
//   - Otherwise, with eBPF steering, the flow is held (Steer.Hold: dropped
//     at the front, CRIU's network lock for one flow) from before the freeze
//     until the node has acknowledged, and only then steered to it. This is
//     safe for requests but has a price for answers: a client ACK for the
//     node's first segments that arrives before the front has steered is
//     dropped too, and an answer that fits in one window then waits for the
//     node's retransmission timer. Holding is therefore only the fallback
//     for nodes that cannot guard (no CAP_BPF or TCX there). A node says
//     whether it guards the front's VIP when the control channel opens
//     (MsgHello), before the first handoff on it.
//
// With nftables steering (no hold) the flow is steered before the freeze
// too; without a guard on the node a segment in the window then meets a
// reset, as it did before holding existed.
//
// It is safe for concurrent use. It owns a Steer in the current network
// namespace, so create it in the front's namespace and Close it last.
type RepairMover struct {
	cfg   RepairMoverConfig
	steer *Steer
	auth  *Auth

	tag atomic.Bool // hand connections over in tag mode (SetTag)

	mu      sync.Mutex
	clients map[int]*RepairClient
	flows   map[Flow]movedFlow // steered or held flows
	conns   map[uint64]Flow    // the caller's connection ids of flows (Live)
	unsteer []Flow             // ended flows waiting for a batched removal
	ended   endedFlows         // ended flows nodes accepted (adopt)

	// Moved counts connections a node acknowledged; Refused, handoffs that
	// gave the socket back (ErrNotMoved); Lost, handoffs whose outcome is
	// unknown or whose socket could not be given back (ErrConnGone); Ended,
	// FIN-HANDOFF notices that removed a steering entry; Dropped, flows
	// unsteered because a node's channel broke. Early counts moves steered
	// before the freeze (the node guards, or nftables), Held those held
	// until the node's acknowledgement. In tag mode, Retagged counts flows
	// steered to another node at a node's MsgFlowMoved, Stale the
	// MsgFlowMoved refused (unknown flow or incarnation, or an older move),
	// Left the flows unsteered at their old holder's MsgFlowLeft
	// (repair_left.go).
	Moved, Refused, Lost, Ended, Dropped, Early, Held, Retagged, Stale, Left atomic.Uint64
	// Adopted counts flows taken from nodes' reports of connections they
	// accepted (NodesAccept); Reported, the node-to-node moves reported
	// (MsgFlowMoved records with a move count of 1 or more, applied or
	// stale): the moves the nodes made, as the simulator counts them.
	Adopted, Reported atomic.Uint64
}

// movedFlow is one moved connection as the mover remembers it.
type movedFlow struct {
	tag     uint32 // incarnation: the RcvSeq sent in the handoff
	pending bool   // steered, not frozen yet: tag unknown
	node    int
	conn    uint64 // the caller's connection id (OnEnd)
	seq     uint32 // tag mode: the last node-to-node move applied
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
	// Nodes are the nodes' handoff ports (RepairListener addresses), IPv4
	// literals, as nodes 0, 1, …; more can be added with AddNode.
	Nodes []netip.AddrPort
	// Timeout bounds one handoff: dial, send and the node's answer
	// (default 2 s).
	Timeout time.Duration
	// Linger keeps a flow's steering entry this long after its
	// FIN-HANDOFF. Default 0: a node sends FIN-HANDOFF only once its
	// socket is fully closed, so no further client packet is expected
	// (a late retransmission meets a harmless reset from the front).
	Linger time.Duration
	// Steer overrides steering parameters (VIP and Dev are filled in).
	Steer SteerConfig
	// OnNodeDown, if set, is called when node i's control channel breaks,
	// after its flows (dropped of them) were unsteered.
	OnNodeDown func(i, dropped int, err error)
	// OnEnd, if set, is called at each FIN-HANDOFF with the node and the
	// connection id the move was given (from the channel's reader: do not
	// block).
	OnEnd func(node int, conn uint64)
	// OnError, if set, receives steering errors that have no caller to
	// return to (removals after FIN-HANDOFF).
	OnError func(error)
	// OnMoved, if set, is called in tag mode with the connections node i
	// took over from other nodes and whose flows the mover steered there,
	// a report frame's at once (from the channel's reader: do not block;
	// ts is valid only during the call); a move with Conn 0 was stale (a
	// later move of the flow came first), so only the request that caused
	// it is accounted.
	OnMoved func(i int, ts []TagMove)
	// OnTag, if set, receives node i's other tag-mode messages (MsgNotes,
	// MsgAsk) from the channel's reader; p is valid only during the call.
	OnTag func(i int, k MsgKind, p []byte)
	// LeftGrace is how long a flow reported left by its old holder
	// (MsgFlowLeft) stays steered in case a report of a later move of it
	// is still on its way (default DefaultLeftGrace), and how long an
	// ended connection a node accepted is remembered (adopt).
	LeftGrace time.Duration
	// NodesAccept asks each node, when its channel opens, to accept new
	// connections on the VIP itself (repair_accept.go), and makes the
	// mover take the flows nodes report accepting (adopt). Which nodes
	// are sent new connections is SetAccepting's.
	NodesAccept bool
}

// ErrNotMoved wraps a Move failure after which the node certainly does not
// hold the connection and the caller's socket is usable again (thawed):
// it may relay it or close it.
var ErrNotMoved = errors.New("handoff: connection not moved")

// ErrNotFrozen wraps (with ErrNotMoved) a Move failure at the freeze: the
// client's socket could not be put in repair mode or read (e.g. the client
// had already half-closed), so no node was involved.
var ErrNotFrozen = errors.New("handoff: socket not frozen")

// ErrConnGone wraps a Move failure after which the caller's socket is
// closed: the node may own the connection (no answer), or it could not be
// thawed. Both owning it would corrupt the stream, so the front lets go.
var ErrConnGone = errors.New("handoff: connection given up")

// NewRepairMover installs the steering and prepares one control channel per
// node in cfg.Nodes (dialled on first use).
func NewRepairMover(cfg RepairMoverConfig) (*RepairMover, error) {
	if !cfg.VIP.Addr().Is4() || cfg.VIP.Port() == 0 {
		return nil, fmt.Errorf("handoff: repair mover: VIP %v: need an IPv4 address and port", cfg.VIP)
	}
	for i, n := range cfg.Nodes {
		if !n.Addr().Is4() || n.Port() == 0 {
			return nil, fmt.Errorf("handoff: repair mover: node %d handoff address %v: need IPv4:port", i, n)
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.LeftGrace <= 0 {
		cfg.LeftGrace = DefaultLeftGrace
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
	m := &RepairMover{cfg: cfg, steer: st, auth: auth, clients: map[int]*RepairClient{}, flows: map[Flow]movedFlow{},
		conns: map[uint64]Flow{}}
	for i, n := range cfg.Nodes {
		if err := m.AddNode(i, n); err != nil {
			st.Close()
			return nil, err
		}
	}
	return m, nil
}

// AddNode routes node i's flows to the host of addr and prepares its
// control channel to addr (the node's handoff port), dialled on first use.
// A node added already is left as it is.
func (m *RepairMover) AddNode(i int, addr netip.AddrPort) error {
	if !addr.Addr().Is4() || addr.Port() == 0 {
		return fmt.Errorf("handoff: repair mover: node %d handoff address %v: need IPv4:port", i, addr)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.clients[i] != nil {
		return nil
	}
	if err := m.steer.AddNode(i, addr.Addr()); err != nil {
		return fmt.Errorf("handoff: repair mover: %w", err)
	}
	m.clients[i] = NewRepairClient(RepairClientConfig{
		Addr: addr.String(), Auth: m.auth, Timeout: m.cfg.Timeout, OnFins: m.fins, VIP: m.cfg.VIP.Addr(), AcceptPort: m.acceptPort(),
		OnDown: func(err error) { m.nodeDown(i, err) },
		OnTag:  func(k MsgKind, p []byte) { m.tagMsg(i, k, p) },
	})
	return nil
}

// Client is node i's control channel (nil before AddNode): tag mode sends
// the table and answers on it (RepairClient.SendMsg).
func (m *RepairMover) Client(i int) *RepairClient { return m.client(i) }

// SetTag turns tag mode on or off for later handoffs: a connection handed
// over in tag mode is routed by its node, request by request, with the
// table the front pushes (MsgTable), and moved node to node
// (repair_tagmsg.go).
func (m *RepairMover) SetTag(on bool) { m.tag.Store(on) }

// tagMsg handles node i's tag-mode messages: each record of a
// MsgFlowMoved steers its flow to i (flowMoved), a MsgFlowLeft may end
// flows steered to i (flowsLeft); the others go to OnTag.
func (m *RepairMover) tagMsg(i int, k MsgKind, p []byte) {
	if k == MsgFlowLeft {
		m.flowsLeft(i, p)
		return
	}
	if k != MsgFlowMoved {
		if m.cfg.OnTag != nil {
			m.cfg.OnTag(i, k, p)
		}
		return
	}
	var ms []flowMove
	for len(p) > 0 {
		f, t, rest, err := parseFlowMoved(p)
		if err != nil {
			break
		}
		p = rest
		ms = append(ms, flowMove{f, t})
	}
	m.flowsMoved(i, ms)
}

// flowMoved is flowsMoved of one record.
func (m *RepairMover) flowMoved(i int, f Flow, t TagMove) { m.flowsMoved(i, []flowMove{{f, t}}) }

// flowMove is one record of a MsgFlowMoved.
type flowMove struct {
	f Flow
	t TagMove
}

// flowsMoved steers each flow of ms to node i if it names a flow this mover
// moved (same incarnation) and is newer than the last move applied, or a
// connection a node accepted (adopt), all in one steering update (a node
// reports the moves of RepairNoteDelay in one frame); a stale one still
// reaches OnMoved, without its connection, so its request counts.
func (m *RepairMover) flowsMoved(i int, ms []flowMove) {
	m.mu.Lock()
	ok, stale, replaced, err := m.applyMoves(i, ms)
	conns := make([]uint64, len(ok))
	for k, r := range ok {
		conns[k] = m.flows[r.f].conn
	}
	m.mu.Unlock()
	if err != nil && m.cfg.OnError != nil {
		m.cfg.OnError(err)
	}
	m.Retagged.Add(uint64(len(ok)))
	if m.cfg.OnEnd != nil {
		for _, mf := range replaced {
			m.cfg.OnEnd(mf.node, mf.conn)
		}
	}
	if m.cfg.OnMoved == nil {
		return
	}
	ts := make([]TagMove, 0, len(stale)+len(ok))
	for _, t := range stale {
		t.Conn = 0 // a later move was applied first: the request counts, the connection stays
		ts = append(ts, t)
	}
	for k, r := range ok {
		t := r.t
		t.Conn = conns[k]
		ts = append(ts, t)
	}
	if len(ts) > 0 {
		m.cfg.OnMoved(i, ts)
	}
}

// applyMoves is flowsMoved's part under m.mu: it decides which records
// apply, steers their flows to node i and records the moves. It returns
// the moves applied, the stale ones of known flows, the earlier
// incarnations an accepted connection replaced, and a steering error.
func (m *RepairMover) applyMoves(i int, ms []flowMove) (ok []flowMove, stale []TagMove, replaced []movedFlow, err error) {
	var fs, fresh []Flow
	last := map[Flow]uint32{} // the newest move of each flow in ms, as applied in order
	now := time.Now()
	for _, r := range ms {
		if r.t.Seq > 0 {
			m.Reported.Add(1)
		}
		mf, known := m.flows[r.f]
		if m.cfg.NodesAccept && (!known || r.t.Seq == 0 && !mf.pending && mf.tag != r.t.Inc) {
			if !m.adopt(r.f, r.t, now) {
				continue // refused (counted stale)
			}
			if known {
				replaced = append(replaced, mf)
			}
			fresh = append(fresh, r.f)
			last[r.f] = r.t.Seq
			fs = append(fs, r.f)
			ok = append(ok, r)
			continue
		}
		seq, seen := last[r.f]
		if !seen {
			seq = mf.seq
		}
		if !known || mf.pending || mf.tag != r.t.Inc || r.t.Seq <= seq {
			m.Stale.Add(1)
			if known && mf.tag == r.t.Inc {
				stale = append(stale, r.t)
			}
			continue
		}
		last[r.f] = r.t.Seq
		fs = append(fs, r.f)
		ok = append(ok, r)
	}
	if err = m.steer.AddFlows(fs, i); err != nil { // one by one: a failed flow keeps its old node
		done := ok[:0]
		for _, r := range ok {
			if m.steer.Add(r.f, i) == nil {
				done = append(done, r)
			} else if slices.Contains(fresh, r.f) {
				m.dropFlow(r.f, m.flows[r.f])
			}
		}
		ok = done
	}
	for _, r := range ok {
		mf := m.flows[r.f]
		mf.node, mf.seq = i, r.t.Seq
		m.flows[r.f] = mf
	}
	return ok, stale, replaced, err
}

// HasNode reports whether node i was added.
func (m *RepairMover) HasNode(i int) bool { return m.client(i) != nil }

// Connected reports whether node i's control channel is up and greeted,
// which MoveFD needs (it never dials or waits).
func (m *RepairMover) Connected(i int) bool {
	c := m.client(i)
	return c != nil && c.Connected()
}

func (m *RepairMover) client(i int) *RepairClient {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clients[i]
}

// Steer exposes the steering table (counters, backend name, tests).
func (m *RepairMover) Steer() *Steer { return m.steer }

// Auth exposes the authenticator (its refusal counters).
func (m *RepairMover) Auth() *Auth { return m.auth }

// Move hands c, with prefix (client bytes the caller already read and did
// not consume), to node i and waits for the outcome. nil: the node owns the
// connection and c has been closed without a packet. An error wrapping
// ErrNotMoved: c is open and normal again. Any other error wraps
// ErrConnGone: c is closed. See the type's doc for the steering order.
func (m *RepairMover) Move(c *net.TCPConn, prefix []byte, i int) error {
	return m.MoveConn(c, prefix, i, 0, 0)
}

// MoveConn is Move that remembers conn, the caller's id for the connection,
// for OnEnd, and tells the node fetch, the peer to fetch the first
// request's object from (TCPState.Fetch; 0: none).
func (m *RepairMover) MoveConn(c *net.TCPConn, prefix []byte, i int, conn uint64, fetch uint16) error {
	f, err := connFlow(c)
	if err != nil {
		m.Refused.Add(1)
		return fmt.Errorf("%w: %w", ErrNotMoved, err)
	}
	// Dial (and learn whether the node guards) before deciding how to
	// steer: a first handoff held for want of an answer would pay the
	// early-ACK cost on every new channel.
	if cl := m.client(i); cl != nil && !cl.Connected() {
		if err := cl.Dial(); err != nil {
			m.Refused.Add(1)
			return fmt.Errorf("%w: %w", ErrNotMoved, err)
		}
	}
	op := &moveOp{m: m, f: f, i: i, fetch: fetch,
		thaw: func() error { return Thaw(c) }, close: func() { c.Close() }}
	if err := op.start(conn, func() (*TCPState, error) { return Freeze(c, prefix) }); err != nil {
		return err
	}
	ch := make(chan error, 1)
	if err := op.send(conn, func(err error) { ch <- op.finish(err) }, true); err != nil {
		return op.finish(err)
	}
	return <-ch
}

// MoveFD is Move on a raw accepted descriptor without waiting: it freezes
// fd, steers or holds its flow and sends the state, and done receives the
// outcome later (from the channel's reader goroutine; it must not block),
// with the same meaning as Move's error, and read, the bytes of prefix
// (prefix itself may be reused as soon as MoveFD returns). If MoveFD
// returns an error, done is never called: it wraps ErrNotMoved (fd thawed;
// with ErrNoChannel when node i's channel is not up, see Connected) or
// ErrConnGone (fd closed). It makes no blocking system call unless the
// channel's socket buffer is full. conn and fetch are MoveConn's.
func (m *RepairMover) MoveFD(fd int, prefix []byte, i int, conn uint64, fetch uint16, done func(err error, read []byte)) error {
	f, err := fdFlow(fd)
	if err != nil {
		m.Refused.Add(1)
		return fmt.Errorf("%w: %w", ErrNotMoved, err)
	}
	op := &moveOp{m: m, f: f, i: i, fetch: fetch,
		thaw: func() error { return ThawFD(fd) }, close: func() { rawCloseFD(fd) }}
	if err := op.start(conn, func() (*TCPState, error) { return freezeFD(fd, prefix, &f) }); err != nil {
		return err
	}
	n := len(prefix)
	if err := op.send(conn, func(err error) { done(op.finish(err), op.st.RecvQueue[:n]) }, false); err != nil {
		return op.finish(err)
	}
	return nil
}

// fdFlow is fd's flow as Steer keys it.
func fdFlow(fd int) (Flow, error) {
	l, ok1, err := rawSockname(fd, false)
	if err != nil {
		return Flow{}, fmt.Errorf("handoff: getsockname: %w", err)
	}
	r, ok2, err := rawSockname(fd, true)
	if err != nil {
		return Flow{}, fmt.Errorf("handoff: getpeername: %w", err)
	}
	if !ok1 || !ok2 {
		return Flow{}, errors.New("handoff: not an IPv4 TCP connection")
	}
	return Flow{Client: r, VIP: l}, nil
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

// moveOp is one handoff in progress.
type moveOp struct {
	m     *RepairMover
	cl    *RepairClient
	f     Flow
	i     int
	hold  bool   // held until the acknowledgement, steered then
	fetch uint16 // TCPState.Fetch
	st    *TCPState
	thaw  func() error // gives the socket back to normal operation
	close func()       // lets the frozen socket go silently
}

// start steers (or holds) the flow, freezes the socket and records the
// flow's incarnation. On error the socket is usable again and the flow
// unsteered.
func (op *moveOp) start(conn uint64, freeze func() (*TCPState, error)) error {
	m := op.m
	op.cl = m.client(op.i)
	if op.cl == nil {
		m.Refused.Add(1)
		return fmt.Errorf("%w: no node %d", ErrNotMoved, op.i)
	}
	// Steering and recording happen under m.mu, as do FIN-HANDOFF's and a
	// batched removal's, so that neither can remove the new entry of a
	// 4-tuple handed off again in between.
	m.mu.Lock()
	var err error
	if !op.cl.Guarded() && m.steer.Hold(op.f) == nil {
		op.hold = true
	} else {
		err = m.steer.Add(op.f, op.i)
	}
	if err == nil {
		m.flows[op.f] = movedFlow{pending: true, node: op.i, conn: conn}
		if conn != 0 {
			m.conns[conn] = op.f
		}
	}
	m.mu.Unlock()
	if err != nil {
		m.Refused.Add(1)
		return fmt.Errorf("%w: %w", ErrNotMoved, err)
	}
	st, err := freeze()
	if err != nil {
		m.forget(op.f, 0, true)
		m.Refused.Add(1)
		return fmt.Errorf("%w: %w: %w", ErrNotMoved, ErrNotFrozen, err) // freeze thawed it
	}
	st.Fetch = op.fetch
	op.st = st
	m.mu.Lock()
	if mf, ok := m.flows[op.f]; ok && mf.pending {
		mf.pending, mf.tag = false, st.RcvSeq
		m.flows[op.f] = mf
	}
	m.mu.Unlock()
	if op.hold {
		m.Held.Add(1)
	} else {
		m.Early.Add(1)
	}
	return nil
}

// send sends the frozen state to the node: a plain MsgHandoff, or in tag
// mode a MsgTagHandoff with the connection's id and move count 0.
func (op *moveOp) send(conn uint64, done func(error), dial bool) error {
	if !op.m.tag.Load() {
		return op.cl.send(op.st, done, dial)
	}
	pre := TagMove{Conn: conn, Node: op.i}.AppendBinary(nil)
	return op.cl.sendKind(MsgTagHandoff, pre, op.st, done, dial)
}

// finish turns the node's answer (or a send error) into Move's result and
// lets the socket go or gives it back.
func (op *moveOp) finish(err error) error {
	m := op.m
	if err == nil && op.hold {
		if err := m.steer.Add(op.f, op.i); err != nil {
			// The node has the connection but its packets cannot reach
			// it: it is lost either way.
			m.forget(op.f, op.st.RcvSeq, false)
			op.close()
			m.Lost.Add(1)
			return fmt.Errorf("%w: %w", ErrConnGone, err)
		}
	}
	if err == nil {
		op.close() // repair mode: no FIN, no RST
		m.Moved.Add(1)
		return nil
	}
	m.forget(op.f, op.st.RcvSeq, false)
	if !NodeMayOwn(err) {
		if terr := op.thaw(); terr != nil {
			op.close()
			m.Lost.Add(1)
			return fmt.Errorf("%w: %v; %w", ErrConnGone, err, terr)
		}
		m.Refused.Add(1)
		return fmt.Errorf("%w: %w", ErrNotMoved, err)
	}
	op.close()
	m.Lost.Add(1)
	return fmt.Errorf("%w: %w", ErrConnGone, err)
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

// forget unsteers f if it is still incarnation tag (or still pending).
func (m *RepairMover) forget(f Flow, tag uint32, pending bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mf, ok := m.flows[f]; ok && mf.pending == pending && (pending || mf.tag == tag) {
		m.dropFlow(f, mf)
		m.steer.Remove(f)
	}
}

// fin handles FIN-HANDOFF: the node's socket is fully closed, so the flow's
// steering goes (after Linger). A late notice for an earlier connection on
// the same 4-tuple (tag mismatch: the client reused its port and the flow
// was handed off again) leaves the newer entry alone. With eBPF and no
// Linger the entry goes at once (one bpf(2) call); nftables removals are
// batched.
func (m *RepairMover) fin(f Flow, tag uint32) {
	m.mu.Lock()
	if m.cfg.NodesAccept {
		m.ended.add(f, tag, time.Now(), m.cfg.LeftGrace)
	}
	mf, ok := m.flows[f]
	if !ok || mf.pending || mf.tag != tag {
		m.mu.Unlock()
		return
	}
	m.dropFlow(f, mf)
	now := m.cfg.Linger <= 0 && m.steer.Backend() == "bpf"
	var err error
	if now {
		_, err = m.steer.Remove(f)
	}
	m.mu.Unlock()
	m.Ended.Add(1)
	if m.cfg.OnEnd != nil {
		m.cfg.OnEnd(mf.node, mf.conn)
	}
	switch {
	case now:
		if err != nil && m.cfg.OnError != nil {
			m.cfg.OnError(err)
		}
	case m.cfg.Linger <= 0:
		m.unsteerLater(f)
	default:
		time.AfterFunc(m.cfg.Linger, func() { m.unsteerLater(f) })
	}
}

// fins handles a frame of FIN-HANDOFF notices (a node in tag mode sends the
// ends of RepairNoteDelay together): as fin for each, with the eBPF
// entries removed in one system call when they go at once.
func (m *RepairMover) fins(ns []FinNotice) {
	if len(ns) == 1 || m.cfg.Linger > 0 || m.steer.Backend() != "bpf" {
		for _, n := range ns {
			m.fin(n.Flow, n.Tag)
		}
		return
	}
	var gone []Flow
	var ended []movedFlow
	m.mu.Lock()
	now := time.Now()
	for _, n := range ns {
		if m.cfg.NodesAccept {
			m.ended.add(n.Flow, n.Tag, now, m.cfg.LeftGrace)
		}
		mf, ok := m.flows[n.Flow]
		if !ok || mf.pending || mf.tag != n.Tag {
			continue
		}
		m.dropFlow(n.Flow, mf)
		gone = append(gone, n.Flow)
		ended = append(ended, mf)
	}
	_, err := m.steer.RemoveFlows(gone)
	m.mu.Unlock()
	m.Ended.Add(uint64(len(ended)))
	if m.cfg.OnEnd != nil {
		for _, mf := range ended {
			m.cfg.OnEnd(mf.node, mf.conn)
		}
	}
	if err != nil && m.cfg.OnError != nil {
		m.cfg.OnError(err)
	}
}

// dropFlow forgets flow f (whose entry is mf). Called with m.mu held.
func (m *RepairMover) dropFlow(f Flow, mf movedFlow) {
	delete(m.flows, f)
	if g, ok := m.conns[mf.conn]; ok && g == f {
		delete(m.conns, mf.conn)
	}
}

// Live reports whether the connection the caller named conn (MoveConn,
// MoveFD) is moved and not ended: a tag-mode report about a connection
// that has ended must not bring it back into the caller's tables.
func (m *RepairMover) Live(conn uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.conns[conn]
	return ok
}

// DeadFlowsPass is how long a dead node's flows go to the front's stack
// (unsteerDead), and its slots (front's setAccepting): long enough for a
// client's retransmissions to meet the front's reset.
const DeadFlowsPass = 10 * time.Second

// unsteerDead removes the steering of flows whose node died or lost them,
// so that their packets meet the front's reset, and tickles their clients
// (tickle: a client waiting for an answer sends nothing). With nodes
// accepting, the flows go to the front's own stack for DeadFlowsPass
// instead (Steer.PassFlows): without an entry they would go to their
// slot's node, whose guard would leave them waiting. Called with m.mu held.
func (m *RepairMover) unsteerDead(fs []Flow) error {
	var err error
	if m.cfg.NodesAccept && m.steer.Backend() == "bpf" {
		time.AfterFunc(DeadFlowsPass, func() { m.steer.RemovePassing(fs) })
		err = m.steer.PassFlows(fs)
	} else {
		_, err = m.steer.RemoveFlows(fs)
	}
	if err != nil {
		return err
	}
	return tickle(fs)
}

// unsteerBatch is how long removals wait to share one netlink commit.
const unsteerBatch = 2 * time.Millisecond

// unsteerLater queues f's steering entry for removal; queued removals are
// committed together within unsteerBatch, which at high connection rates
// turns one nftables transaction per connection into one per batch.
func (m *RepairMover) unsteerLater(f Flow) {
	m.mu.Lock()
	m.unsteer = append(m.unsteer, f)
	first := len(m.unsteer) == 1
	m.mu.Unlock()
	if first {
		time.AfterFunc(unsteerBatch, m.flushUnsteer)
	}
}

func (m *RepairMover) flushUnsteer() {
	m.mu.Lock()
	fs := m.unsteer
	m.unsteer = nil
	// A 4-tuple handed off again meanwhile keeps its (new) entry; m.mu is
	// held across the removal so that no handoff slips in between.
	keep := fs[:0]
	for _, f := range fs {
		if _, reused := m.flows[f]; !reused {
			keep = append(keep, f)
		}
	}
	_, err := m.steer.RemoveFlows(keep)
	m.mu.Unlock()
	if err != nil && m.cfg.OnError != nil {
		m.cfg.OnError(err)
	}
}

// nodeDown unsteers node i's flows when its control channel broke
// (unsteerDead).
func (m *RepairMover) nodeDown(i int, err error) {
	m.mu.Lock()
	fs := m.steer.NodeFlows(i)
	n := len(fs)
	m.unsteerDead(fs)
	for f, mf := range m.flows {
		if mf.node == i {
			m.dropFlow(f, mf)
		}
	}
	m.mu.Unlock()
	m.Dropped.Add(uint64(n))
	if m.cfg.OnNodeDown != nil {
		m.cfg.OnNodeDown(i, n, err)
	}
}

// Close ends the control channels and removes the steering: connections
// already moved stop working (their next packet meets a reset from the
// front), so close the mover last.
func (m *RepairMover) Close() error {
	m.mu.Lock()
	cs := m.clients
	m.clients = map[int]*RepairClient{}
	m.mu.Unlock()
	// Outside m.mu: closing answers the handoffs still waiting, whose
	// finish takes m.mu.
	for _, c := range cs {
		c.Close()
	}
	if err := m.steer.Close(); err != nil {
		return fmt.Errorf("handoff: repair mover: %w", err)
	}
	return nil
}
