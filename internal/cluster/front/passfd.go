package front

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/policy"

	"golang.org/x/sys/unix"
)

// ReturnMode says when a node must hand a passed connection back to the
// front after one request (see internal/cluster/handoff's package doc).
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
	// Moves says who moves a connection whose next request belongs to
	// another node, under a policy that shares its URL table (tbccrd):
	// the nodes, by the table (MovesNodes, default; passfd_tag.go), or the
	// front after each request (MovesFront).
	Moves MoveMode
	// TagFlush is how long the front gathers changes of the shared table
	// before pushing them to the nodes. Default DefaultTagFlush (1 ms).
	TagFlush time.Duration
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
	// FallbackStream counts HTTP/2 and HTTP/3 requests a handoff path
	// relayed instead: a stream shares its connection with others, so its
	// socket cannot move; each stream is relayed on its own (mux.go).
	FallbackStream uint64
	// FallbackProxy counts requests a handoff path relayed because their
	// connection's client address came in a PROXY header: a node given the
	// socket would see the balancer's address (proxyproto.go).
	FallbackProxy uint64
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
	// Tag counts tag mode's work (passfd_tag.go).
	Tag TagStats
}

// PassFD returns the same-host handoff data path (SPEC §4): the front
// passes the client socket and the bytes it read to the chosen node over the
// node's handoff socket (learned from the node's status report,
// control.Backend.LastStatus().HandoffSocket), closes its own copy and
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
		warned: map[string]bool{}, tag: newTagState()}
}

type passfdPath struct {
	cfg   PassFDConfig
	trust handoff.SocketTrust

	mu      sync.Mutex
	clients map[string]*handoff.FDClient // by socket path
	// out holds, by socket path, the ids of connections handed off with a
	// return request and not yet back or ended: if that node's socket
	// breaks (the node died), they leave the policy's connection table.
	out map[string]map[uint64]struct{}
	// ret is handBack's answer under ReturnAuto for the policy it names
	// (a reload may replace the policy).
	ret    atomic.Pointer[handBackFor]
	closer sync.Once
	// warned holds the node socket paths whose refusal was logged (one
	// line per socket, not per request); cleared when maxWarned is reached.
	warned map[string]bool
	// tag is tag mode's state (passfd_tag.go).
	tag *tagState
	// hybrid is the hybrid rule that chooses this path (Hybrid), nil when
	// the path is configured alone; tag mode then shares the work.
	hybrid *hybrid
}

// maxWarned bounds passfdPath.warned.
const maxWarned = 1024

// sendFailed says why a send that failed before the descriptor left
// falls back to relay, and logs it: a socket that is not trusted once per
// node and socket (not per request), any other failure each time.
func (p *passfdPath) sendFailed(s *Server, nodeURL, path string, err error) fallbackReason {
	if !errors.Is(err, handoff.ErrUntrusted) {
		s.logf("front: passfd to %s: %v; relaying", nodeURL, err)
		return fallbackSend
	}
	why := fallbackSocketDir
	if errors.Is(err, handoff.ErrSocketPeer) {
		why = fallbackSocketPeer
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
	return why
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
		OnNotes: func(_ handoff.FDHeader, data []byte) { p.applyNotes(s, path, data) },
		OnEnded: func(h handoff.FDHeader) {
			s.ctr.ended.Add(1)
			p.settle(path, h.Conn)
			s.cl.Release(h.Conn)
			s.cl.CloseConn(h.Conn)
		},
		OnDisconnect: func() {
			p.mu.Lock()
			lost := p.out[path]
			delete(p.out, path)
			for id := range lost {
				delete(p.tag.conns, id)
			}
			p.mu.Unlock()
			releaseSocket(s, path)
			for id := range lost {
				s.ctr.lost.Add(1)
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

// oweLocked records, with p.mu held, that connection id went to the node at
// path with a return request; settle forgets it when it comes back or ends.
func (p *passfdPath) oweLocked(path string, id uint64) {
	m := p.out[path]
	if m == nil {
		m = map[uint64]struct{}{}
		p.out[path] = m
	}
	m[id] = struct{}{}
}

// settle forgets connection id, owed by the node at path or, in tag mode,
// wherever the nodes moved it.
func (p *passfdPath) settle(path string, id uint64) {
	p.mu.Lock()
	delete(p.out[path], id)
	p.untrack(id)
	p.mu.Unlock()
}

// handBack reports whether nodes must return connections after a request,
// and track whether a passed connection is held against its node until the
// node reports its end (held.go): only under a policy that reads the nodes'
// load (policy.Traits.Active), since the end notice costs the front a
// wake-up and two system calls per connection. A returned connection ends
// its hold when it comes back.
func (p *passfdPath) handBack(s *Server) (back, track bool) {
	back, track = true, true // no policy: the safe side
	if pol := s.cl.Policy(); pol != nil {
		name := pol.Name()
		r := p.ret.Load()
		if r == nil || r.policy != name {
			// Under a content-blind policy a node may keep a passed
			// connection, as LVS keeps a client on its real server.
			t := policy.TraitsOf(pol)
			r = &handBackFor{policy: name, back: t.Placement.ContentAware(), track: t.Active}
			p.ret.Store(r)
		}
		back, track = r.back, r.track
	}
	switch p.cfg.Return {
	case ReturnAlways:
		back = true
	case ReturnNever:
		back = false
	}
	return back, track
}

// handBackFor is handBack's answer for the policy named.
type handBackFor struct {
	policy      string
	back, track bool
}

// send passes connection id — the socket sc with head and data, or with
// sc nil the bare descriptor fd with data and without waiting — to node b's
// handoff socket sock, holding it against b until the node returns or ends
// it when the policy reads load (held.go). It reports whether the node is
// to hand it back. d is the policy's decision, whose fetch node the header
// carries (peer fetch).
func (p *passfdPath) send(s *Server, b *control.Backend, d policy.Decision, sock string, id uint64, moves uint32, sc syscall.Conn, fd int, head, data []byte) (back bool, err error) {
	back, track := p.handBack(s)
	h := handoff.FDHeader{Kind: handoff.FDHandoff, Node: int32(b.Index), Moves: moves, Conn: id,
		Fetch: handoff.FetchOf(d.Fetch, d.Node)}
	switch {
	case back:
		h.Flags = handoff.FDFlagReturn
		tag := p.tagOn(s)
		if tag {
			h.Flags = handoff.FDFlagTag
		}
		// Before the send: the node may return it at once.
		p.mu.Lock()
		p.oweLocked(sock, id)
		if tag {
			p.track(id, b.Index, sock, moves)
		}
		p.mu.Unlock()
		if tag {
			p.kickPush()
		}
	case track:
		h.Flags = handoff.FDFlagEnded
	}
	if track {
		s.cl.Hold(b, id)
	}
	c := p.client(s, sock)
	if sc != nil {
		err = c.Send(h, sc, head, data)
	} else {
		err = c.TrySendRaw(h, fd, data)
	}
	if err != nil {
		p.settle(sock, id)
		if track && (sc != nil || !errors.Is(err, handoff.ErrWouldBlock)) {
			s.cl.Release(id)
		}
	}
	return back, err
}

// socket returns node b's handoff socket, "" while it has reported none.
func socket(b *control.Backend) string {
	if st := b.LastStatus(); st != nil {
		return st.HandoffSocket
	}
	return ""
}

// Serve passes the client connection of x to x.Backend.
func (p *passfdPath) Serve(x *Exchange) Result {
	cc := x.cc
	s := cc.s
	sock := socket(x.Backend)
	if sock == "" {
		return Result{fallback: fallbackNoSocket}
	}
	sc, ok := cc.c.(syscall.Conn)
	if !ok {
		return Result{fallback: fallbackSend}
	}
	back, err := p.send(s, x.Backend, x.Decision, sock, cc.id, cc.moves+1, sc, -1, x.Head, x.Buffered())
	if err != nil {
		return Result{fallback: p.sendFailed(s, x.Backend.URL, sock, err)}
	}
	// The descriptor is queued for the node: close our copy (this does not
	// end the TCP connection) and forget the connection.
	cc.c.Close()
	s.ctr.passed.Add(1)
	if back {
		// The connection comes back or its end is reported (FDEnded), so
		// it stays in the policy's connection table meanwhile.
		cc.holder = -1
	}
	return Result{Detached: true}
}

// moveRaw passes the bare descriptor of m to t's node without waiting: a
// connection from the raw accept loop, or one a node handed back. A full
// node socket sends an accepted connection to the normal path, which waits
// for it (up to SendTimeout) on its own goroutine, the hold staying until it
// picks again (held.go). A returned connection that cannot be passed goes to
// the normal path, which asks the policy again and counts a fallback there.
func (p *passfdPath) moveRaw(s *Server, t *ticket, m *rawMove) rawOutcome {
	sock := socket(t.b)
	if sock == "" {
		return rawNormal // the normal path counts it and relays
	}
	back, err := p.send(s, t.b, t.d, sock, m.id, m.moves+1, nil, m.fd, nil, m.data)
	switch {
	case err == nil:
	case m.returned:
		// Never waits: this runs on the socket's reader goroutine. An
		// untrusted socket is counted once, by the normal path, which
		// refuses it again.
		s.cl.Release(m.id) // a full socket's hold too: the normal path picks anew
		if !errors.Is(err, handoff.ErrWouldBlock) && !errors.Is(err, handoff.ErrUntrusted) {
			s.ctr.fallback(fallbackSend)
		}
		return rawNormal
	case errors.Is(err, handoff.ErrWouldBlock):
		s.ctr.fallback(fallbackFastBlocked)
		return rawNormal
	default:
		s.ctr.fallback(p.sendFailed(s, t.b.URL, sock, err))
		return rawRelay
	}
	rawClose(m.fd) // the node holds the connection now
	if m.returned && p.tag.on.Load() > 0 {
		s.ctr.tag.asked.Add(1)
		if t.b.Index != m.holder {
			s.ctr.tag.rehomed.Add(1)
		}
		s.cl.TagAsked(t.pr.URL) // so the node asks once per URL
	}
	if !back && !m.returned {
		s.cl.CloseConn(m.id) // as the normal path does when it lets go
	}
	s.ctr.passed.Add(1)
	return rawMoved
}

// adopt takes a connection a node handed back. Most carry a complete
// request head that goes straight to a node by handoff again, without
// ever wrapping the descriptor (dispatchRaw). Anything else (a partial
// head, a body, a node that cannot take a handoff, or another data path
// chosen by Config.Choose) is served like a connection with bytes already
// buffered: its next request is routed afresh, keeping its id and holder
// for the policy.
func (p *passfdPath) adopt(s *Server, r handoff.FDMessage) {
	s.ctr.returned.Add(1)
	rr := &rawRoute{m: rawMove{fd: r.FD, data: r.Data, id: r.Header.Conn, holder: int(r.Header.Node), moves: r.Header.Moves, returned: true}}
	if s.cfg.Choose != nil || s.cfg.Path != DataPath(p) || s.closing.Load() || r.FD < 0 {
		s.serveFD(&rr.m, false)
		return
	}
	s.dispatchRaw(p, rr)
}

// rawClose closes fd, a TCP socket without SO_LINGER (close never blocks).
func rawClose(fd int) {
	unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}
