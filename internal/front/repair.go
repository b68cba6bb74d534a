//go:build linux

package front

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/handoff"
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
}

// RepairPath is the repair data path (seed 002, SPEC §4): the front reads a
// request, freezes the client's TCP socket with TCP_REPAIR, steers the
// flow's later packets to the chosen node (handoff.Steer: an eBPF or
// nftables flow map), sends the socket's state in one HMAC-authenticated
// message, and on the node's acknowledgement closes its own copy silently.
// The node rebuilds the socket and answers from the VIP straight to the
// client. When the node reports the connection's end (FIN-HANDOFF) the front
// removes the steering entry.
//
// Order matters: steering goes in before the state is sent, so that no
// client packet reaches the frozen front socket after the node took over;
// the window in which a client packet can reach the node before the socket
// exists there lasts one control round trip (sub-millisecond on a LAN) and a
// client normally sends nothing in it (it waits for the response).
//
// Limits: IPv4 only. A moved keep-alive connection stays with its node to
// its end (later requests never reach the front, so content-aware policies
// only see the first request of each connection). Stopping the front
// removes the steering, which ends every moved connection (its next packet
// meets a reset from the front). The nodes' handoff port authenticates
// every message but should still be reachable only from the front.
type RepairPath struct {
	cfg   RepairConfig
	auth  *handoff.Auth
	steer *handoff.Steer

	mu      sync.Mutex
	clients map[int]*handoff.RepairClient // by Backend.Index
	conns   map[handoff.Flow]movedFlow    // steered flows
	unsteer []handoff.Flow                // ended flows waiting for removal
	s       *Server                       // set on first Serve

	moved, fast, fallbackFreeze, fallbackNode, lost, ended, dropped atomic.Uint64
}

// Repair installs the steering table in the current network namespace and
// returns the path. Close removes the steering again.
func Repair(cfg RepairConfig) (*RepairPath, error) {
	if cfg.Port == 0 {
		cfg.Port = 7070
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if !cfg.VIP.Addr().Is4() || cfg.VIP.Port() == 0 {
		return nil, fmt.Errorf("front: repair: VIP %v: need an IPv4 address and port", cfg.VIP)
	}
	if cfg.Dev == "" {
		dev, err := handoff.InterfaceOf(cfg.VIP.Addr())
		if err != nil {
			return nil, fmt.Errorf("front: repair: %w", err)
		}
		cfg.Dev = dev
	}
	auth, err := handoff.NewAuth(cfg.Key, 0)
	if err != nil {
		return nil, fmt.Errorf("front: repair: %w", err)
	}
	sc := cfg.Steer
	sc.VIP, sc.Dev = cfg.VIP, cfg.Dev
	st, err := handoff.NewSteer(sc)
	if err != nil {
		return nil, fmt.Errorf("front: repair: %w", err)
	}
	return &RepairPath{cfg: cfg, auth: auth, steer: st,
		clients: map[int]*handoff.RepairClient{}, conns: map[handoff.Flow]movedFlow{}}, nil
}

// Name is "repair".
func (p *RepairPath) Name() string { return "repair" }

// Stats returns the path's counters.
func (p *RepairPath) Stats() RepairStats {
	return RepairStats{
		Moved: p.moved.Load(), FallbackFreeze: p.fallbackFreeze.Load(), FallbackNode: p.fallbackNode.Load(),
		Lost: p.lost.Load(), Ended: p.ended.Load(), Dropped: p.dropped.Load(), Steered: p.steer.Len(),
		Forged: p.auth.Forged.Load(), Replayed: p.auth.Replayed.Load(), Stale: p.auth.Stale.Load(),
		Malformed: p.auth.Malformed.Load(), Fast: p.fast.Load(),
	}
}

// Steer exposes the steering table (tests compare it with the kernel's).
func (p *RepairPath) Steer() *handoff.Steer { return p.steer }

// Close ends the control channels and removes the steering table and
// routes. Connections already moved keep working only while their flows
// stay steered, so close the path last.
func (p *RepairPath) Close() error {
	p.mu.Lock()
	cs := p.clients
	p.clients = map[int]*handoff.RepairClient{}
	p.mu.Unlock()
	// Outside p.mu: closing answers the handoffs still waiting, whose
	// callbacks (repairfast.go) take p.mu.
	for _, c := range cs {
		c.Close()
	}
	return p.steer.Close()
}

// client returns node b's control channel, setting up its route.
func (p *RepairPath) client(s *Server, idx int, hostport string) (*handoff.RepairClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.s == nil {
		p.s = s
	}
	if c := p.clients[idx]; c != nil {
		return c, nil
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("front: repair: node address %q: %w", hostport, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.LookupIP(host)
		if lerr != nil || len(ips) == 0 {
			return nil, fmt.Errorf("front: repair: node host %q: %v", host, lerr)
		}
		ip, _ = netip.AddrFromSlice(ips[0].To4())
	}
	if err := p.steer.AddNode(idx, ip); err != nil {
		return nil, fmt.Errorf("front: repair: %w", err)
	}
	c := handoff.NewRepairClient(handoff.RepairClientConfig{
		Addr:    net.JoinHostPort(ip.String(), strconv.Itoa(p.cfg.Port)),
		Auth:    p.auth,
		Timeout: p.cfg.Timeout,
		OnFin:   p.fin,
		OnDown: func(err error) {
			s.cl.ReleaseNode(idx) // held.go: the node's connections are gone
			n, _ := p.steer.RemoveNode(idx)
			p.dropped.Add(uint64(n))
			s.logf("front: repair: channel to node %d broke (%v): dropped %d flows", idx, err, n)
		},
	})
	p.clients[idx] = c
	return c, nil
}

// readyClient returns node idx's control channel if the normal path has
// set it up (routes, steering, dial), else nil.
func (p *RepairPath) readyClient(idx int) *handoff.RepairClient {
	p.mu.Lock()
	c := p.clients[idx]
	p.mu.Unlock()
	return c
}

// steerFlow steers f to node idx and remembers it as connection conn's
// incarnation tag. Both happen under p.mu, as does fin's removal, so that a
// late FIN-HANDOFF for an earlier connection on the same 4-tuple cannot
// remove the new entry between the two.
func (p *RepairPath) steerFlow(f handoff.Flow, idx int, conn uint64, tag uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.steer.Add(f, idx); err != nil {
		return err
	}
	p.conns[f] = movedFlow{conn: conn, tag: tag}
	return nil
}

// movedFlow is one moved connection as the front remembers it.
type movedFlow struct {
	conn uint64 // client connection id (policy.Request.Conn)
	tag  uint32 // incarnation: the RcvSeq sent in the handoff
}

// fin handles FIN-HANDOFF: the node's socket is fully closed; forget the
// flow (after Linger). A notice for an older connection on the same 4-tuple
// (tag mismatch) is ignored. Without Linger an eBPF entry goes at once (one
// bpf(2) call; no timer, no goroutine); nftables removals are batched.
func (p *RepairPath) fin(f handoff.Flow, tag uint32) {
	p.mu.Lock()
	mf, ok := p.conns[f]
	if ok && mf.tag != tag {
		p.mu.Unlock()
		return
	}
	delete(p.conns, f)
	s := p.s
	now := p.cfg.Linger <= 0 && p.steer.Backend() == "bpf"
	var err error
	if now {
		_, err = p.steer.Remove(f)
	}
	p.mu.Unlock()
	p.ended.Add(1)
	if ok && s != nil {
		s.cl.Release(mf.conn) // held.go
		s.cl.CloseConn(mf.conn)
	}
	switch {
	case now:
		if err != nil && s != nil {
			s.logf("front: repair: %v", err)
		}
	case p.cfg.Linger <= 0:
		p.unsteerLater(f)
	default:
		time.AfterFunc(p.cfg.Linger, func() { p.unsteerLater(f) })
	}
}

// unsteerBatch is how long removals wait to share one netlink commit.
const unsteerBatch = 2 * time.Millisecond

// unsteerLater queues f's steering entry for removal; queued removals are
// committed together within unsteerBatch, which at high connection rates
// turns one nftables transaction per connection into one per batch.
func (p *RepairPath) unsteerLater(f handoff.Flow) {
	p.mu.Lock()
	p.unsteer = append(p.unsteer, f)
	first := len(p.unsteer) == 1
	p.mu.Unlock()
	if first {
		time.AfterFunc(unsteerBatch, p.flushUnsteer)
	}
}

func (p *RepairPath) flushUnsteer() {
	p.mu.Lock()
	fs := p.unsteer
	p.unsteer = nil
	// A 4-tuple handed off again meanwhile keeps its (new) entry; p.mu
	// is held across the removal so that no handoff slips in between.
	keep := fs[:0]
	for _, f := range fs {
		if _, reused := p.conns[f]; !reused {
			keep = append(keep, f)
		}
	}
	_, err := p.steer.RemoveFlows(keep)
	s := p.s
	p.mu.Unlock()
	if err != nil && s != nil {
		s.logf("front: repair: %v", err)
	}
}

// Serve moves the client connection of x to x.Backend, or relays when that
// is not possible without loss.
func (p *RepairPath) Serve(x *Exchange) Result {
	cc := x.cc
	s := cc.s
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
	c, err := p.client(s, x.Backend.Index, x.Backend.Addr)
	if err != nil {
		p.fallbackNode.Add(1)
		s.logf("%v; relaying", err)
		return cc.relay(x)
	}
	// Head and Buffered are contiguous in the connection's buffer.
	buf := x.Buffered()
	prefix := make([]byte, 0, len(x.Head)+len(buf))
	prefix = append(append(prefix, x.Head...), buf...)
	st, err := handoff.Freeze(tc, prefix)
	if err != nil {
		p.fallbackFreeze.Add(1)
		return cc.relay(x)
	}
	f := handoff.Flow{Client: st.Remote, VIP: st.Local}
	if err := p.steerFlow(f, x.Backend.Index, cc.id, st.RcvSeq); err != nil {
		p.fallbackNode.Add(1)
		return p.thawAndRelay(x, tc, err)
	}
	s.cl.Hold(x.Backend, cc.id) // until FIN-HANDOFF (held.go)
	st.Fetch = handoff.FetchOf(x.Decision.Fetch, x.Decision.Node)
	err = c.Handoff(st)
	if err != nil {
		s.cl.Release(cc.id)
	}
	switch {
	case err == nil:
		tc.Close() // repair mode: no FIN, no RST
		p.moved.Add(1)
		cc.holder = -1 // the policy's connection ends at FIN-HANDOFF
		return Result{Detached: true}
	case !handoff.NodeMayOwn(err):
		p.forget(f)
		p.fallbackNode.Add(1)
		return p.thawAndRelay(x, tc, err)
	default:
		// No answer: the node may own the socket. Both owning it would
		// corrupt the stream, so the front lets go without a word; if the
		// node does not have it, the client's next packet meets a reset.
		p.forget(f)
		p.lost.Add(1)
		tc.Close()
		s.logf("front: repair to %s: %v; connection dropped", x.Backend.URL, err)
		return Result{Detached: true, NodeFailed: true, Err: err}
	}
}

func (p *RepairPath) forget(f handoff.Flow) {
	p.mu.Lock()
	delete(p.conns, f)
	p.mu.Unlock()
	p.steer.Remove(f)
}

func (p *RepairPath) thawAndRelay(x *Exchange, tc *net.TCPConn, why error) Result {
	if err := handoff.Thaw(tc); err != nil {
		return Result{Close: true, Err: fmt.Errorf("front: repair: %v; %w", why, err)}
	}
	x.cc.s.logf("front: repair to %s: %v; relaying", x.Backend.URL, why)
	return x.cc.relay(x)
}
