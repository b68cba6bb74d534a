// Package cdnsim is the CDN simulator behind `shoal sim cdn` (see
// SPEC §5): N PoPs stand at locations of a latency matrix and run the real
// protocol code — internal/cdn/mbpp for the performance view, internal/cdn/chord for
// the content directory, internal/cdn/replica for replication and routing,
// internal/base/httpcache for what a PoP may store and for how long — on a
// virtual clock, while the clients of a trace (or a Zipf workload) placed at
// the same locations ask for content. It measures what the seed's design
// costs and gains at internet scale: the MBPP round and its traffic, the age
// of the view when routing uses it, Chord hops, failure detection, and the
// clients' RTT against an oracle (nearest PoP holding the content) and a
// random PoP. A gossip view (van Renesse et al. 1998) can stand in for MBPP
// as a baseline.
//
// Deterministic: the same inputs and seed give the same result. A failure
// that is never detected reports failure_detect_s = −1.
package cdnsim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"shoal/internal/base/httpcache"
	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/mbpp"
	"shoal/internal/cdn/replica"
)

// Config describes one run. DefaultConfig holds every default.
type Config struct {
	// PoPs is how many PoPs, each at its own location (drawn with the
	// seed); at most the matrix's locations.
	PoPs int
	// View is the view protocol: "mbpp" (the seed's) or "gossip".
	View string
	// Ring orders the MBPP ring: "hash" (the seed's and the daemon's: by
	// ID, the hash of the PoP's name, so neighbours are anywhere on
	// Earth) or "geo" (the improvement measured for large N: a greedy
	// nearest-neighbour tour of the PoPs' locations, so each token hop is
	// short and the round, N × (hold + one-way delay), shrinks).
	Ring string
	// MBPP, Chord and CDN are the protocols' constants; Self, names and
	// addresses are filled in per PoP.
	MBPP   mbpp.Config
	Chord  chord.Config
	CDN    replica.Config
	Gossip GossipConfig
	// Origin is the location of the origin server (by name); "" or an
	// unknown name takes the first location.
	Origin string
	// KillAt is the fraction of the workload's duration at which one PoP
	// (drawn with the seed) fails; 0 kills none.
	KillAt float64
	// FetchTimeout is what a client or PoP loses trying a PoP that is
	// dead but still alive in the view (a connect timeout).
	FetchTimeout time.Duration
	// Redirect is the live PoPs' --redirect: a miss whose best holder
	// scores above the ingress PoP (replica.Better, as the live chain
	// decides) sends the client there (HTTP 302: the client pays its RTT
	// to that PoP) while the ingress fetches a copy for next time.
	Redirect bool
	// CapacityRPS is the request rate at which a PoP's server performance
	// reaches 0 (it is 1 − rate/capacity).
	CapacityRPS float64
	// SampleEvery is how often server performance is fed to the view.
	SampleEvery time.Duration
	// ChordRTT feeds MBPP the RTT of Chord messages too (a PoP measures
	// every connection it has, as TCP_INFO does). A PoP routes by all it
	// measured but publishes only its MBPP.PublishLinks nearest links, so
	// the views hold N²·PublishLinks links whatever it measures (before
	// that bound, 1,000 PoPs needed over 10 GB). false keeps the ring
	// neighbours' and probed links only.
	ChordRTT bool
	// RouteCost counts in a miss's time what a live PoP's miss spends
	// before its fetch (the Chord lookup's round trips, the directory
	// query to the key's home) and the TCP handshake of a fetch over no
	// kept connection: the client RTT the WAN lab measures. Off (the
	// default), a miss costs its fetch alone, the measure the oracle's
	// and a random PoP's RTT (which pay neither) are compared with.
	RouteCost bool
	// LearnOrigin has a PoP's plan know its distance to the origin, and
	// the home's, as a live PoP does: from its own fetches (the smoothed
	// time to the answer's headers; the home's comes with its directory
	// answer), unknown before the first, and an unknown detour through
	// the home is taken. false gives every PoP the matrix's distances
	// from the start, as the simulator did before (the scaling tables of
	// docs/cdn.md were measured so).
	LearnOrigin bool
	// ConnIdle is how long a PoP keeps an idle connection to another PoP
	// or the origin (the live transports' IdleConnTimeout): a fetch over
	// none costs a handshake first.
	ConnIdle time.Duration
	// JoinGap spaces the PoPs' joins at the start.
	JoinGap time.Duration
	// PoPLocs, when set, places the PoPs at these locations (PoPs is then
	// its length) and names each PoP after its location, as a scenario
	// file does for the WAN lab, whose PoPs carry those names (and so the
	// same Chord IDs, the same homes for each key); nil draws PoPs
	// locations with the seed.
	PoPLocs []int
	// CacheControl is the origin's answers: classes of URLs and the
	// Cache-Control each is answered with (freshness.go); HTTP the cache's
	// choices where the RFCs leave one, as a live node's
	// (httpcache.Config).
	CacheControl []CacheControlShare
	HTTP         httpcache.Config
	Seed         uint64
	// OnRequest, when set, is told each request's outcome in workload
	// order: to compare a run with the WAN lab's request by request.
	OnRequest func(i int, o Outcome) `json:"-"`
}

// Outcome is one request's fate: the client's RTT in ms, whether its PoP
// held the content, whether the origin was asked, and where a miss was
// served from ("remote NAME", "shield NAME", "origin", "redirect NAME").
type Outcome struct {
	ClientMs    float64
	Hit, Origin bool
	Via         string
}

// DefaultConfig returns the simulator's defaults. MBPP and the CDN keep the
// daemon's defaults; Chord's maintenance periods are longer than the
// daemon's (stabilise and fix-fingers 30 s, check-predecessor 60 s) so that
// a day of a hundred PoPs replays in well under a minute of CPU: on a stable
// ring they change the lookups' hop count only after churn.
func DefaultConfig() Config {
	ch := chord.DefaultConfig(chord.Peer{})
	ch.Stabilise, ch.FixFingers, ch.CheckPredecessor = 30*time.Second, 30*time.Second, time.Minute
	return Config{
		PoPs: 100, View: "mbpp", Ring: "hash",
		MBPP: mbpp.DefaultConfig(0, "", ""), Chord: ch, CDN: replica.DefaultConfig(), Gossip: DefaultGossipConfig(),
		Origin: "orlando", KillAt: 0.5, FetchTimeout: time.Second, CapacityRPS: 200,
		SampleEvery: 10 * time.Second, LearnOrigin: true, ConnIdle: 90 * time.Second, JoinGap: 50 * time.Millisecond, Seed: 1, ChordRTT: true,
		CacheControl: DefaultCacheControl, HTTP: httpcache.DefaultConfig(),
	}
}

// Result is one run: the figures it measures (JSON names are a contract)
// and a few more that explain them.
type Result struct {
	View     string `json:"view"`
	Ring     string `json:"ring"`
	PoPs     int    `json:"pops"`
	Clients  int    `json:"clients"`
	Requests int    `json:"requests"`

	MBPPRoundS       float64 `json:"mbpp_round_s"`
	ViewStalenessS   float64 `json:"view_staleness_s"`
	MBPPBytesRound   float64 `json:"mbpp_bytes_per_round"`
	MBPPMsgsRound    float64 `json:"mbpp_messages_per_round"`
	ViewBytesPerS    float64 `json:"view_bytes_per_s"`
	ChordHopsMean    float64 `json:"chord_hops_mean"`
	ChordHopsP99     int     `json:"chord_hops_p99"`
	FailureDetectS   float64 `json:"failure_detect_s"`
	ClientRTTMean    float64 `json:"client_rtt_ms_mean"`
	OracleRTTMean    float64 `json:"oracle_rtt_ms_mean"`
	RandomRTTMean    float64 `json:"random_rtt_ms_mean"`
	HitRatio         float64 `json:"hit_ratio"`
	OriginFetchRatio float64 `json:"origin_fetch_ratio"`
	// StaleMisses are requests whose PoP held the content but httpcache
	// would not let it answer (stale): fetched again. NotStored are
	// responses httpcache did not let a PoP store.
	StaleMisses uint64 `json:"stale_misses"`
	NotStored   uint64 `json:"not_stored"`

	// PeerBytes are the body bytes PoPs fetched from each other (holders'
	// copies, shields' answers, hot pushes); Ingress is, per client
	// location, the PoP most of its requests entered at.
	PeerBytes uint64            `json:"peer_bytes"`
	Ingress   map[string]string `json:"ingress,omitempty"`

	RemoteFetches uint64  `json:"remote_fetches"`
	Redirects     uint64  `json:"redirects"`
	ShieldFetches uint64  `json:"shield_fetches"`
	Pushes        uint64  `json:"pushes"`
	Evictions     uint64  `json:"evictions"`
	DeadTries     uint64  `json:"dead_tries"`
	LookupFails   uint64  `json:"lookup_fails"`
	Probes        uint64  `json:"probes"`
	WarmupS       float64 `json:"warmup_s"`
	SimulatedS    float64 `json:"simulated_s"`
	Events        uint64  `json:"events"`
	WallS         float64 `json:"wall_s"`
	// Names are the PoPs' names, by index (their ring IDs are
	// chord.Hash of them): what a replay of OnRequest's outcomes starts the same PoPs
	// by.
	Names []string `json:"-"`
}

type evKind uint8

const (
	evMBPP evKind = iota
	evChord
	evGossip
	evTimer
	evProbe
	evSample
	evRoll
	evKill
	evCheck
	evRefresh
)

// event is one thing to happen at a virtual time. Events live in a slab
// (sim.slab) and are recycled through a free list: a run of 1,000 PoPs
// handles tens of millions of them, and allocating each one (with its
// chord.Msg inline) was a fifth of the simulator's garbage.
type event struct {
	at    time.Time
	kind  evKind
	proto uint8
	to    int32
	from  int32
	gen   uint32
	b     []byte
	ch    chord.Msg
	g     []gWire
}

// qItem is the heap's view of an event: its time (ns since epoch), its
// sequence number (ties keep insertion order, so runs are deterministic)
// and its slot in the slab. Small and pointer-free, so sifting is cheap
// and the GC never scans the heap.
type qItem struct {
	at   int64
	seq  uint64
	slot int32
}

func (a qItem) before(b qItem) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

// evq is a binary min-heap of qItems, hand-written rather than through
// container/heap, whose interface calls and boxing dominated the profile.
type evq []qItem

func (q *evq) push(x qItem) {
	h := append(*q, x)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	*q = h
}

func (q *evq) pop() qItem {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && h[r].before(h[l]) {
			c = r
		}
		if !h[c].before(h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	*q = h
	return top
}

const (
	pMBPP = iota
	pChord
	pGossip
)

type popState struct {
	idx   int
	loc   int
	name  string
	addr  string
	mid   mbpp.ID
	cid   chord.ID
	mb    *mbpp.Node
	ch    *chord.Node
	gs    *gossipNode
	rtt   map[int]time.Duration // gossip mode: own link samples
	store *replica.Table[string]
	// copies are the held URLs' freshness (freshness.go): what httpcache
	// decides by.
	copies map[string]copyState
	dir    *replica.Home
	dead   bool
	// sawDead: this PoP's view has declared the killed PoP dead, and it
	// has done what a live PoP does then (watchDeaths).
	sawDead bool
	load    int
	due     [3]time.Time
	gen     [3]uint32
}

type sim struct {
	cfg    Config
	m      *Matrix
	w      *Workload
	now    time.Time
	q      evq
	seq    uint64
	slab   []event
	free   []int32
	pops   []*popState
	byMID  map[mbpp.ID]int
	byCID  map[chord.ID]int
	byAddr map[string]int
	order  [][]int32 // per location: PoPs by RTT, nearest first
	origin int
	org    *origin
	rng    *rand.Rand
	victim int
	killed time.Time
	found  time.Time

	// gen[v*N+x] is the virtual time (s since epoch) at which PoP x
	// produced the entry PoP v's view holds of it: x refreshes its entry
	// when it takes the ping, and a ping from a to b carries a's view.
	gen []float64

	counting                bool
	mbppMsgs, mbppBytes     uint64
	gossipMsgs, gossipBytes uint64
	hops                    []int
	staleSum                float64
	staleN                  int
	res                     Result

	// sizes are the workload's body sizes by URL (for PeerBytes); entered
	// counts requests by client location and ingress PoP (for Ingress).
	sizes   map[string]int64
	entered map[[2]int]int
	// conns are when each PoP last used its connection to another PoP
	// (or the origin, -1); originEst is each PoP's smoothed time to the
	// origin (0 before its first fetch).
	conns     map[[2]int]time.Time
	originEst []time.Duration
	via       string // where the request being served was answered from (Outcome.Via)
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Run simulates the workload over the matrix.
func Run(cfg Config, m *Matrix, w *Workload) (Result, error) {
	wall := time.Now()
	if len(cfg.PoPLocs) > 0 {
		cfg.PoPs = len(cfg.PoPLocs)
	}
	if cfg.PoPs < 1 || cfg.PoPs > m.Len() {
		return Result{}, fmt.Errorf("cdnsim: %d PoPs for %d locations", cfg.PoPs, m.Len())
	}
	if cfg.Ring != "hash" && cfg.Ring != "geo" {
		return Result{}, fmt.Errorf("cdnsim: ring %q is neither hash nor geo", cfg.Ring)
	}
	if cfg.View != "mbpp" && cfg.View != "gossip" {
		return Result{}, fmt.Errorf("cdnsim: view %q is neither mbpp nor gossip", cfg.View)
	}
	if err := cfg.CDN.Validate(); err != nil {
		return Result{}, err
	}
	org, err := newOrigin(cfg)
	if err != nil {
		return Result{}, err
	}
	if cfg.SampleEvery <= 0 || cfg.FetchTimeout <= 0 || cfg.CapacityRPS <= 0 || cfg.Gossip.Period <= 0 || cfg.Gossip.Fanout < 1 {
		return Result{}, fmt.Errorf("cdnsim: sample period, fetch timeout, capacity and gossip period/fanout must be > 0")
	}
	s := &sim{cfg: cfg, m: m, w: w, now: epoch, byMID: map[mbpp.ID]int{}, byCID: map[chord.ID]int{}, byAddr: map[string]int{},
		rng: rand.New(rand.NewPCG(cfg.Seed, 0xcd4)), victim: -1, org: org,
		sizes: map[string]int64{}, entered: map[[2]int]int{}, conns: map[[2]int]time.Time{}}
	s.origin = max(m.Index(cfg.Origin), 0)
	locs, named := cfg.PoPLocs, len(cfg.PoPLocs) > 0
	if !named {
		locs = s.rng.Perm(m.Len())[:cfg.PoPs]
	}
	for i, loc := range locs {
		if loc < 0 || loc >= m.Len() {
			return Result{}, fmt.Errorf("cdnsim: PoP location %d not in the matrix", loc)
		}
		name := "pop-" + strconv.Itoa(i) + "-" + m.Names[loc]
		if named {
			name = m.Names[loc]
		}
		p := &popState{idx: i, loc: loc, name: name, addr: "p" + strconv.Itoa(i),
			dir: replica.NewHome(cfg.CDN), rtt: map[int]time.Duration{}, copies: map[string]copyState{}}
		p.cid = chord.Hash(name)
		p.mid = mbpp.ID(p.cid)
		if _, dup := s.byCID[p.cid]; dup || p.cid == 0 {
			return Result{}, fmt.Errorf("cdnsim: id collision for %s", name)
		}
		s.byMID[p.mid], s.byCID[p.cid], s.byAddr[p.addr] = i, i, i
		s.pops = append(s.pops, p)
	}
	if cfg.Ring == "geo" {
		s.byMID = map[mbpp.ID]int{}
		for pos, i := range s.tour() {
			s.pops[i].mid = mbpp.ID(pos + 1)
			s.byMID[s.pops[i].mid] = i
		}
	}
	s.originEst = make([]time.Duration, len(s.pops))
	s.order = make([][]int32, m.Len())
	for l := range s.order {
		o := make([]int32, cfg.PoPs)
		for i := range o {
			o[i] = int32(i)
		}
		slices.SortStableFunc(o, func(a, b int32) int {
			return cmp.Compare(m.RTT(l, s.pops[a].loc), m.RTT(l, s.pops[b].loc))
		})
		s.order[l] = o
	}
	if err := s.start(); err != nil {
		return Result{}, err
	}
	if err := s.warm(); err != nil {
		return Result{}, err
	}
	s.replay()
	s.finish()
	s.res.WallS = time.Since(wall).Seconds()
	return s.res, nil
}

// tour is a greedy nearest-neighbour tour of the PoPs from PoP 0.
func (s *sim) tour() []int {
	n := len(s.pops)
	used := make([]bool, n)
	out := []int{0}
	used[0] = true
	for len(out) < n {
		cur, best, bd := out[len(out)-1], -1, math.Inf(1)
		for j := range n {
			if !used[j] {
				if d := s.m.RTT(s.pops[cur].loc, s.pops[j].loc); d < bd {
					best, bd = j, d
				}
			}
		}
		used[best] = true
		out = append(out, best)
	}
	return out
}

func (s *sim) ms(a, b int) time.Duration {
	return time.Duration(s.m.RTT(s.pops[a].loc, s.pops[b].loc) * float64(time.Millisecond))
}

// push schedules e (copied into the slab).
func (s *sim) push(e event) {
	s.seq++
	var slot int32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
		s.slab[slot] = e
	} else {
		slot = int32(len(s.slab))
		s.slab = append(s.slab, e)
	}
	s.q.push(qItem{at: e.at.Sub(epoch).Nanoseconds(), seq: s.seq, slot: slot})
}

// start creates the PoPs: pop 0 founds both rings, the others join through
// it JoinGap apart.
func (s *sim) start() error {
	for i, p := range s.pops {
		at := s.now.Add(time.Duration(i) * s.cfg.JoinGap)
		var err error
		if p.store, err = replica.NewTable[string](s.cfg.CDN, at); err != nil {
			return err
		}
		cc := s.cfg.Chord
		cc.Self = chord.Peer{ID: p.cid, Addr: p.addr}
		var chOut []chord.Msg
		if i == 0 {
			p.ch, err = chord.Create(cc, at)
		} else {
			p.ch, chOut, err = chord.Join(cc, []chord.Peer{{ID: s.pops[0].cid, Addr: s.pops[0].addr}}, at)
		}
		if err != nil {
			return fmt.Errorf("cdnsim: chord %s: %w", p.name, err)
		}
		s.sendChord(i, chOut, at)
		s.sched(i, pChord)
		if s.cfg.View == "gossip" {
			p.gs = newGossip(s.cfg.Gossip, i, len(s.pops), 0, at, s.cfg.Seed)
			s.sched(i, pGossip)
			continue
		}
		mc := s.cfg.MBPP
		mc.Self, mc.Name, mc.Addr = p.mid, p.name, p.addr
		if i == 0 {
			p.mb, err = mbpp.NewFounder(mc, at)
		} else {
			var out []mbpp.Msg
			p.mb, out, err = mbpp.NewJoiner(mc, []string{s.pops[0].addr}, nil, at)
			s.sendMBPP(i, out, at)
		}
		if err != nil {
			return fmt.Errorf("cdnsim: mbpp %s: %w", p.name, err)
		}
		s.sched(i, pMBPP)
	}
	s.push(event{at: s.now.Add(s.cfg.SampleEvery), kind: evSample})
	return nil
}

// formed reports whether every PoP sees all PoPs alive and Chord's
// successors are the true ones.
func (s *sim) formed() bool {
	ids := make([]chord.ID, len(s.pops))
	for i, p := range s.pops {
		ids[i] = p.cid
	}
	slices.Sort(ids)
	for _, p := range s.pops {
		if p.mb != nil && (!p.mb.Joined() || p.mb.MemberCount() != len(s.pops)) {
			return false
		}
		if p.gs != nil {
			n := 0
			for _, e := range p.gs.view {
				if e != nil && e.alive && e.hb > 0 {
					n++
				}
			}
			if n != len(s.pops) {
				return false
			}
		}
		k, _ := slices.BinarySearch(ids, p.cid)
		if p.ch.Successor().ID != ids[(k+1)%len(ids)] {
			return false
		}
	}
	return true
}

// warm runs until the rings are formed, then long enough for fix-fingers
// to visit every finger and for two view rounds to spread RTTs.
func (s *sim) warm() error {
	limit := s.now.Add(6 * time.Hour)
	for !s.formed() {
		if s.now.After(limit) {
			return fmt.Errorf("cdnsim: rings of %d PoPs not formed after %v of virtual time", len(s.pops), limit.Sub(epoch))
		}
		s.runUntil(s.now.Add(time.Second))
	}
	extra := time.Duration(chord.Bits) * s.cfg.Chord.FixFingers
	if s.cfg.View == "mbpp" {
		extra = max(extra, 2*s.cfg.MBPP.Round(len(s.pops), 50*time.Millisecond))
	}
	s.runUntil(s.now.Add(extra))
	s.res.WarmupS = s.now.Sub(epoch).Seconds()
	return nil
}

func (s *sim) sched(i int, proto int) {
	p := s.pops[i]
	if p.dead {
		return
	}
	var t time.Time
	switch proto {
	case pMBPP:
		if p.mb != nil {
			t = p.mb.Next()
		}
	case pChord:
		t = p.ch.Next()
	case pGossip:
		t = p.gs.next()
	}
	if t.IsZero() || t.Equal(p.due[proto]) {
		return
	}
	if t.Before(s.now) {
		t = s.now
	}
	p.due[proto] = t
	p.gen[proto]++
	s.push(event{at: t, kind: evTimer, to: int32(i), proto: uint8(proto), gen: p.gen[proto]})
}

func (s *sim) sendMBPP(from int, ms []mbpp.Msg, at time.Time) {
	for i := range ms {
		m := &ms[i]
		to, ok := s.byMID[m.To]
		if m.To == 0 || !ok {
			if to, ok = s.byAddr[m.ToAddr]; !ok {
				continue
			}
		}
		b := m.AppendBinary(nil)
		if s.counting {
			s.mbppMsgs++
			s.mbppBytes += uint64(len(b))
		}
		s.push(event{at: at.Add(s.ms(from, to) / 2), kind: evMBPP, to: int32(to), from: int32(from), b: b})
	}
}

func (s *sim) sendChord(from int, ms []chord.Msg, at time.Time) {
	for _, m := range ms {
		to, ok := s.byCID[m.To.ID]
		if !ok {
			continue
		}
		s.push(event{at: at.Add(s.ms(from, to) / 2), kind: evChord, to: int32(to), from: int32(from), ch: m})
	}
}

// runUntil processes events up to t.
func (s *sim) runUntil(t time.Time) {
	limit := t.Sub(epoch).Nanoseconds()
	for len(s.q) > 0 && s.q[0].at <= limit {
		it := s.q.pop()
		e := s.slab[it.slot]
		s.slab[it.slot] = event{} // drop references for the GC
		s.free = append(s.free, it.slot)
		s.now = e.at
		s.res.Events++
		s.do(&e)
	}
	s.now = t
}

func (s *sim) do(e *event) {
	i := int(e.to)
	var p *popState
	if e.kind <= evProbe {
		p = s.pops[i]
		if p.dead {
			return
		}
	}
	switch e.kind {
	case evMBPP:
		m, err := mbpp.Decode(e.b)
		if err != nil || p.mb == nil {
			return
		}
		if m.Kind == mbpp.KindPing || m.Kind == mbpp.KindPong || m.Kind == mbpp.KindAck {
			p.mb.SampleRTT(s.pops[e.from].mid, s.ms(i, int(e.from)))
		}
		if m.Kind == mbpp.KindPing {
			s.carried(int(e.from), i)
		}
		s.sendMBPP(i, p.mb.Handle(s.now, m), s.now)
		s.sched(i, pMBPP)
	case evChord:
		if s.cfg.ChordRTT {
			s.sample(i, int(e.from))
		}
		s.sendChord(i, p.ch.Handle(s.now, e.ch), s.now)
		p.ch.TakeResults()
		s.sched(i, pChord)
	case evGossip:
		p.rtt[int(e.from)] = s.ms(i, int(e.from))
		s.gossipIn(p, e.g)
	case evTimer:
		if e.gen != p.gen[e.proto] {
			return
		}
		p.due[e.proto] = time.Time{}
		switch e.proto {
		case pMBPP:
			s.sendMBPP(i, p.mb.Tick(s.now), s.now)
		case pChord:
			s.sendChord(i, p.ch.Tick(s.now), s.now)
			p.ch.TakeResults()
		case pGossip:
			for _, m := range p.gs.tick(s.now) {
				to := m.from
				if s.counting {
					s.gossipMsgs++
					s.gossipBytes += uint64(m.wireSize())
				}
				s.push(event{at: s.now.Add(s.ms(i, to) / 2), kind: evGossip, to: int32(to), from: int32(i), g: m.entries})
			}
		}
		s.sched(i, int(e.proto))
	case evProbe:
		s.sample(i, int(e.from))
	case evSample:
		for _, p := range s.pops {
			perf := 1 - float64(p.load)/(s.cfg.CapacityRPS*s.cfg.SampleEvery.Seconds())
			p.load = 0
			if p.mb != nil {
				p.mb.SetServer(perf)
			}
			if p.gs != nil {
				p.gs.server = min(max(perf, 0), 1)
			}
		}
		s.push(event{at: s.now.Add(s.cfg.SampleEvery), kind: evSample})
	case evRoll:
		s.roll()
		s.push(event{at: s.now.Add(s.cfg.CDN.Window), kind: evRoll})
	case evRefresh:
		s.refresh()
		s.push(event{at: s.now.Add(s.cfg.CDN.RefreshEvery()), kind: evRefresh})
	case evKill:
		s.pops[s.victim].dead = true
		s.killed = s.now
		s.push(event{at: s.now.Add(time.Second), kind: evCheck})
	case evCheck:
		s.watchDeaths()
		if s.detected() {
			s.found = s.now
			return
		}
		s.push(event{at: s.now.Add(time.Second), kind: evCheck})
	}
}

// carried records that a ping from a reached b: b's view is now as fresh as
// a's, and b refreshes its own entry.
func (s *sim) carried(a, b int) {
	n := len(s.pops)
	if s.gen == nil {
		s.gen = make([]float64, n*n)
	}
	ga, gb := s.gen[a*n:(a+1)*n], s.gen[b*n:(b+1)*n]
	for x := range gb {
		gb[x] = max(gb[x], ga[x])
	}
	gb[b] = s.now.Sub(epoch).Seconds()
}

// age is how old PoP i's information about PoP j is.
func (s *sim) age(i, j int) time.Duration {
	if s.pops[i].gs != nil {
		if e := s.pops[i].gs.view[j]; e != nil {
			return s.now.Sub(e.gen)
		}
		return 0
	}
	if s.gen == nil {
		return 0
	}
	return s.now.Sub(epoch) - time.Duration(s.gen[i*len(s.pops)+j]*1e9)
}

func (s *sim) gossipIn(p *popState, es []gWire) {
	p.gs.handle(s.now, gossipMsg{entries: es})
	s.sched(p.idx, pGossip)
}

// sample feeds the link RTT to peer j, as TCP_INFO on the connection the
// message came over would (seed 003 §2 (1)).
func (s *sim) sample(i, j int) {
	p := s.pops[i]
	if p.mb != nil {
		p.mb.SampleRTT(s.pops[j].mid, s.ms(i, j))
	} else {
		p.rtt[j] = s.ms(i, j)
	}
}

func (s *sim) detected() bool {
	v := s.pops[s.victim]
	for _, p := range s.pops {
		if p.dead {
			continue
		}
		if p.mb != nil && p.mb.Alive(v.mid) || p.gs != nil && p.gs.alive(v.idx) {
			return false
		}
	}
	return true
}

// aliveIn reports whether PoP j is alive in PoP i's view.
func (s *sim) aliveIn(i, j int) bool {
	p := s.pops[i]
	if i == j {
		return true
	}
	if p.mb != nil {
		return p.mb.Alive(s.pops[j].mid)
	}
	return p.gs.alive(j)
}

// candidate is PoP j as PoP i's view sees it, with the entry's age; it
// also starts a probe when i has no RTT to j (seed 003 §2 (1): explicit
// probes where there is no connection to sample). Its ID is pid(j).
func (s *sim) candidate(i, j int) (replica.Candidate, time.Duration) {
	p := s.pops[i]
	if p.mb != nil {
		v, ok := p.mb.Peer(s.pops[j].mid, s.now)
		if !ok {
			return replica.Candidate{ID: pid(j)}, 0
		}
		if _, has := p.mb.RTTTo(s.pops[j].mid); !has && i != j {
			s.probe(i, j)
		}
		return replica.Candidate{ID: pid(j), Alive: v.Alive, Score: v.Score, RTT: v.RTT}, s.age(i, j)
	}
	e := p.gs.view[j]
	if e == nil {
		return replica.Candidate{ID: pid(j)}, 0
	}
	rtt, has := p.rtt[j]
	if !has && i != j {
		s.probe(i, j)
	}
	return replica.Candidate{ID: pid(j), Alive: e.alive, RTT: rtt,
		Score: mbpp.Score(&s.cfg.MBPP, i == j, e.alive, rtt, has, e.server)}, s.age(i, j)
}

// pid is PoP j's ID in internal/cdn/replica, whose plans and registrations
// keep 0 for "none" (the origin, an unknown home).
func pid(j int) uint64 { return uint64(j) + 1 }

// idx is pid's inverse.
func idx(id uint64) int { return int(id) - 1 }

func (s *sim) probe(i, j int) {
	s.res.Probes++
	s.push(event{at: s.now.Add(s.ms(i, j)), kind: evProbe, to: int32(i), from: int32(j)})
}

// lookup finds key's home with the real Chord code: the iterative lookup's
// messages are delivered at once (a lookup is a few RTTs, short against the
// workload's gaps); a lookup that needs a timeout (a dead hop) fails.
func (s *sim) lookup(i int, key chord.ID) (int, bool) {
	home, ok, _ := s.lookupCost(i, key)
	return home, ok
}

// lookupCost is lookup with the time it takes in ms: the critical path of
// its messages at the matrix's one-way delays (the last answer to reach
// PoP i), what a live PoP's miss waits for it.
func (s *sim) lookupCost(i int, key chord.ID) (int, bool, float64) {
	id, out := s.pops[i].ch.Lookup(s.now, key)
	type pend struct {
		from int
		m    chord.Msg
		at   float64 // ms after the lookup started that it was sent
	}
	var q []pend
	for _, m := range out {
		q = append(q, pend{i, m, 0})
	}
	cost := 0.0
	touched := []int{i} // in order: the scheduling below must not follow map order
	for len(q) > 0 {
		x := q[0]
		q = q[1:]
		to, ok := s.byCID[x.m.To.ID]
		if !ok || s.pops[to].dead {
			continue
		}
		if !slices.Contains(touched, to) {
			touched = append(touched, to)
		}
		if s.cfg.ChordRTT {
			s.sample(to, x.from)
		}
		arrived := x.at + float64(s.ms(x.from, to))/2e6
		if to == i {
			cost = max(cost, arrived)
		}
		for _, m := range s.pops[to].ch.Handle(s.now, x.m) {
			q = append(q, pend{to, m, arrived})
		}
	}
	home, found := -1, false
	for _, r := range s.pops[i].ch.TakeResults() {
		if r.Lookup == id && r.Err == nil {
			if h, ok := s.byCID[r.Owner.ID]; ok {
				home, found = h, true
			}
			if s.counting {
				s.hops = append(s.hops, r.Hops)
			}
		}
	}
	for _, j := range touched {
		if j != i {
			s.pops[j].ch.TakeResults()
		}
		s.sched(j, pChord)
	}
	return home, found, cost
}

// send delivers PoP i's registration messages to the homes' directories
// (a registration is one message, short against the TTL: delivered now),
// which take them by replica.Home's rules, the live PoPs' own. A key its
// home no longer owns comes back as the live notmine does: the holder
// forgets where it was registered and looks the home up again (once; a
// second refusal waits for the next refresh, as a live PoP's retry waits
// for Chord's repair).
func (s *sim) send(i int, regs []replica.Reg[string]) { s.deliver(i, regs, true) }

func (s *sim) deliver(i int, regs []replica.Reg[string], retry bool) {
	var notMine []string
	for _, r := range regs {
		h := idx(r.Home)
		if h < 0 || h >= len(s.pops) || s.pops[h].dead {
			continue
		}
		key := chord.Hash(r.Key)
		if !s.pops[h].dir.Apply(s.now, r.Op, key, strconv.Itoa(i), h == i, s.pops[h].ch.Owns(key)) {
			notMine = append(notMine, r.Key)
		}
	}
	p := s.pops[i]
	for _, u := range notMine {
		p.store.Forget(u)
		if !retry {
			continue
		}
		if h, ok := s.lookup(i, chord.Hash(u)); ok {
			s.deliver(i, p.store.Hold(s.now, u, pid(h)), false)
		}
	}
}

// watchDeaths does, for each live PoP whose view has just declared the
// killed PoP dead, what a live PoP's content manager does then: its
// directory forgets the dead holder (replica.Home.Lost), and the copies it
// had registered at the dead PoP are registered at their new homes at once
// (replica.Table.At, Forget, a lookup and Hold).
func (s *sim) watchDeaths() {
	v := s.victim
	for i, p := range s.pops {
		if p.dead || p.sawDead || s.aliveIn(i, v) {
			continue
		}
		p.sawDead = true
		name := strconv.Itoa(v)
		p.dir.Lost(func(h string) bool { return h == name })
		for _, u := range p.store.At(pid(v)) {
			p.store.Forget(u)
			if h, ok := s.lookup(i, chord.Hash(u)); ok {
				s.send(i, p.store.Hold(s.now, u, pid(h)))
			}
		}
	}
}

// keep stores at PoP i (home -1: unknown) the response it received for
// url with the given age (0: from the origin) and registers it, when
// httpcache lets it store it; when not, a copy it held goes.
func (s *sim) keep(i int, url string, home int, counted bool, age int64) {
	p := s.pops[i]
	c, ok := s.org.answer(url, age, s.now)
	if !ok {
		s.res.NotStored++
		if _, held := p.copies[url]; held {
			delete(p.copies, url)
			regs, _ := p.store.Remove(url)
			s.send(i, regs)
		}
		return
	}
	p.copies[url] = c
	p.store.Add(s.now, url, counted)
	s.send(i, p.store.Hold(s.now, url, pid(home)))
}

// replay feeds the workload's requests in time order between the events.
func (s *sim) replay() {
	start := s.now
	s.counting = true
	c0 := s.cycles()
	s.push(event{at: start.Add(s.cfg.CDN.Window), kind: evRoll})
	s.push(event{at: start.Add(s.cfg.CDN.RefreshEvery()), kind: evRefresh})
	for _, p := range s.pops {
		p.store.Roll(start.Add(s.cfg.CDN.Window)) // align every window to the workload's start
	}
	span := time.Duration(0)
	if n := len(s.w.Requests); n > 0 {
		span = s.w.Requests[n-1].At
	}
	if s.cfg.KillAt > 0 && len(s.pops) > 2 {
		for s.victim < 0 || s.victim == 0 {
			s.victim = s.rng.IntN(len(s.pops))
		}
		s.push(event{at: start.Add(time.Duration(s.cfg.KillAt * float64(span))), kind: evKill})
	}
	var sumC, sumO, sumR float64
	var hits, origin uint64
	for i, r := range s.w.Requests {
		s.runUntil(start.Add(r.At))
		s.via = ""
		c, o, rnd, hit, org := s.serve(r)
		if s.cfg.OnRequest != nil {
			s.cfg.OnRequest(i, Outcome{ClientMs: c, Hit: hit, Origin: org, Via: s.via})
		}
		sumC, sumO, sumR = sumC+c, sumO+o, sumR+rnd
		if hit {
			hits++
		}
		if org {
			origin++
		}
	}
	// Let a failure be detected after the last request.
	if s.victim >= 0 {
		s.runUntil(s.now.Add(time.Hour))
	}
	n := float64(len(s.w.Requests))
	s.res.ClientRTTMean, s.res.OracleRTTMean, s.res.RandomRTTMean = sumC/n, sumO/n, sumR/n
	s.res.HitRatio, s.res.OriginFetchRatio = float64(hits)/n, float64(origin)/n
	s.res.SimulatedS = s.now.Sub(start).Seconds()
	rounds := float64(s.cycles() - c0)
	if s.cfg.View == "gossip" {
		rounds = s.now.Sub(start).Seconds() / s.cfg.Gossip.Period.Seconds()
		s.res.MBPPRoundS = s.cfg.Gossip.Period.Seconds()
		s.res.MBPPBytesRound, s.res.MBPPMsgsRound = float64(s.gossipBytes)/rounds, float64(s.gossipMsgs)/rounds
		s.res.ViewBytesPerS = float64(s.gossipBytes) / s.now.Sub(start).Seconds()
	} else if rounds > 0 {
		s.res.MBPPRoundS = s.now.Sub(start).Seconds() / rounds
		s.res.MBPPBytesRound, s.res.MBPPMsgsRound = float64(s.mbppBytes)/rounds, float64(s.mbppMsgs)/rounds
		s.res.ViewBytesPerS = float64(s.mbppBytes) / s.now.Sub(start).Seconds()
	}
}

// cycles is how many pings PoP 0 (never the victim) has held: one a round.
func (s *sim) cycles() uint64 {
	if s.pops[0].mb == nil {
		return 0
	}
	return s.pops[0].mb.Stats().Cycles
}

func (s *sim) rttLoc(loc, i int) float64 { return s.m.RTT(loc, s.pops[i].loc) }

// serve routes one request (client to PoP, then content across
// PoPs) and returns the client's RTT in ms, the oracle's and a random
// PoP's, whether the client's PoP held the content and whether the origin
// was asked.
func (s *sim) serve(r Request) (client, oracle, random float64, hit, origin bool) {
	oracle, random = s.oracle(r), s.random(r.Client)
	ing, penalty := s.ingress(r.Client)
	s.sizes[r.URL] = r.Size
	s.entered[[2]int{r.Client, ing}]++
	p := s.pops[ing]
	p.load++
	base := penalty + s.rttLoc(r.Client, ing)
	if p.store.Request(r.URL) {
		if ok, revalidate, _ := s.usable(ing, r.URL, &s.org.get); ok {
			if revalidate { // stale-while-revalidate: refreshed behind the answer
				s.keep(ing, r.URL, idx(p.store.Home(r.URL)), false, 0)
			}
			return base, oracle, random, true, false
		}
		s.res.StaleMisses++
	}
	cost, origin := s.miss(ing, r, false)
	return base + cost, oracle, random, false, origin
}

// redirect is --redirect's answer to a miss at ing planned as m: when a
// live holder scores above ing (replica.Better), the client goes there —
// its RTT to that PoP, plus that PoP's own miss if it no longer holds the
// copy — and ing keeps a copy fetched for next time (the live chain's
// warm fetch, off the client's path). ok is false when the client stays.
func (s *sim) redirect(ing, client, home int, r Request, m replica.Miss) (cost float64, origin, ok bool) {
	self, _ := s.candidate(ing, ing)
	h, better := replica.Better(self, m.Holders)
	j := idx(h.ID)
	if !better || j < 0 || s.pops[j].dead {
		return 0, false, false
	}
	s.res.Redirects++
	s.setVia("redirect", j)
	cost = s.rttLoc(client, j)
	s.pops[j].load++
	if s.pops[j].store.Request(r.URL) {
		if usable, _, age := s.usable(j, r.URL, &s.org.asked); usable {
			s.res.PeerBytes += uint64(r.Size)
			s.keep(ing, r.URL, home, true, age) // ing's copy comes from j's
			return cost, false, true
		}
	}
	c, origin := s.miss(j, r, true)
	s.keep(ing, r.URL, home, true, 0)
	return cost + c, origin, true
}

// oracle is the RTT to the nearest live PoP holding r's content, else to
// the origin.
func (s *sim) oracle(r Request) float64 {
	best := s.m.RTT(r.Client, s.origin)
	for _, j := range s.order[r.Client] {
		if ok, _, _ := s.usable(int(j), r.URL, &s.org.asked); ok && !s.pops[j].dead {
			return min(best, s.rttLoc(r.Client, int(j)))
		}
	}
	return best
}

// random is the RTT to a live PoP drawn at random.
func (s *sim) random(c int) float64 {
	for {
		j := s.rng.IntN(len(s.pops))
		if !s.pops[j].dead {
			return s.rttLoc(c, j)
		}
	}
}

// ingress is the PoP a client reaches: DNS is answered by the nearest live
// PoP (anycast), with the nearest PoP alive in its view; a PoP dead but not
// yet known dead costs a timeout, returned as the penalty in ms.
func (s *sim) ingress(c int) (int, float64) {
	ord := s.order[c]
	dnsPoP := -1
	for _, j := range ord {
		if !s.pops[j].dead {
			dnsPoP = int(j)
			break
		}
	}
	penalty := 0.0
	for _, j := range ord {
		if !s.aliveIn(dnsPoP, int(j)) {
			continue
		}
		if s.pops[j].dead {
			penalty += s.timeoutMs()
			s.res.DeadTries++
			continue
		}
		return int(j), penalty
	}
	return dnsPoP, penalty
}

func (s *sim) timeoutMs() float64 { return float64(s.cfg.FetchTimeout) / 1e6 }

func dur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// miss fetches r's content for PoP ing along replica's plan (the same the
// live PoPs follow): holders best score first, the key's home as shield,
// the origin; with Config.Redirect a better holder first takes the client
// (never for a request already redirected). It returns the cost in ms and
// whether the origin was asked.
func (s *sim) miss(ing int, r Request, redirected bool) (float64, bool) {
	key := chord.Hash(r.URL)
	home, ok, cost := s.route(ing, key)
	if !ok {
		s.res.LookupFails++
		s.keep(ing, r.URL, -1, true, 0)
		return cost + s.fromOrigin(ing), true
	}
	m := replica.Miss{Self: pid(ing), SelfOrigin: s.originEst[ing], SelfHome: s.ms(ing, home), HomeOrigin: s.originEst[home]}
	if !s.cfg.LearnOrigin {
		m.SelfOrigin, m.HomeOrigin = dur(s.m.RTT(s.pops[ing].loc, s.origin)), dur(s.m.RTT(s.pops[home].loc, s.origin))
	}
	m.Home, _ = s.candidate(ing, home)
	ages := map[uint64]time.Duration{}
	for _, h := range s.pops[home].dir.List(s.now, key, strconv.Itoa(home), s.pops[home].store.Has(r.URL)) {
		j, _ := strconv.Atoi(h)
		if j == ing || j < 0 || j >= len(s.pops) {
			continue
		}
		cand, age := s.candidate(ing, j)
		m.Holders = append(m.Holders, cand)
		ages[cand.ID] = age
	}
	if s.cfg.Redirect && !redirected {
		if c, origin, ok := s.redirect(ing, r.Client, home, r, m); ok {
			return cost + c, origin
		}
	}
	for _, st := range s.cfg.CDN.Plan(m) {
		j := idx(st.PoP)
		switch st.Source {
		case replica.Remote:
			s.staleSum += ages[st.PoP].Seconds()
			s.staleN++
			if s.pops[j].dead {
				cost += s.timeoutMs()
				s.res.DeadTries++
				continue
			}
			if !s.pops[j].store.Request(r.URL) {
				continue // evicted since it registered
			}
			ok, _, age := s.usable(j, r.URL, &s.org.asked)
			if !ok {
				continue // stale there: a holder answers only-if-cached with 504
			}
			s.pops[j].load++
			s.res.RemoteFetches++
			s.setVia("remote", j)
			s.res.PeerBytes += uint64(r.Size)
			s.keep(ing, r.URL, home, true, age)
			return cost + s.connect(ing, j) + float64(s.ms(ing, j))/1e6, false
		case replica.Shield:
			if s.pops[j].dead {
				cost += s.timeoutMs()
				s.res.DeadTries++
				continue
			}
			c := s.connect(ing, j) + float64(s.ms(ing, j))/1e6
			s.setVia("shield", j)
			sc, origin, age := s.shield(j, r)
			s.res.PeerBytes += uint64(r.Size)
			s.keep(ing, r.URL, home, true, age)
			return cost + c + sc, origin
		case replica.Origin:
			s.setVia("origin", -1)
			s.keep(ing, r.URL, home, true, 0)
			return cost + s.fromOrigin(ing), true
		}
	}
	return cost, false // unreachable: a plan ends at the origin
}

// shield serves r at the key's home h for another PoP's miss: from its
// copy when httpcache lets it answer, else from the origin (the plan of a
// shield request), keeping it. It returns the cost in ms, whether the
// origin was asked and the age of the answer.
func (s *sim) shield(h int, r Request) (float64, bool, int64) {
	p := s.pops[h]
	p.load++
	s.res.ShieldFetches++
	if p.store.Request(r.URL) {
		if ok, _, age := s.usable(h, r.URL, &s.org.get); ok {
			return 0, false, age
		}
	}
	s.keep(h, r.URL, h, true, 0)
	return s.fromOrigin(h), true, 0
}

// route is what a live PoP's miss does before it fetches: the Chord
// lookup of the key's home, then (when the home is another PoP) the
// directory query to it, one round trip. It returns the home and the
// time spent in ms.
func (s *sim) route(ing int, key chord.ID) (int, bool, float64) {
	home, ok, cost := s.lookupCost(ing, key)
	if ok && home != ing {
		cost += float64(s.ms(ing, home)) / 1e6
	}
	if !s.cfg.RouteCost {
		cost = 0
	}
	return home, ok, cost
}

// connect is what PoP a's next request to PoP b (b < 0: the origin)
// costs before it is sent, in ms: nothing over a connection used within
// ConnIdle, else a TCP handshake, one round trip, as the live PoPs'
// HTTP transports keep connections.
func (s *sim) connect(a, b int) float64 {
	k := [2]int{a, b}
	last, ok := s.conns[k]
	s.conns[k] = s.now
	if !s.cfg.RouteCost || ok && s.now.Sub(last) <= s.cfg.ConnIdle {
		return 0
	}
	if b < 0 {
		return s.m.RTT(s.pops[a].loc, s.origin)
	}
	return float64(s.ms(a, b)) / 1e6
}

// fromOrigin is PoP i's fetch from the origin in ms (connection and
// request), which it folds into its estimate of the origin's distance as
// a live PoP does (smoothed, A = 1/8, from the first fetch on).
func (s *sim) fromOrigin(i int) float64 {
	c := s.connect(i, -1) + s.m.RTT(s.pops[i].loc, s.origin)
	d, old := dur(c), s.originEst[i]
	if old != 0 {
		d = old + (d-old)/8
	}
	s.originEst[i] = d
	return c
}

// roll ends every PoP's window: evictions leave the directory and hot
// content is pushed to every live PoP that lacks it.
func (s *sim) roll() {
	for i, p := range s.pops {
		if p.dead {
			continue
		}
		evicted, hot, regs := p.store.Roll(s.now)
		s.res.Evictions += uint64(len(evicted))
		s.send(i, regs)
		for _, u := range evicted {
			delete(p.copies, u)
		}
		for _, u := range hot {
			ok, _, age := s.usable(i, u, &s.org.asked)
			if !ok {
				continue // stale here: nothing to push
			}
			home := idx(p.store.Home(u))
			if home < 0 || s.pops[home].dead {
				var ok bool
				if home, ok = s.lookup(i, chord.Hash(u)); !ok {
					continue
				}
			}
			for j, q := range s.pops {
				if j == i || q.dead || !s.aliveIn(i, j) || q.store.Has(u) {
					continue
				}
				s.res.Pushes++
				s.res.PeerBytes += uint64(s.sizes[u])
				s.keep(j, u, home, false, age)
			}
		}
	}
}

// refresh registers again what each PoP holds whose registration is due
// (replica.Table.RegDue), at the home it was registered at while that home
// is alive in the PoP's view, else at the owner a lookup finds: the live
// PoP's rule (a home that no longer owns the key refuses it, and send
// looks again).
func (s *sim) refresh() {
	for i, p := range s.pops {
		if p.dead {
			continue
		}
		for _, u := range p.store.RegDue(s.now) {
			key := chord.Hash(u)
			h := idx(p.store.Home(u))
			if h < 0 || !s.aliveIn(i, h) {
				var ok bool
				if h, ok = s.lookup(i, key); !ok {
					continue
				}
			}
			s.send(i, p.store.Hold(s.now, u, pid(h)))
		}
	}
}

func (s *sim) finish() {
	s.res.View, s.res.Ring = s.cfg.View, s.cfg.Ring
	s.res.PoPs = len(s.pops)
	for _, p := range s.pops {
		s.res.Names = append(s.res.Names, p.name)
	}
	s.res.Clients = s.w.Clients
	s.res.Requests = len(s.w.Requests)
	s.res.Ingress = s.ingressByLoc()
	if s.staleN > 0 {
		s.res.ViewStalenessS = s.staleSum / float64(s.staleN)
	}
	if len(s.hops) > 0 {
		sum := 0
		for _, h := range s.hops {
			sum += h
		}
		slices.Sort(s.hops)
		s.res.ChordHopsMean = float64(sum) / float64(len(s.hops))
		s.res.ChordHopsP99 = s.hops[min(len(s.hops)-1, int(math.Ceil(0.99*float64(len(s.hops))))-1)]
	}
	if !s.found.IsZero() {
		s.res.FailureDetectS = s.found.Sub(s.killed).Seconds()
	} else if s.victim >= 0 {
		s.res.FailureDetectS = -1 // not detected
	}
}

// ingressByLoc names, for each client location, the PoP most of its
// requests entered at (ties: the lower PoP index).
func (s *sim) ingressByLoc() map[string]string {
	best := map[int][2]int{} // location → PoP, count
	for k, n := range s.entered {
		b, seen := best[k[0]]
		if !seen || n > b[1] || n == b[1] && k[1] < b[0] {
			best[k[0]] = [2]int{k[1], n}
		}
	}
	out := make(map[string]string, len(best))
	for loc, b := range best {
		out[s.m.Names[loc]] = s.pops[b[0]].name
	}
	return out
}

// setVia records the first source a request was served from (Outcome.Via).
func (s *sim) setVia(how string, j int) {
	if s.via != "" {
		return
	}
	s.via = how
	if j >= 0 {
		s.via += " " + s.pops[j].name
	}
}
