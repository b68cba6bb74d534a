package front

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"shoal/internal/handoff"
	"shoal/internal/httpwire"
	"shoal/internal/policy"

	"golang.org/x/sys/unix"
)

// ReturnMode says when a node must hand a passed connection back to the
// front after one request (see internal/handoff's package doc).
type ReturnMode int

const (
	// ReturnAuto hands connections back under content-aware policies
	// (policy.Traits: every placement but policy.Blind), whose next request
	// may belong to another node.
	ReturnAuto ReturnMode = iota
	// ReturnAlways re-dispatches every request at the front.
	ReturnAlways
	// ReturnNever leaves the connection with the node to its end.
	ReturnNever
)

// PassFDConfig tunes the passfd data path. The zero value is usable.
type PassFDConfig struct {
	// Return says when nodes hand connections back. Default ReturnAuto.
	Return ReturnMode
	// SendTimeout bounds a handoff blocked on a node's full socket; the
	// request then falls back to relay. Default 1 s.
	SendTimeout time.Duration
	// HandoffDir is the folder the nodes' handoff sockets must be in: a
	// node reports its socket's path in its status, and nodes may be added
	// at run time, so a path elsewhere (or reached through a symbolic link
	// or "..") is refused and the node's requests are relayed. Default
	// os.TempDir(), where `shoal up` makes its socket folders.
	HandoffDir string
	// HandoffUID is the user a node's handoff socket must be served by
	// (SO_PEERCRED of the listening process); others are refused and
	// relayed. Nil or negative: the front's own effective uid.
	HandoffUID *int
}

// trust returns the socket trust cfg configures, defaults filled in.
func (cfg PassFDConfig) trust() (handoff.SocketTrust, error) {
	t := handoff.SocketTrust{Dir: cfg.HandoffDir, UID: os.Geteuid()}
	if t.Dir == "" {
		t.Dir = os.TempDir()
	}
	if cfg.HandoffUID != nil && *cfg.HandoffUID >= 0 {
		t.UID = *cfg.HandoffUID
	}
	if !filepath.IsAbs(t.Dir) {
		abs, err := filepath.Abs(t.Dir)
		if err != nil {
			return t, fmt.Errorf("front: handoff dir %q: %w", t.Dir, err)
		}
		t.Dir = abs
	}
	return t, nil
}

// HandoffStats counts the handoff data paths' work (front.Stats.Handoff).
type HandoffStats struct {
	// Passed counts connections passed to a node (passfd handoffs).
	Passed uint64
	// FallbackNoSocket counts requests relayed because the chosen node has
	// not (yet) reported a handoff socket in its status.
	FallbackNoSocket uint64
	// FallbackSend counts requests relayed because the send failed before
	// the descriptor left (node socket gone, full or refusing).
	FallbackSend uint64
	// Returned counts connections handed back by nodes for re-dispatch;
	// ReturnRefused those the front could not take (shutting down, too
	// many bytes).
	Returned      uint64
	ReturnRefused uint64
	// Lost counts connections out at a node with a return request when
	// that node's socket broke; they leave the policy's connection table.
	Lost uint64
	// Redispatched counts returned connections passed on again without
	// being wrapped (the fast path; included in Returned and Passed).
	Redispatched uint64
	// Ended counts end notices for connections handed off with a return
	// request (seed 002's FIN-HANDOFF).
	Ended uint64
	// RefusedSocketDir and RefusedSocketPeer count requests relayed
	// because the chosen node's handoff socket is not trusted
	// (PassFDConfig): outside the handoff folder, or served by another
	// user. They are not in FallbackSend.
	RefusedSocketDir, RefusedSocketPeer uint64
	// FallbackTLS counts requests on TLS client connections that a
	// handoff path (passfd, hybrid, repair) relayed instead: the TLS
	// session cannot follow the socket without kTLS (tls.go).
	FallbackTLS uint64
	// FastPassed counts connections passed straight from the raw accept
	// loop (fastaccept.go; included in Passed); FastFallback those the loop
	// gave to the normal path (partial head, refusal, no socket, …);
	// FastBlocked, among those, the ones whose node socket was full.
	FastPassed, FastFallback, FastBlocked uint64
	// Hybrid decisions (seed 002): hand off because front CPU, active client
	// connections or object size was above its threshold, or relay.
	HybridCPU, HybridConns, HybridSize, HybridRelay uint64
	// FrontCPUPercent is the front's last sampled CPU use (100 = one core),
	// when the hybrid rule samples it.
	FrontCPUPercent float64
}

type handoffCounters struct {
	passed, fallbackNoSocket, fallbackSend, returned, returnRefused, ended, redispatched, lost atomic.Uint64
	fastPassed, fastFallback, fastBlocked                                                      atomic.Uint64
	refusedDir, refusedPeer                                                                    atomic.Uint64
	fallbackTLS                                                                                atomic.Uint64
	hybridCPU, hybridConns, hybridSize, hybridRelay                                            atomic.Uint64
	cpuBits                                                                                    atomic.Uint64 // float64 bits of the last CPU sample
}

func (h *handoffCounters) snapshot() HandoffStats {
	return HandoffStats{
		Passed: h.passed.Load(), FallbackNoSocket: h.fallbackNoSocket.Load(), FallbackSend: h.fallbackSend.Load(),
		Returned: h.returned.Load(), ReturnRefused: h.returnRefused.Load(), Ended: h.ended.Load(),
		Redispatched: h.redispatched.Load(), Lost: h.lost.Load(),
		RefusedSocketDir: h.refusedDir.Load(), RefusedSocketPeer: h.refusedPeer.Load(), FallbackTLS: h.fallbackTLS.Load(),
		FastPassed: h.fastPassed.Load(), FastFallback: h.fastFallback.Load(), FastBlocked: h.fastBlocked.Load(),
		HybridCPU: h.hybridCPU.Load(), HybridConns: h.hybridConns.Load(), HybridSize: h.hybridSize.Load(),
		HybridRelay: h.hybridRelay.Load(), FrontCPUPercent: math.Float64frombits(h.cpuBits.Load()),
	}
}

// PassFD returns the same-host handoff data path (SPEC §4): the front
// passes the client socket and the bytes it read to the chosen node over the
// node's handoff socket (learned from the node's status report,
// cluster.Backend.LastStatus().HandoffSocket), closes its own copy and
// forgets the connection; the node answers the client directly. A node
// without a socket yet, or a send that fails before the descriptor left,
// falls back to relay for that request (counted). Connections that nodes
// hand back (content-aware policies) are re-dispatched like new requests on
// their connection. Descriptors go only to sockets cfg trusts (HandoffDir,
// HandoffUID); a node whose socket is refused is relayed, counted and
// logged once. One PassFD value serves one Server.
//
// A HandoffDir that cannot be made absolute (no working directory) leaves
// every socket refused.
func PassFD(cfg PassFDConfig) DataPath {
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = time.Second
	}
	t, err := cfg.trust()
	if err != nil {
		t.Dir = "" // relInside refuses everything
	}
	return &passfdPath{cfg: cfg, trust: t, clients: map[string]*handoff.FDClient{}, out: map[string]map[uint64]struct{}{},
		warned: map[string]bool{}}
}

type passfdPath struct {
	cfg   PassFDConfig
	trust handoff.SocketTrust

	mu      sync.Mutex
	clients map[string]*handoff.FDClient // by socket path
	// out holds, by socket path, the ids of connections handed off with a
	// return request and not yet back or ended: if that node's socket
	// breaks (the node died), they leave the policy's connection table.
	out    map[string]map[uint64]struct{}
	ret    atomic.Int32 // 0 undecided, 1 hand back, -1 keep
	closer sync.Once
	// warned holds the node socket paths whose refusal was logged (one
	// line per socket, not per request); cleared when maxWarned is reached.
	warned map[string]bool
}

// maxWarned bounds passfdPath.warned.
const maxWarned = 1024

// refused counts and logs (once per node and socket) a send that failed
// because the node's socket is not trusted, and reports whether it was one.
func (p *passfdPath) refused(s *Server, nodeURL, path string, err error) bool {
	if !errors.Is(err, handoff.ErrUntrusted) {
		return false
	}
	if errors.Is(err, handoff.ErrSocketPeer) {
		s.handoff.refusedPeer.Add(1)
	} else {
		s.handoff.refusedDir.Add(1)
	}
	key := nodeURL + " " + path
	p.mu.Lock()
	first := !p.warned[key]
	if first {
		if len(p.warned) >= maxWarned {
			clear(p.warned)
		}
		p.warned[key] = true
	}
	p.mu.Unlock()
	if first {
		s.logf("front: passfd: node %s: refusing its handoff socket, relaying its requests: %v", nodeURL, err)
	}
	return true
}

func (p *passfdPath) Name() string { return "passfd" }

// client returns the socket client for path, bound to s for hand-backs.
func (p *passfdPath) client(s *Server, path string) *handoff.FDClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.clients[path]; c != nil {
		return c
	}
	c := handoff.NewFDClient(handoff.FDClientConfig{
		Path:        path,
		SendTimeout: p.cfg.SendTimeout,
		RawReturns:  true,
		Trust:       &p.trust,
		OnReturn: func(r handoff.FDMessage) {
			p.settle(path, r.Header.Conn)
			s.cl.Release(r.Header.Conn)
			p.adopt(s, r)
		},
		OnEnded: func(h handoff.FDHeader) {
			s.handoff.ended.Add(1)
			p.settle(path, h.Conn)
			s.cl.Release(h.Conn)
			s.cl.CloseConn(h.Conn)
		},
		OnDisconnect: func() {
			p.mu.Lock()
			lost := p.out[path]
			delete(p.out, path)
			p.mu.Unlock()
			releaseSocket(s, path)
			for id := range lost {
				s.handoff.lost.Add(1)
				s.cl.CloseConn(id)
			}
		},
	})
	p.clients[path] = c
	p.closer.Do(func() {
		go func() {
			<-s.done
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, c := range p.clients {
				c.Close()
			}
		}()
	})
	return c
}

// owe records that connection id went to the node at path with a return
// request; settle forgets it when it comes back or ends.
func (p *passfdPath) owe(path string, id uint64) {
	p.mu.Lock()
	m := p.out[path]
	if m == nil {
		m = map[uint64]struct{}{}
		p.out[path] = m
	}
	m[id] = struct{}{}
	p.mu.Unlock()
}

func (p *passfdPath) settle(path string, id uint64) {
	p.mu.Lock()
	delete(p.out[path], id)
	p.mu.Unlock()
}

// handBack reports whether nodes must return connections after a request.
func (p *passfdPath) handBack(s *Server) bool {
	switch p.cfg.Return {
	case ReturnAlways:
		return true
	case ReturnNever:
		return false
	}
	r := p.ret.Load()
	if r == 0 {
		r = 1
		// Under a content-blind policy a node may keep a passed connection,
		// as LVS keeps a client on its real server.
		if pol := s.cl.Policy(); pol != nil && !policy.TraitsOf(pol).Placement.ContentAware() {
			r = -1
		}
		p.ret.Store(r)
	}
	return r > 0
}

func (p *passfdPath) Serve(x *Exchange) Result {
	cc := x.cc
	s := cc.s
	if cc.relayOnce {
		// The raw accept path tried this request's handoff and failed
		// (counted there): relay it, hand off the next ones again.
		cc.relayOnce = false
		return cc.relay(x)
	}
	st := x.Backend.LastStatus()
	if st == nil || st.HandoffSocket == "" {
		s.handoff.fallbackNoSocket.Add(1)
		return cc.relay(x)
	}
	sc, ok := cc.c.(syscall.Conn)
	if !ok {
		s.handoff.fallbackSend.Add(1)
		return cc.relay(x)
	}
	back := p.handBack(s)
	h := handoff.FDHeader{Kind: handoff.FDHandoff, Flags: handoff.FDFlagEnded, Node: int32(x.Backend.Index), Moves: 1, Conn: cc.id,
		Fetch: handoff.FetchOf(x.Decision.Fetch, x.Decision.Node)}
	if back {
		h.Flags = handoff.FDFlagReturn
		// Recorded before the send: the node may return it at once.
		p.owe(st.HandoffSocket, cc.id)
	}
	s.cl.Hold(x.Backend, cc.id) // until the node returns or ends it (held.go)
	if err := p.client(s, st.HandoffSocket).Send(h, sc, x.Head, x.Buffered()); err != nil {
		s.cl.Release(cc.id)
		p.settle(st.HandoffSocket, cc.id)
		if !p.refused(s, x.Backend.URL, st.HandoffSocket, err) {
			s.handoff.fallbackSend.Add(1)
			s.logf("front: passfd to %s: %v; relaying", x.Backend.URL, err)
		}
		return cc.relay(x)
	}
	// The descriptor is queued for the node: close our copy (this does not
	// end the TCP connection) and forget the connection.
	cc.c.Close()
	s.handoff.passed.Add(1)
	if back {
		// The connection comes back or its end is reported (FDEnded), so
		// it stays in the policy's connection table meanwhile.
		cc.holder = -1
	}
	return Result{Detached: true}
}

// adopt takes a connection a node handed back. Most carry a complete
// request head that goes straight to a node by handoff again: redispatch
// does that without ever wrapping the descriptor. Anything else (a partial
// head, a body, a node that cannot take a handoff, or another data path
// chosen by Config.Choose) is served like a connection with bytes already
// buffered: its next request is routed afresh, keeping its id and holder
// for the policy.
func (p *passfdPath) adopt(s *Server, r handoff.FDMessage) {
	s.handoff.returned.Add(1)
	if p.redispatch(s, r) {
		return
	}
	c, err := handoff.WrapFD(r.FD)
	if err != nil {
		s.handoff.returnRefused.Add(1)
		return
	}
	cc := s.newClientConn(c)
	if cc == nil {
		s.handoff.returnRefused.Add(1) // shutting down: newClientConn closed it
		return
	}
	s.ctr.connsAccepted.Add(^uint64(0)) // a returning connection, not a new one
	if r.Header.Conn != 0 {
		cc.id = r.Header.Conn
	}
	cc.holder = int(r.Header.Node)
	if len(r.Data) > len(cc.in.b) { // a node with a larger head limit
		cc.in.b = make([]byte, len(r.Data)+4096)
	}
	cc.in.w = copy(cc.in.b, r.Data)
	go cc.serve()
}

// redispatch is the fast path for a returned connection whose buffered
// bytes hold a complete request head without a body, under a front whose
// only path is this one: parse, ask the policy, pass the bare descriptor to
// the chosen node. It reports false, having consumed nothing, when the
// request needs the full connection machinery; then the policy may be asked
// a second time for it by the slow path (only when the node chosen first
// has no handoff socket or its socket fails, which counts a fallback).
func (p *passfdPath) redispatch(s *Server, r handoff.FDMessage) bool {
	if s.cfg.Choose != nil || s.cfg.Path != DataPath(p) || s.closing.Load() || r.FD < 0 {
		return false
	}
	var req httpwire.Request
	if _, err := s.parser.Parse(r.Data, &req); err != nil || req.HasBody() || req.IsMethod("CONNECT") {
		return false
	}
	start := time.Now()
	var vh vhostState
	pr := policy.Request{URL: contentKey(s.cfg.VHosts, &req, "", &vh), Size: -1, Conn: r.Header.Conn, Holder: int(r.Header.Node)}
	if internalKey(pr.URL, s.cfg.VHosts != nil) {
		return false // the slow path answers 404
	}
	d, b := s.cl.Pick(&pr)
	if d.Node < 0 || b == nil {
		return false // the slow path answers 503
	}
	st := b.LastStatus()
	if st == nil || st.HandoffSocket == "" {
		s.cl.Done(b, &pr)
		return false
	}
	h := handoff.FDHeader{Kind: handoff.FDHandoff, Flags: handoff.FDFlagEnded, Node: int32(b.Index), Moves: r.Header.Moves + 1, Conn: r.Header.Conn,
		Fetch: handoff.FetchOf(d.Fetch, d.Node)}
	if p.handBack(s) {
		h.Flags = handoff.FDFlagReturn
	}
	if h.Flags&handoff.FDFlagReturn != 0 {
		p.owe(st.HandoffSocket, r.Header.Conn)
	}
	// Never wait here: this runs on the socket's reader goroutine. A full
	// node socket sends the connection down the slow path, which waits.
	s.cl.Hold(b, r.Header.Conn)
	err := p.client(s, st.HandoffSocket).TrySendRaw(h, r.FD, r.Data)
	s.cl.Done(b, &pr)
	if err != nil {
		s.cl.Release(r.Header.Conn)
		p.settle(st.HandoffSocket, r.Header.Conn)
		// An untrusted socket is counted once, by the slow path, which
		// refuses it again.
		if !errors.Is(err, handoff.ErrWouldBlock) && !errors.Is(err, handoff.ErrUntrusted) {
			s.handoff.fallbackSend.Add(1)
		}
		return false
	}
	rawClose(r.FD)
	s.ctr.requests.Add(1)
	s.pathCounter(p.Name()).Add(1)
	s.handoff.passed.Add(1)
	s.handoff.redispatched.Add(1)
	if o := s.cfg.Observer; o != nil {
		o.Observe(Observation{Node: b.Index, NodeURL: b.URL, Path: p.Name(), Elapsed: time.Since(start)})
	}
	return true
}

// rawClose closes fd, a TCP socket without SO_LINGER (close never blocks).
func rawClose(fd int) {
	unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}
