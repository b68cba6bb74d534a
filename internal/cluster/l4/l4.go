//go:build linux

// Package l4 is a raw-TCP (layer 4) front for seed 002's crossover
// experiment: the point at which moving a connection to the real server
// (TCP handoff) starts to beat forwarding its bytes through the front.
//
// Seed 002 §3 builds a cluster in which the front either forwards a
// connection NAT-style — every byte, both ways, passes through it — or
// migrates the connection after the handshake so that the real server
// replies to the client directly. Its §4 test client (internal/tools/loadgen's
// RunTCP, `shoal bench tcp`) opens a connection, sends a fixed number of
// bytes, reads a fixed number back and closes, from N concurrent threads;
// the paper found migration to have the lower mean time per operation above
// 45 threads and forwarding below. The HTTP front (internal/cluster/front) answers
// the same question for HTTP, but it parses requests, keeps pools and runs
// health checks, all of which blur a comparison of the two data paths
// themselves. This front does nothing but the data path, one of:
//
//   - Relay: dial the chosen node and copy both ways with io.Copy between
//     two *net.TCPConn (splice(2) on Linux, so the bytes never enter user
//     space), passing each end of file on as a half-close (CloseWrite) and
//     aborting both sides on any error. Seed 002's "no migration".
//   - PassFD: hand the accepted descriptor, before reading anything (seed
//     002 moves the connection right after the handshake), to the node's
//     handoff socket with internal/cluster/handoff's FDClient (SCM_RIGHTS over
//     SOCK_SEQPACKET), then close the front's copy. The node — `shoal bench
//     sink --handoff-socket` — reads the request and replies on the
//     connection itself. Seed 002's "migration", same-host form.
//   - Repair: the cross-host form (repair.go). Right after accept, freeze
//     the socket with TCP_REPAIR, steer the flow to the node, send the
//     socket's state over the node's control channel and drop the front's
//     copy silently (internal/cluster/handoff's RepairMover); the node — `shoal
//     bench sink --repair-listen` — rebuilds the socket and answers from
//     the virtual IP straight to the client. Its FIN-HANDOFF removes the
//     steering. A handoff costs a control round trip, which a same-host
//     passfd does not: this is the handoff whose cost can make relay win
//     at low concurrency, as in seed 002.
//
// Nodes are chosen by a content-blind policy from internal/cluster/policy (rr by
// default; wrr, lc, p2c, … work as well) over a fixed node set: a relayed
// connection counts as active on its node until it ends, a passed one only
// while it is being sent (the front cannot see it end). There is no request
// to look at, so content-aware policies (urlhash, lard, tbccrd, …) see an
// empty URL and degenerate; New refuses none of them, but they are
// pointless here. There are no health checks: a node whose dial or send
// fails is taken out of the rotation for Config.RetryAfter, and the client
// whose connection could not be placed is closed at once (it sees a reset
// or end of file, never a hang). There is no fallback from one path to the
// other, so that each measurement is of one path alone.
package l4

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/base/accept"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/policy"
)

// Path selects the front's data path.
type Path string

// The data paths of seed 002's experiment.
const (
	// Relay forwards bytes through the front (seed 002 without migration).
	Relay Path = "relay"
	// PassFD moves the connection to a node on the same host (seed 002
	// with migration, minus the network).
	PassFD Path = "passfd"
	// Repair moves the connection to a node on another host with
	// TCP_REPAIR and per-flow steering (seed 002 with migration).
	Repair Path = "repair"
)

// ParsePath turns a command-line word into a Path.
func ParsePath(s string) (Path, error) {
	switch p := Path(s); p {
	case Relay, PassFD, Repair:
		return p, nil
	}
	return "", fmt.Errorf("l4: unknown path %q (want relay, passfd or repair)", s)
}

// Node is one real server.
type Node struct {
	// Addr is the node's TCP address, "host:port"; the relay path dials it.
	Addr string
	// Socket is the node's handoff socket path; the passfd path sends
	// connections to it.
	Socket string
	// Repair is the node's repair handoff port, IPv4 "host:port" (`shoal
	// bench sink --repair-listen`); the repair path sends connection state
	// to it and steers flows to its host.
	Repair string
}

// name identifies the node in logs and in the policy's view.
func (n Node) name() string {
	switch {
	case n.Addr != "":
		return n.Addr
	case n.Repair != "":
		return n.Repair
	}
	return n.Socket
}

// Config configures a Front.
type Config struct {
	// Nodes are the real servers. Relay needs every Addr, PassFD every
	// Socket, Repair every Repair.
	Nodes []Node
	// Path is Relay, PassFD or Repair.
	Path Path
	// Repair configures the repair path (Path Repair only).
	Repair RepairConfig
	// Policy names the internal/cluster/policy policy that picks a node for each
	// connection; default "rr".
	Policy string
	// DialTimeout bounds the relay path's connect to a node (default 1 s);
	// SendTimeout bounds one handoff blocked on a full node socket
	// (default 1 s). On either, the client is closed.
	DialTimeout, SendTimeout time.Duration
	// RetryAfter is how long a node whose dial or send failed stays out of
	// the rotation (default 1 s).
	RetryAfter time.Duration
	// Logger receives node down/up events; default slog.Default().
	Logger *slog.Logger
}

// Stats counts what a Front did with the connections it accepted.
type Stats struct {
	// Accepted is every client connection accepted.
	Accepted uint64
	// Relayed counts connections relayed to their end; Passed, connections
	// handed to a node (passfd or repair) that the node acknowledged.
	Relayed, Passed uint64
	// Failed counts clients closed because no node was usable or the dial
	// or the handoff failed.
	Failed uint64
	// Ended counts FIN-HANDOFF notices that removed a moved flow's
	// steering, and Steered is the number of flows steered right now
	// (repair only; both 0 otherwise).
	Ended   uint64
	Steered int
}

// Front is the L4 front. Create it with New, run it with Serve, stop it
// with Close.
type Front struct {
	cfg     Config
	log     *slog.Logger
	dialer  net.Dialer
	clients []*handoff.FDClient  // per node, PassFD only
	mover   *handoff.RepairMover // Repair only

	start   time.Time  // origin of policy.Request.Now
	pmu     sync.Mutex // guards pol, cluster, downAt
	pol     policy.Policy
	cluster policy.Cluster
	downAt  []time.Time // when a down node may be tried again

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	nextID                            atomic.Uint64
	accepted, relayed, passed, failed atomic.Uint64
}

// New checks cfg and returns a Front ready to Serve.
func New(cfg Config) (*Front, error) {
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("l4: no nodes")
	}
	if cfg.Path == "" {
		cfg.Path = Relay
	}
	if _, err := ParsePath(string(cfg.Path)); err != nil {
		return nil, err
	}
	for i, n := range cfg.Nodes {
		if cfg.Path == Relay && n.Addr == "" {
			return nil, fmt.Errorf("l4: node %d has no address (relay dials it)", i)
		}
		if cfg.Path == PassFD && n.Socket == "" {
			return nil, fmt.Errorf("l4: node %d has no handoff socket (passfd sends to it)", i)
		}
		if cfg.Path == Repair && n.Repair == "" {
			return nil, fmt.Errorf("l4: node %d has no repair handoff port (repair sends to it)", i)
		}
	}
	if cfg.Policy == "" {
		cfg.Policy = "rr"
	}
	pol, err := policy.New(cfg.Policy, policy.Config{})
	if err != nil {
		return nil, fmt.Errorf("l4: %w", err)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Front{
		cfg: cfg, log: cfg.Logger, start: time.Now(), dialer: net.Dialer{Timeout: cfg.DialTimeout}, pol: pol,
		downAt: make([]time.Time, len(cfg.Nodes)),
		lns:    map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{},
	}
	for _, n := range cfg.Nodes {
		f.cluster.Nodes = append(f.cluster.Nodes, policy.Node{Name: n.name(), Weight: 1, Up: true})
		if cfg.Path == PassFD {
			f.clients = append(f.clients, handoff.NewFDClient(handoff.FDClientConfig{Path: n.Socket, SendTimeout: cfg.SendTimeout}))
		}
	}
	if cfg.Path == Repair {
		if f.mover, err = newMover(cfg, f.log); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Stats returns a snapshot of the counters.
func (f *Front) Stats() Stats {
	s := Stats{Accepted: f.accepted.Load(), Relayed: f.relayed.Load(), Passed: f.passed.Load(), Failed: f.failed.Load()}
	if f.mover != nil {
		s.Ended, s.Steered = f.mover.Ended.Load(), f.mover.Steer().Len()
	}
	return s
}

// SteerBackend names the repair path's steering backend ("bpf" or
// "nftables"), so that a measurement can record it; "" on other paths.
func (f *Front) SteerBackend() string {
	if f.mover == nil {
		return ""
	}
	return f.mover.Steer().Backend()
}

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("l4: front closed")

// Serve accepts client connections on ln until Close (it then returns
// ErrClosed) or until ln is closed by someone else; other accept errors are
// retried (internal/base/accept). It may run on several listeners.
func (f *Front) Serve(ln net.Listener) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	f.lns[ln] = struct{}{}
	f.wg.Add(1) // Close waits for this loop, and so for its last handoff
	f.mu.Unlock()
	defer f.wg.Done()
	err := accept.Loop(ln, func(c net.Conn) {
		f.accepted.Add(1)
		tc, ok := c.(*net.TCPConn)
		if !ok {
			// Only a TCP listener makes sense here; refuse anything else
			// per connection rather than crash.
			c.Close()
			f.failed.Add(1)
			return
		}
		if f.cfg.Path == PassFD {
			// Inline: a handoff is one sendmsg and a close, cheaper than
			// starting a goroutine. A node whose socket is full stalls
			// accepting for up to SendTimeout, which is backpressure.
			f.pass(tc)
			return
		}
		if !f.track(tc) {
			tc.Close()
			return
		}
		f.wg.Add(1)
		if f.cfg.Path == Repair {
			// A goroutine: a repair handoff waits a control round trip
			// for the node's answer, and handoffs to the nodes overlap.
			go f.repair(tc)
			return
		}
		go f.relay(tc)
	}, func(err error, wait time.Duration) {
		f.log.Warn("l4: accept failed; backing off", "err", err, "backoff", wait)
	})
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return fmt.Errorf("l4: accept on %s: %w", ln.Addr(), err)
}

// Close stops every Serve, closes the connections being relayed and waits
// for the accept loops and the relays' goroutines, so Stats is final once
// it returns. Connections already passed belong to their nodes and are not
// affected; on the repair path Close removes the steering, which ends the
// moved connections still open.
func (f *Front) Close() error {
	f.mu.Lock()
	f.closed = true
	var err error
	for ln := range f.lns {
		if e := ln.Close(); e != nil && err == nil && !errors.Is(e, net.ErrClosed) {
			err = fmt.Errorf("l4: close %s: %w", ln.Addr(), e)
		}
	}
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	for _, c := range f.clients {
		c.Close()
	}
	if f.mover != nil {
		if e := f.mover.Close(); e != nil && err == nil {
			err = fmt.Errorf("l4: %w", e)
		}
	}
	return err
}

// track registers a relayed connection for Close; false after Close.
func (f *Front) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Front) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// pick asks the policy for a node and counts the connection on it; -1
// when no node is usable. Nodes whose RetryAfter has passed come back
// first.
func (f *Front) pick() int {
	f.pmu.Lock()
	defer f.pmu.Unlock()
	now := time.Now()
	for i := range f.cluster.Nodes {
		n := &f.cluster.Nodes[i]
		if !n.Up && now.After(f.downAt[i]) {
			n.Up = true
			f.cluster.Version++
			f.log.Info("l4: node back in rotation", "node", n.Name)
		}
	}
	d := f.pol.Pick(&f.cluster, &policy.Request{Size: -1, Holder: -1, Now: now.Sub(f.start)})
	if d.Node < 0 || d.Node >= len(f.cluster.Nodes) {
		return -1
	}
	f.cluster.Start(d.Node)
	return d.Node
}

// done ends the connection's count on node i.
func (f *Front) done(i int) {
	f.pmu.Lock()
	f.cluster.Finish(i)
	f.pol.Done(&f.cluster, i, &policy.Request{Size: -1, Holder: i})
	f.pmu.Unlock()
}

// nodeFailed takes node i out of the rotation for RetryAfter.
func (f *Front) nodeFailed(i int, err error) {
	f.pmu.Lock()
	defer f.pmu.Unlock()
	n := &f.cluster.Nodes[i]
	f.downAt[i] = time.Now().Add(f.cfg.RetryAfter)
	if n.Up {
		n.Up = false
		f.cluster.Version++
		f.log.Warn("l4: node failed; out of rotation", "node", n.Name, "retry_after", f.cfg.RetryAfter, "err", err)
	}
}
