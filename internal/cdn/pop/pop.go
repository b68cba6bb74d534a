// Package pop runs one point of presence of the CDN tier (SPEC §5, seed 003
// §1 and §3): a shoal cluster (gateway = the front, nodes with a site, as
// `shoal up` starts it) plus the peer layer that joins PoPs: authenticated
// links (internal/base/peerwire) carrying MBPP (internal/cdn/mbpp), which gives every
// PoP the same view of link and server performance, and Chord
// (internal/cdn/chord), which maps content keys to the PoPs that hold them.
//
// The protocols are pure state machines; this package owns the real clock,
// the sockets and the lock around them, samples link RTT from TCP_INFO on
// the peer connections and server performance from the nodes' status
// reports, and serves GET /pops and GET /chord next to the cluster's admin
// API and /metrics.
package pop

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shoal/internal/base/peerwire"
	"shoal/internal/cdn/cdndns"
	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/mbpp"
	"shoal/internal/cdn/replica"
	"shoal/internal/up"
)

// Config describes one PoP. DefaultConfig holds every default; flags and
// TOML (internal/config, [pop]) start from it.
type Config struct {
	// Name identifies the PoP; its ID on both rings is chord.Hash(Name).
	Name string
	// Peer is the address other PoPs reach this one on.
	Peer string
	// Join lists peer addresses of PoPs already in the DCDN; empty founds
	// a new one.
	Join []string
	// SeedFile holds the shared authentication seed (seed 003 §3.1).
	SeedFile string
	// JoinTimeout bounds the wait for the join to go round the ring.
	JoinTimeout time.Duration
	// SampleEvery is the period of RTT and server performance sampling.
	SampleEvery time.Duration
	// Cluster is the PoP's gateway and nodes (Listen, Admin, Nodes,
	// CacheMB...), as `shoal up` takes it. Admin also serves /pops and
	// /chord.
	Cluster up.Config
	// MBPP holds the ring protocol's constants (Hold, AckTimeout, weights).
	MBPP mbpp.Config
	// Chord holds the Chord periods and successor list length.
	Chord chord.Config
	// DNS is the authoritative DNS server for the CDN's zone (off when
	// DNS.Addr is empty); Coverage the file of prefixes → PoP names.
	DNS      cdndns.Config
	Coverage string
	// GatewayIPs are the addresses clients reach this PoP's gateway at
	// (one IPv4 and one IPv6 at most), published in its MBPP entry for
	// every PoP's DNS to answer. Empty: the IP of Cluster.Listen when it
	// is a specific address, else that of Peer.
	GatewayIPs []string
	// Edge and Origin are gone (the PoP's content tier is its nodes): a
	// PoP started with Edge set refuses to start and says so.
	Edge, Origin string
	// Origins makes the PoP's nodes HTTP caches in front of these
	// origins (node cache mode, edge.go): "URL" answers every host,
	// "HOST=URL" one host. The gateway then serves the origins' content,
	// not a sample site, and a node's miss goes through the PoP's miss
	// chain (cachemode.go): a PoP holding the content, the key's home PoP
	// as shield, the origin. Default none.
	Origins []string
	// EdgeData holds the nodes' stored responses (EdgeData/node-N) when
	// Origins is set; "" keeps them in temporary folders.
	EdgeData string
	// CDN holds the replication constants (window, M, hot push).
	CDN replica.Config
	// Redirect sends a client whose PoP misses to a better-scoring PoP
	// holding the content (HTTP 302, once) instead of fetching for it.
	Redirect bool
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a PoP's defaults.
func DefaultConfig() Config {
	return Config{
		Peer:        "127.0.0.1:7946",
		JoinTimeout: 30 * time.Second,
		SampleEvery: time.Second,
		Cluster:     popCluster(),
		MBPP:        mbpp.DefaultConfig(0, "", ""),
		Chord:       chord.DefaultConfig(chord.Peer{}),
		DNS:         cdndns.DefaultConfig(),
		CDN:         replica.DefaultConfig(),
	}
}

// ErrRefused is wrapped when the DCDN does not accept this PoP.
var ErrRefused = errors.New("the DCDN refused this PoP")

// PoP is a running point of presence.
type PoP struct {
	// ID is the PoP's place on both rings.
	ID uint64
	// PeerAddr is the peer listener's address.
	PeerAddr string
	// Cluster is the gateway and nodes.
	Cluster *up.Cluster
	// AdminURL serves the cluster's admin API plus /pops and /chord.
	AdminURL string
	// AdminTokenFile holds the admin API's bearer token, needed for
	// changes and, off loopback, for reads (internal/admin).
	AdminTokenFile string

	cfg    Config
	seed   []byte
	log    *slog.Logger
	wire   peerwire.Config
	links  *links
	peerLn net.Listener
	// DNS is the running responder, nil when off.
	DNS     *cdndns.Server
	cm      *cacheMode // the content tier on the nodes (cachemode.go), nil when off
	lookups map[uint64]chan chord.Result
	ctx     context.Context

	mu     sync.Mutex // guards the state machines
	mb     *mbpp.Node
	ch     *chord.Node
	wake   chan struct{}
	joined chan struct{}
	failed chan error
	once   sync.Once

	cancel context.CancelFunc
	done   chan struct{}
}

// Start brings the PoP up: cluster, peer listener, then founds a ring or
// joins one. It returns once the join completed (one full ping cycle
// accepted by every PoP), or with an error a person can act on.
func Start(cfg Config) (*PoP, error) {
	if cfg.Name == "" {
		return nil, fmt.Errorf("pop: a name is required (--name)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	seed, err := peerwire.LoadSeed(cfg.SeedFile)
	if err != nil {
		return nil, fmt.Errorf("pop %s: %w", cfg.Name, err)
	}
	p := &PoP{ID: uint64(chord.Hash(cfg.Name)), cfg: cfg, seed: seed, log: cfg.Logger.With("pop", cfg.Name),
		wake: make(chan struct{}, 1), joined: make(chan struct{}), failed: make(chan error, 1), done: make(chan struct{}),
		lookups: map[uint64]chan chord.Result{}}
	p.wire = peerwire.DefaultConfig(p.ID, seed)
	p.wire.Stats = &peerwire.Stats{}
	p.wire.Log = func(f string, a ...any) { p.log.Warn(fmt.Sprintf(f, a...)) }
	p.links = newLinks(&p.wire, p.log)

	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	p.peerLn, err = net.Listen("tcp", cfg.Peer)
	if err != nil {
		return nil, fmt.Errorf("pop %s: peer listener: %w", cfg.Name, err)
	}
	p.PeerAddr = p.peerLn.Addr().String()
	go p.links.serve(p.peerLn)
	if err := p.joinRings(); err != nil {
		return nil, err
	}
	if err := p.startServices(); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// joinRings founds the rings, or joins them through cfg.Join, and waits
// until the join went round.
func (p *PoP) joinRings() error {
	cfg := p.cfg
	mc := cfg.MBPP
	mc.Self, mc.Name, mc.Addr = mbpp.ID(p.ID), cfg.Name, p.PeerAddr
	mc.Gateway = strings.Join(gatewayIPs(cfg), ",")
	mc.Accept = p.accept
	cc := cfg.Chord
	cc.Self = chord.Peer{ID: chord.ID(p.ID), Addr: p.PeerAddr}
	if err := cc.Validate(); err != nil {
		return err
	}
	p.cfg.Chord = cc
	now := time.Now()
	var out []mbpp.Msg
	var err error
	if len(cfg.Join) == 0 {
		if p.mb, err = mbpp.NewFounder(mc, now); err != nil {
			return err
		}
		p.mb.SetProof(p.proof(mc.Self, cfg.Name, p.PeerAddr))
		if p.ch, err = chord.Create(cc, now); err != nil {
			return err
		}
		close(p.joined)
	} else {
		if err := p.reachContacts(); err != nil {
			return err
		}
		if p.mb, out, err = mbpp.NewJoiner(mc, cfg.Join, p.proof(mc.Self, cfg.Name, p.PeerAddr), now); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.ctx = cancel, ctx
	go p.loop(ctx)
	p.sendMBPP(out)

	select {
	case <-p.joined:
		return nil
	case err := <-p.failed:
		return err
	case <-time.After(cfg.JoinTimeout):
		return fmt.Errorf("pop %s: join not complete after %v (is the ring turning? see the contacts' /pops)", cfg.Name, cfg.JoinTimeout)
	}
}

// reachContacts authenticates to the contacts first, so that a wrong seed
// is reported now, plainly, rather than as a join that times out.
func (p *PoP) reachContacts() error {
	cfg := p.cfg
	var errs []error
	reached := false
	for _, a := range cfg.Join {
		if _, err := p.links.dial(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		reached = true
	}
	if reached {
		return nil
	}
	err := errors.Join(errs...)
	if errors.Is(err, peerwire.ErrAuth) {
		return fmt.Errorf("pop %s: %w: its PoPs do not share this seed (--seed-file %s): %v", cfg.Name, ErrRefused, cfg.SeedFile, err)
	}
	return fmt.Errorf("pop %s: no PoP to join answered: %w", cfg.Name, err)
}

// startServices starts the cluster behind the gateway, whose admin API
// also serves /pops, /chord, /content and /purge and the rings' metrics,
// then the content tier and the DNS responder.
func (p *PoP) startServices() error {
	cfg := p.cfg
	cc := cfg.Cluster
	cc.AdminRoutes = map[string]http.Handler{
		"GET /pops":    http.HandlerFunc(p.servePops),
		"GET /chord":   http.HandlerFunc(p.serveChord),
		"GET /content": http.HandlerFunc(p.serveContent),
		"POST /purge":  http.HandlerFunc(p.servePurge),
	}
	cc.Collectors = []prometheus.Collector{&collector{p: p}}
	if cfg.Edge != "" {
		return fmt.Errorf("pop %s: --edge is gone: the gateway (--listen) serves the CDN's content; name the origin with --origin", cfg.Name)
	}
	if len(cfg.Origins) > 0 {
		edge, err := p.edgeNodes()
		if err != nil {
			return fmt.Errorf("pop %s: %w", cfg.Name, err)
		}
		if cc.Edge, err = p.prepareCacheMode(cfg, edge); err != nil {
			return err
		}
	}
	cl, err := up.Start(cc)
	if err != nil {
		return fmt.Errorf("pop %s: %w", cfg.Name, err)
	}
	p.mu.Lock() // the loop samples the cluster
	p.Cluster = cl
	p.mu.Unlock()
	p.AdminURL = cl.AdminURL
	if p.AdminURL != "" {
		p.AdminTokenFile = cl.AdminTokenFile
	}
	if p.cm != nil {
		p.startCacheMode(cl)
		if a := cl.Admin(); a != nil {
			a.SetCDN(p.cdnSnapshot)
		}
	}
	if cfg.DNS.Addr != "" {
		return p.startDNS(cfg)
	}
	return nil
}

// startDNS starts the DNS server. Without configured name servers and on
// an unspecified listen address, the PoP itself is the zone's one name
// server, at its gateway's addresses.
func (p *PoP) startDNS(cfg Config) error {
	var cov *cdndns.Coverage
	var err error
	if cfg.Coverage != "" {
		if cov, err = cdndns.LoadCoverage(cfg.Coverage); err != nil {
			return fmt.Errorf("pop %s: %w", cfg.Name, err)
		}
	}
	dc := cfg.DNS
	if host, _, err := net.SplitHostPort(dc.Addr); len(dc.NS) == 0 && err == nil {
		if ip, err := netip.ParseAddr(host); err != nil || ip.IsUnspecified() {
			for _, a := range gatewayIPs(cfg) {
				dc.NS = append(dc.NS, "ns1="+a)
			}
		}
	}
	if p.DNS, err = cdndns.Start(dc, cov, p.dnsView); err != nil {
		return fmt.Errorf("pop %s: %w", cfg.Name, err)
	}
	return nil
}

// gatewayIPs are the client-facing addresses this PoP publishes:
// cfg.GatewayIPs, else the gateway's or the peer listener's IP when
// specific.
func gatewayIPs(cfg Config) []string {
	if len(cfg.GatewayIPs) > 0 {
		return cfg.GatewayIPs
	}
	for _, addr := range []string{cfg.Cluster.Listen, cfg.Peer} {
		host, _, err := net.SplitHostPort(addr)
		if ip, perr := netip.ParseAddr(host); err == nil && perr == nil && !ip.IsUnspecified() {
			return []string{ip.Unmap().String()}
		}
	}
	return nil
}

// dnsView is the MBPP view as the DNS server reads it: each PoP with its
// gateway's addresses (from its entry), and serv between any two PoPs
// from the links in the view (mbpp.Node.ScoreFrom), computed for one
// "from" PoP at a time under the lock.
func (p *PoP) dnsView() cdndns.View {
	p.mu.Lock()
	view := p.mb.View(time.Now())
	p.mu.Unlock()
	ids := make(map[string]mbpp.ID, len(view))
	v := cdndns.View{Self: p.cfg.Name, PoPs: make([]cdndns.Candidate, 0, len(view))}
	for _, e := range view {
		ids[e.Name] = e.ID
		c := cdndns.Candidate{Name: e.Name, Alive: e.Alive, Server: e.Server}
		for _, s := range strings.Split(e.Gateway, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
				if a = a.Unmap(); a.Is4() && !c.V4.IsValid() {
					c.V4 = a
				} else if a.Is6() && !c.V6.IsValid() {
					c.V6 = a
				}
			}
		}
		v.PoPs = append(v.PoPs, c)
	}
	from, scores := "", map[string]float64{}
	v.Score = func(f, to string) float64 {
		if f != from {
			from, scores = f, make(map[string]float64, len(ids))
			p.mu.Lock()
			for name, id := range ids {
				scores[name] = p.mb.ScoreFrom(ids[f], id)
			}
			p.mu.Unlock()
		}
		return scores[to]
	}
	return v
}

// proof is what a newcomer shows every PoP of the ring: an HMAC of its
// identity under a key derived from the seed, which each PoP checks with
// its own copy (seed 003 §3.1: joining needs the authentication seed and
// the acceptance of all PoPs).
func (p *PoP) proof(id mbpp.ID, name, addr string) []byte {
	k, _ := hkdf.Key(sha256.New, p.seed, nil, "shoal pop join proof v1", 32)
	m := hmac.New(sha256.New, k)
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(id)))
	m.Write([]byte(name + "\x00" + addr))
	return m.Sum(nil)
}

func (p *PoP) accept(pr mbpp.Proposal) error {
	if uint64(pr.ID) != uint64(chord.Hash(pr.Name)) {
		return fmt.Errorf("id %x is not the hash of name %q", pr.ID, pr.Name)
	}
	if !hmac.Equal(pr.Proof, p.proof(pr.ID, pr.Name, pr.Addr)) {
		return errors.New("join proof does not verify under this seed")
	}
	return nil
}

// loop drives both state machines with the real clock.
func (p *PoP) loop(ctx context.Context) {
	defer close(p.done)
	sample := time.NewTicker(p.cfg.SampleEvery)
	defer sample.Stop()
	keep := time.NewTicker(5 * time.Second)
	defer keep.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		next := p.mb.Next()
		if p.ch != nil {
			if t := p.ch.Next(); next.IsZero() || t.Before(next) {
				next = t
			}
		}
		p.mu.Unlock()
		d := time.Hour
		if !next.IsZero() {
			d = max(time.Until(next), 0)
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return
		case in := <-p.links.in:
			p.handle(in)
		case <-timer.C:
			p.tick()
		case <-sample.C:
			p.sample()
		case <-keep.C:
			p.links.keepalive()
		case <-p.wake:
		}
	}
}

func (p *PoP) handle(in inbound) {
	now := time.Now()
	switch in.proto {
	case protoMBPP:
		m, err := mbpp.Decode(in.body)
		if err != nil || uint64(m.From) != in.from {
			p.log.Warn("bad MBPP frame", "from", fmt.Sprintf("%x", in.from), "err", err)
			return
		}
		p.mu.Lock()
		wasJoined := p.mb.Joined()
		out := p.mb.Handle(now, m)
		chOut := p.afterMBPP(now, wasJoined)
		p.mu.Unlock()
		p.sendMBPP(out)
		p.sendChord(chOut)
	case protoChord:
		m, err := chord.Decode(in.body)
		if err != nil || uint64(m.From.ID) != in.from {
			p.log.Warn("bad Chord frame", "from", fmt.Sprintf("%x", in.from), "err", err)
			return
		}
		p.mu.Lock()
		var out []chord.Msg
		if p.ch != nil {
			out = p.ch.Handle(now, m)
		}
		p.deliverLocked()
		p.mu.Unlock()
		p.sendChord(out)
	case protoCDN:
		p.onCDN(in.from, in.body)
	}
}

// afterMBPP notices the end of a join: the PoP is a member, so it joins
// Chord through the members MBPP gave it. Called with p.mu held.
func (p *PoP) afterMBPP(now time.Time, wasJoined bool) []chord.Msg {
	if r := p.mb.Refused(); r != "" {
		p.once.Do(func() { p.failed <- fmt.Errorf("pop %s: %w: %s", p.cfg.Name, ErrRefused, r) })
		return nil
	}
	if wasJoined || !p.mb.Joined() || p.ch != nil {
		return nil
	}
	var contacts []chord.Peer
	for _, v := range p.mb.View(now) {
		if v.Alive && !v.Self {
			contacts = append(contacts, chord.Peer{ID: chord.ID(v.ID), Addr: v.Addr})
		}
	}
	p.once.Do(func() { close(p.joined) })
	if len(contacts) == 0 {
		p.ch, _ = chord.Create(p.cfg.Chord, now)
		return nil
	}
	var out []chord.Msg
	p.ch, out, _ = chord.Join(p.cfg.Chord, contacts, now)
	return out
}

func (p *PoP) tick() {
	now := time.Now()
	p.mu.Lock()
	out := p.mb.Tick(now)
	var chOut []chord.Msg
	if p.ch != nil {
		chOut = p.ch.Tick(now)
	}
	p.deliverLocked()
	p.mu.Unlock()
	p.sendMBPP(out)
	p.sendChord(chOut)
}

// sample feeds link RTTs (TCP_INFO of each peer link) and this PoP's server
// performance to MBPP, and opens links to members it has none to, so that
// every link is measured.
func (p *PoP) sample() {
	p.links.each(func(l *link) {
		if rtt, ok := tcpRTT(l.c.NetConn()); ok {
			p.mu.Lock()
			p.mb.SampleRTT(mbpp.ID(l.peer), rtt)
			p.mu.Unlock()
		}
	})
	p.mu.Lock()
	cl := p.Cluster
	p.mu.Unlock()
	if cl != nil {
		perf := serverPerf(cl)
		p.mu.Lock()
		p.mb.SetServer(perf)
		p.mu.Unlock()
	}
	p.mu.Lock()
	view := p.mb.View(time.Now())
	if p.ch != nil {
		// Every live member of MBPP's ring is a member of Chord's: after a
		// partition healed (MBPP merges its two rings), this is what joins
		// the two Chord rings again (chord.Node.Consider).
		for _, v := range view {
			if v.Alive && !v.Self {
				p.ch.Consider(chord.Peer{ID: chord.ID(v.ID), Addr: v.Addr})
			}
		}
	}
	p.mu.Unlock()
	for _, v := range view {
		if v.Alive && !v.Self && !p.links.connected(uint64(v.ID)) {
			p.links.send(uint64(v.ID), v.Addr, []byte{protoNop})
		}
	}
}

// serverPerf is the PoP's server performance in [0,1] (seed 003 §3.2, from
// the content manager's view of its devices): the share of nodes up times
// their mean idle CPU. CPU is what a request costs a node here; the cache
// hit ratio is left out because it describes what is stored, which Chord
// and the directory already route by.
func serverPerf(cl *up.Cluster) float64 {
	nodes := cl.Control.Nodes()
	if len(nodes) == 0 {
		return 0
	}
	up, idle := 0, 0.0
	for _, n := range nodes {
		if !n.Up {
			continue
		}
		up++
		cpu := 0.0
		if n.Status != nil {
			cpu = n.Status.CPUPercent / 100
		}
		idle += 1 - min(max(cpu, 0), 1)
	}
	if up == 0 {
		return 0
	}
	return float64(up) / float64(len(nodes)) * idle / float64(up)
}

func (p *PoP) sendMBPP(ms []mbpp.Msg) {
	for _, m := range ms {
		f := m.AppendBinary([]byte{protoMBPP})
		p.links.send(uint64(m.To), m.ToAddr, f)
	}
}

func (p *PoP) sendChord(ms []chord.Msg) {
	for _, m := range ms {
		f := m.AppendBinary([]byte{protoChord})
		p.links.send(uint64(m.To.ID), m.To.Addr, f)
	}
}

// Leave departs gracefully from Chord (MBPP finds the PoP gone by itself).
func (p *PoP) Leave() {
	p.mu.Lock()
	var out []chord.Msg
	if p.ch != nil {
		out = p.ch.Leave()
	}
	p.mu.Unlock()
	p.sendChord(out)
}

// Shutdown stops the PoP: peer layer, admin, cluster.
func (p *PoP) Shutdown(ctx context.Context) error {
	p.Leave()
	var errs []error
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
	if p.peerLn != nil {
		p.peerLn.Close()
	}
	p.links.close()
	if p.DNS != nil {
		p.DNS.Close()
	}
	if p.Cluster != nil {
		errs = append(errs, p.Cluster.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// Close stops everything at once.
func (p *PoP) Close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Shutdown(ctx)
}

// Err delivers the first error a server of the cluster stops with.
func (p *PoP) Err() <-chan error {
	if p.Cluster == nil {
		return nil
	}
	return p.Cluster.Err()
}

// Refused returns the peer links refused for a wrong seed so far.
func (p *PoP) Refused() uint64 { return p.wire.Stats.Refused.Load() }

// popCluster is a PoP's cluster: `shoal up`'s defaults with two nodes,
// enough to show the front's policy at work in each PoP.
func popCluster() up.Config {
	c := up.DefaultConfig()
	c.Nodes = 2
	return c
}
