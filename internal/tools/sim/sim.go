// Package sim is shoal's trace-driven, discrete-event simulator of a
// web-server cluster (SPEC §6): it replays an access log through a front-end
// and N nodes, each with a CPU, a disk and a byte-budgeted memory cache, and
// reports throughput, cache miss ratios, utilisations, handoffs and internal
// traffic per policy and cluster size — the experiments of seed 000 §3.3
// (Figs. 4–5) and of LARD (Pai et al. 1998).
//
// The simulator holds no distribution or replacement logic of its own: node
// choice is internal/cluster/policy (the very code the live front runs) and each
// node's memory is an internal/base/cache cache. What sim adds is time: a typed
// event heap ordered by (virtual time, sequence number), so a run is a pure
// function of its inputs and seed, and FIFO servers for every CPU and disk.
//
// A request's life (costs in Costs):
//
//  1. it enters the front's CPU queue (cost by data path: l4, l7 = T1, tag = T2);
//  2. the policy picks a node (Request.Now = virtual time; Cluster.Start);
//     for tbccrd and weblins the connection was first placed on a node by a
//     layer-4 wrr (seed 000's SYN rule, seed 001's first member), passed as
//     Request.Holder, and a decision for another node is a handoff: the holder
//     pays ConnSetup+HandoffOut, the new node HandoffIn;
//  3. the serving node pays ConnSetup (HandoffIn after any handoff, and
//     behind an l7 front), then the object comes from its cache, from a
//     peer's memory (Decision.Fetch; the peer reads its disk first if it
//     misses) or from its disk, and the node pays the transmit and teardown;
//  4. after Costs.Delivery more (default 0), the client has the response:
//     Cluster.Finish, Policy.Done, ConnCloser.CloseConn.
//
// Every trace request is its own connection by default (no keep-alive: the
// 1995 traces are HTTP/1.0), with Request.Conn = its sequence number. With
// Config.ConnRequests = K, K consecutive requests share one keep-alive
// connection: the first is placed as above, each later one starts on the
// node that served the one before (Request.Holder), and a decision for
// another node moves the connection there (Result.Moves; seed 000 §2.2.2:
// "HTTP/1.1 … the system needs several TCP handoffs"). An object is added
// to a node's cache when the node decides to read it from disk (the buffer is
// reserved at once), so a request for it arriving during the read counts as a
// hit. Objects above Costs.NoCacheAbove are never cached and always read from
// disk (Result.BigToDisk counts them). A miss is a request whose object was
// read from a disk; a peer-memory fetch is a cluster memory hit.
//
// Throughput mode (the papers' setting) keeps LARD's admission bound
// S = (n−1)·T_high + T_low − 1 requests in the system (or Config.PerNode ×
// nodes), entering as fast as others complete; latency mode releases each
// request at its trace timestamp × Config.TimeScale.
package sim

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"time"

	"shoal/internal/base/cache"
	"shoal/internal/base/store"
	"shoal/internal/cluster/peer"
	"shoal/internal/cluster/placement"
	"shoal/internal/cluster/policy"
)

// Access is one request to replay: the URL and its object size in bytes,
// and, for latency mode, its time since the start of the trace.
type Access struct {
	URL  string
	Size int64
	At   time.Duration
}

// Source yields Accesses until io.EOF.
type Source interface {
	Next() (Access, error)
}

// Config is one simulation run. Zero fields take the documented defaults.
type Config struct {
	// Policy is the distribution policy's name (policy.Names, or one added
	// to Registry).
	Policy string
	// Registry holds the policies Policy may name. Default nil: the built-in
	// ones. What the simulator charges a policy — its front, a layer-4
	// placement and node-to-node handoffs — comes from the policy's
	// declared policy.Traits, so a policy added here needs no code in sim.
	Registry *policy.Registry
	// PolicyConfig carries the policy's knobs. Seed, CacheBytes and
	// NoCacheAbove are set from this Config (and Costs) unless already set,
	// so the front's mirrors of the node caches match the nodes. Unless
	// PopularN or PopularBytes is set, weblins' replicated popular set is
	// bounded to an eighth of a node's cache (PopularBytes = CacheBytes/8):
	// seed 001 keeps it in every node's memory, so it must fit there, and a
	// fixed 100 files can fill a small cache (on NASA with 2 MiB per node
	// this bound cuts weblins' miss ratio from 24 % to 18 % at 8 nodes).
	PolicyConfig policy.Config
	// Nodes is the cluster size (≥ 1).
	Nodes int
	// NodeNames names the nodes as the live cluster does (policy.Node.Name:
	// the node's URL), so a policy that places by name — chbl's hash ring —
	// builds the same ring as the front it predicts. Default nil: "n0",
	// "n1", …; otherwise exactly Nodes distinct names.
	NodeNames []string
	// CacheBytes is each node's memory cache. Default: what a live node
	// plans from MemoryBytes when that is set, else 32 MiB.
	CacheBytes int64
	// MemoryBytes is each node's memory (its cgroup's limit): a live node
	// keeps its own overhead (store.ProcessOverhead) out of it and caches
	// in the rest (store.PlanMemory), so a node of 36 MiB caches 26 MiB.
	// Default 0: CacheBytes is the cache.
	MemoryBytes int64
	// Cache is the nodes' replacement policy: "lru" (default, seed 000
	// §3.3.1), "gdsf" or "cgdsf" (seed 001); GDSFCost is its cost and
	// DigestPeriod how cgdsf's CachedElsewhere learns the other nodes' caches.
	// tbccrd's and weblins' mirrors of the node caches evict in the same
	// order (policy.NodeCacheMirrors) unless PolicyConfig.NewReplacer is set.
	Cache string
	// DigestPeriod is how a cgdsf node learns what the other nodes cache:
	// as live nodes do (internal/cluster/peer, Summary Cache), from a Bloom digest
	// of each other node's cache (peer.DigestOf), every node's rebuilt
	// each DigestPeriod of virtual time, so an object another node caches
	// counts as a duplicate only from the next rebuild on, and one it
	// evicted still counts until then. Default 0 = peer.DefaultDigestPeriod,
	// the nodes' default; negative = the other caches' exact current state
	// (an ideal no live cluster has).
	DigestPeriod time.Duration
	// GDSFCost is the cost C that gdsf and cgdsf nodes (and the front's
	// mirrors of them) weigh objects by. GDSFNode (default "") is what live
	// nodes use (cache.DiskCost, and C/10 for an object cached
	// elsewhere), so the simulator predicts them; GDSFDisk is the
	// model's disk read time (Costs.Disk) and, for an object cached
	// elsewhere, a peer fetch (both sides' PeerPer512), the simulator's
	// former cost, under which cgdsf misses more than live nodes
	// do (docs/cooperation.md).
	GDSFCost string
	// Costs are the time and byte costs. Zero value = DefaultCosts().
	Costs *Costs
	// Path is the front's data path. "" = DefaultPath of the policy's traits.
	Path Path
	// PerNode, when > 0, keeps PerNode × Nodes requests in the system in
	// throughput mode. Default 0: LARD's admission bound S = (n−1)·T_high +
	// T_low − 1 for the whole cluster (PolicyConfig.AdmissionBound; 999 at 16
	// nodes with the default thresholds 65 and 25), the load Pai et al. 1998
	// drive their cluster at: with fewer requests in the system no node
	// reaches T_high and LARD's reassignment, and LARD/R's replication,
	// never fire.
	PerNode int
	// TimeScale > 0 selects latency mode: a request enters at its trace time
	// × TimeScale (0.5 = replay twice as fast). 0 = throughput mode.
	TimeScale float64
	// Seed seeds the policy's randomness (p2c). Equal seeds, equal results.
	Seed uint64
	// Progress, if set, is called every 65536 requests with the count so far.
	Progress func(done int64)
	// ConnRequests is how many consecutive requests share one client
	// connection (keep-alive; keepalive.go): in throughput mode the
	// window's slots are connections, each sending its K requests one
	// after the other. Default 0 (or 1): one connection per request, as the
	// HTTP/1.0 traces have it.
	ConnRequests int
	// Replicas is how many nodes store each file on disk (partitioned
	// storage, internal/cluster/placement; nodes "n0"… of weight 1), what live
	// `shoal up --replicas` does: the policies see it (policy.Cluster.Storage)
	// and a node that does not store a file fetches it from a holder's
	// memory, or the holder reads its disk (internal bytes), and caches it.
	// Default 0: every node stores every file.
	Replicas int
}

// Result is one run's measurements. Row is the table line; the rest are
// extra counters for tests and curious operators.
type Result struct {
	Row
	// Elapsed is the virtual time from the first arrival to the last completion.
	Elapsed time.Duration
	// MemHits, PeerHits and DiskReads split requests by where the object came
	// from; DiskReads/Requests is the miss ratio.
	MemHits, PeerHits, DiskReads int64
	// BigToDisk counts requests for objects above Costs.NoCacheAbove, all of
	// which were read from disk.
	BigToDisk int64
	// Handoffs counts connection handoffs (front→node on an l7 front,
	// node→node for tbccrd and weblins).
	Handoffs int64
	// Moves counts requests served by another node than the one holding
	// their connection: the layer-4 placement's node for a first request
	// (tag and l4 paths), the previous request's node for a later one on a
	// keep-alive connection (Config.ConnRequests). A live passfd front in
	// tag mode counts the same (front.TagStats: Moved + Rehomed).
	Moves int64
	// Rejected counts requests no node would take (Decision.Node −1).
	Rejected int64
	// Window is the number of requests throughput mode kept in the system
	// (see Config.PerNode); 0 in latency mode.
	Window int
	// NodeCPU and NodeDisk are each node's utilisation; MaxNodeCPU is the
	// busiest node's.
	NodeCPU, NodeDisk []float64
	MaxNodeCPU        float64
	// NodeRequests counts the requests each node served (the per-node
	// shares the live parity test compares, docs/parity.md).
	NodeRequests []int64
}

// Row is one line of the results table; its JSON keys are the CLI's --json
// contract.
type Row struct {
	Policy string `json:"policy"`
	Nodes  int    `json:"nodes"`
	// Requests is the number of trace requests served.
	Requests int64 `json:"requests"`
	// ThroughputRPS is Requests over the virtual time from the first arrival
	// to the last completion (seed 000 §3.3.2's definition).
	ThroughputRPS float64 `json:"throughput_rps"`
	// MissRatio is the share of requests whose object was read from a disk;
	// ByteMissRatio the share of requested bytes read from a disk.
	MissRatio     float64 `json:"miss_ratio"`
	ByteMissRatio float64 `json:"byte_miss_ratio"`
	// HitRatio and ByteHitRatio are their complements: requests, and
	// requested bytes, served from a memory (the node's or a peer's), as a
	// live node counts them (its cache hits; cache.Served's memory_bytes
	// over object_bytes).
	HitRatio     float64 `json:"hit_ratio"`
	ByteHitRatio float64 `json:"byte_hit_ratio"`
	// NodeCPUUtil and NodeDiskUtil are busy time over elapsed time, averaged
	// over nodes; FrontCPUUtil is the front's (≈1 means the front is the
	// bottleneck).
	NodeCPUUtil  float64 `json:"node_cpu_util"`
	NodeDiskUtil float64 `json:"node_disk_util"`
	FrontCPUUtil float64 `json:"front_cpu_util"`
	// HandoffsPerRequest counts TCP handoffs: front→node on an l7 front (one
	// per request), node→node for tbccrd and weblins.
	HandoffsPerRequest float64 `json:"handoffs_per_request"`
	// MovesPerRequest is Result.Moves over the requests.
	MovesPerRequest float64 `json:"moves_per_request"`
	// InternalBytesPerRequest is cluster-internal traffic: location queries
	// and replies or tags (seed 000 §3.2), plus objects moved between nodes'
	// memories.
	InternalBytesPerRequest float64 `json:"internal_bytes_per_request"`
	// FetchBytesPerRequest is the objects' part of it alone: bytes moved
	// from one node's memory to another's (weblins' peer fetches), what a
	// live node counts as peer fetch_bytes.
	FetchBytesPerRequest float64 `json:"fetch_bytes_per_request"`
	// MeanLatencyMS is the mean time from entering the front to completion.
	// In throughput mode it is the closed loop's response time (window ÷
	// throughput, by Little's law); in latency mode the response time at the
	// trace's (scaled) arrival rate.
	MeanLatencyMS float64 `json:"mean_latency_ms"`
}

// Config.GDSFCost values.
const (
	GDSFNode = ""     // the live nodes' cost: 1, or 1/10 when cached elsewhere
	GDSFDisk = "disk" // disk read time, or a peer fetch's time when cached elsewhere
)

// event kinds
const (
	evArrive   uint8 = iota // latency mode: a request enters the front
	evFront                 // front CPU done: pick a node
	evHolder                // holder's setup+handoff done: serve at the tag node
	evEntry                 // serving node's setup done: start the fetch or disk read
	evPeerSend              // owner finished sending the object
	evDisk                  // disk read done: transmit
	evDone                  // last CPU job done: deliver (Costs.Delivery), or complete
	evClient                // the client has the response: request complete
)

// source of a request's object
const (
	fromMem uint8 = iota
	fromPeer
	fromDisk
	fromPeerDisk // peer reads its disk, then sends
)

type reqState struct {
	pr     policy.Request
	at     int64 // entry time
	holder int32
	node   int32
	fetch  int32
	from   uint8
	next   int32 // free list
}

type node struct {
	cpu, disk fifo
	cache     cache.Cache[struct{}]
	lastBusy  int64 // CPU busy at the last load report
	lastDisk  int64 // disk busy at the last load report
}

// sim is one run's state.
type sim struct {
	cfg      Config
	c        Costs
	path     Path
	pol      policy.Policy
	closer   policy.ConnCloser
	traits   policy.Traits
	l4       policy.Policy // places connections for node-side dispatch, or nil
	cl       policy.Cluster
	nodes    []node
	front    fifo
	q        eventQueue
	reqs     []reqState
	free     int32
	src      Source
	srcDone  bool
	now      int64
	conn     uint64
	frontD   int64
	perReqIB int64 // internal bytes charged on every request

	// load feedback for dfwrr
	period   int64
	nextLoad int64

	// cgdsf digests (Config.DigestPeriod): digests[j] is node j's, nil
	// when CachedElsewhere reads the caches' exact state.
	digests     []*peer.Bloom
	digestEvery int64
	nextDigest  int64
	keyBuf      []string

	// conns holds the open keep-alive connections (keepalive.go);
	// admitted counts the requests admitted so far.
	conns    map[uint64]*connState
	admitted int64

	res      Result
	first    int64 // first arrival (latency mode)
	started  bool
	latSum   int64
	missB    int64
	reqB     int64
	internal int64
	last     int64
}

// Run simulates cfg over src and returns the measurements.
func Run(cfg Config, src Source) (Result, error) {
	s, err := newSim(cfg, src)
	if err != nil {
		return Result{}, err
	}
	if err := s.run(); err != nil {
		return Result{}, err
	}
	return s.result(), nil
}

// newSim checks cfg, builds the policy under test and every node's cache,
// and fixes the per-request costs that do not change during a run.
func newSim(cfg Config, src Source) (*sim, error) {
	cfg, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &sim{cfg: cfg, src: src, free: -1}
	if cfg.Costs != nil {
		s.c = *cfg.Costs
	} else {
		s.c = DefaultCosts()
	}
	if err := s.c.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if s.c.NoCacheAbove == 0 { // the live nodes' admission (store.Admissible)
		s.c.NoCacheAbove = store.Config{MemoryBytes: cfg.CacheBytes}.DefaultMaxObject()
	}
	var cost, peerCost func(string, int64) float64 // GDSFNode: cache.Config's defaults
	switch cfg.GDSFCost {
	case GDSFNode:
		cost = cache.DiskCost
	case GDSFDisk:
		cost, peerCost = s.gdsfCost, s.gdsfPeerCost
	default:
		return nil, fmt.Errorf("sim: gdsf cost %q: want %q or %q", cfg.GDSFCost, GDSFNode, GDSFDisk)
	}
	if err := s.newPolicy(cost, peerCost); err != nil {
		return nil, err
	}
	if err := s.newNodes(cost, peerCost); err != nil {
		return nil, err
	}
	if cfg.Cache == cache.CGDSF && cfg.DigestPeriod >= 0 {
		s.digestEvery = int64(cmp.Or(cfg.DigestPeriod, peer.DefaultDigestPeriod))
		s.digests = make([]*peer.Bloom, cfg.Nodes)
		s.rebuildDigests() // at 0, as a live node's first round at start
	}
	s.frontD = int64(s.c.Front(s.path))
	switch {
	case s.path == PathTag:
		s.perReqIB = s.c.TagBytes * s.c.TagPackets
	case s.path == PathL4 && s.traits.Placement == policy.AtHolder:
		s.perReqIB = s.c.QueryBytes + s.c.ReplyBytes
	}
	s.res.Policy = cfg.Policy
	s.res.Nodes = cfg.Nodes
	return s, nil
}

// checkConfig refuses a configuration the simulator cannot run and fills
// the cache defaults (32 MiB of LRU per node).
func checkConfig(cfg Config) (Config, error) {
	if cfg.Nodes < 1 {
		return cfg, fmt.Errorf("sim: nodes %d: need at least 1", cfg.Nodes)
	}
	if cfg.CacheBytes == 0 && cfg.MemoryBytes > 0 {
		cfg.CacheBytes = store.PlanMemory(cfg.MemoryBytes, "", 1).Store
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = 32 << 20
	}
	if cfg.Cache == "" {
		cfg.Cache = cache.LRU
	}
	if cfg.NodeNames != nil {
		if len(cfg.NodeNames) != cfg.Nodes {
			return cfg, fmt.Errorf("sim: %d node names for %d nodes", len(cfg.NodeNames), cfg.Nodes)
		}
		seen := make(map[string]bool, len(cfg.NodeNames))
		for _, n := range cfg.NodeNames {
			if n == "" || seen[n] {
				return cfg, fmt.Errorf("sim: node name %q: empty or repeated", n)
			}
			seen[n] = true
		}
	}
	if cfg.PerNode < 0 || cfg.TimeScale < 0 || cfg.CacheBytes < 0 {
		return cfg, errors.New("sim: per-node window, time scale and cache size must not be negative")
	}
	return cfg, nil
}

// newPolicy builds the policy under test from the registry, with the
// simulator's seed, cache size and no-cache threshold where the policy
// configuration leaves them unset, and derives what the policy implies: its
// data path, the layer-4 placement of node-side dispatch, the load-report
// period and the throughput-mode admission window.
func (s *sim) newPolicy(cost, peerCost func(string, int64) float64) error {
	cfg := s.cfg
	pc := cfg.PolicyConfig
	if pc.Seed == 0 {
		pc.Seed = cfg.Seed
	}
	if pc.CacheBytes == 0 {
		pc.CacheBytes = cfg.CacheBytes
	}
	if pc.NoCacheAbove == 0 {
		pc.NoCacheAbove = s.c.NoCacheAbove
	}
	if pc.NodeFootprint == nil { // the mirrors charge what the nodes' caches do
		pc.NodeFootprint = func(size int64) int64 { return store.Footprint(size, 0) }
	}
	if pc.PopularN == 0 && pc.PopularBytes == 0 {
		pc.PopularBytes = max(cfg.CacheBytes/8, 1)
	}
	if pc.NewReplacer == nil {
		pc.NewReplacer = policy.NodeCacheMirrors(cache.Config[struct{}]{Policy: cfg.Cache, Capacity: cfg.CacheBytes,
			Cost: cost, PeerCost: peerCost, Admission: true})
	}
	pol, err := cfg.Registry.New(cfg.Policy, pc)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	s.pol = pol
	s.closer, _ = pol.(policy.ConnCloser)
	s.traits = policy.TraitsOf(pol)
	s.path = cfg.Path
	if s.path == "" {
		s.path = DefaultPath(s.traits)
	}
	// A policy that decides after the connection is on a node (seed 000's
	// tag to the holder, seed 001's first member) has its connections placed
	// by layer-4 wrr, and the simulator passes the Holder.
	if s.traits.Placement == policy.AtHolder && s.path != PathL7 {
		if s.l4, err = policy.New("wrr", policy.Config{}); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	s.period = int64(policy.DefaultConfig().Period)
	if pc.Period > 0 {
		s.period = int64(pc.Period)
	}
	s.nextLoad = s.period
	if cfg.TimeScale == 0 {
		s.res.Window = cfg.PerNode * cfg.Nodes
		if cfg.PerNode == 0 {
			s.res.Window = pc.AdmissionBound(cfg.Nodes)
		}
	}
	return nil
}

// newNodes names the nodes, gives each its memory cache (the GDSF costs and,
// for the cooperative policies, the question whether another node holds a
// key) and, with Config.Replicas, the storage placement of the objects.
func (s *sim) newNodes(cost, peerCost func(string, int64) float64) error {
	cfg := s.cfg
	s.cl.Nodes = make([]policy.Node, cfg.Nodes)
	if cfg.Replicas > 0 && cfg.Replicas < cfg.Nodes {
		st := &policy.Storage{Nodes: make([]placement.Node, cfg.Nodes), Replicas: cfg.Replicas}
		for i := range st.Nodes {
			st.Nodes[i] = placement.Node{ID: fmt.Sprintf("n%d", i), Weight: 1}
		}
		s.cl.Storage = st
	}
	s.nodes = make([]node, cfg.Nodes)
	for i := range s.nodes {
		name := fmt.Sprintf("n%d", i)
		if cfg.NodeNames != nil {
			name = cfg.NodeNames[i]
		}
		s.cl.Nodes[i] = policy.Node{Name: name, Weight: 1, Up: true}
		cc := cache.Config[struct{}]{
			Policy:    cfg.Cache,
			Capacity:  cfg.CacheBytes,
			MaxObject: store.Footprint(s.c.NoCacheAbove, 0), // objects are charged their footprint
		}
		if cfg.Cache != cache.LRU {
			cc.Cost, cc.PeerCost, cc.Admission = cost, peerCost, true // as the nodes' stores
			self := i
			cc.CachedElsewhere = func(key string) bool { return s.cachedElsewhere(self, key) }
		}
		c, err := cache.New(cc)
		if err != nil {
			return fmt.Errorf("sim: node %d: %w", i, err)
		}
		s.nodes[i].cache = c
	}
	return nil
}

// cachedElsewhere is cgdsf's question for node self: does another node's
// memory hold key? From the digests when there are, else the exact state.
func (s *sim) cachedElsewhere(self int, key string) bool {
	if s.digests != nil {
		for j, d := range s.digests {
			if j != self && d.Has(key) {
				return true
			}
		}
		return false
	}
	for j := range s.nodes {
		if j != self && s.nodes[j].cache != nil {
			if _, ok := s.nodes[j].cache.Peek(key); ok {
				return true
			}
		}
	}
	return false
}

// advance moves the virtual clock to t, first rebuilding the digests when
// a digest round is due.
func (s *sim) advance(t int64) {
	s.now = t
	if s.digests != nil && s.now >= s.nextDigest {
		s.rebuildDigests()
	}
}

// rebuildDigests makes every node's digest of its cache now and schedules
// the next round DigestPeriod later (virtual time).
func (s *sim) rebuildDigests() {
	for j := range s.nodes {
		s.keyBuf = s.keyBuf[:0]
		if k, ok := s.nodes[j].cache.(interface{ Keys(func(string)) }); ok {
			k.Keys(func(key string) { s.keyBuf = append(s.keyBuf, key) })
		}
		s.digests[j] = peer.DigestOf(s.keyBuf)
	}
	for s.nextDigest <= s.now {
		s.nextDigest += s.digestEvery
	}
}

// gdsfCost is GDSF's C: the disk read time of the object, in ms.
func (s *sim) gdsfCost(_ string, size int64) float64 {
	return float64(s.c.Disk(size)) / 1e6
}

// gdsfPeerCost is cluster GDSF's C for an object another node caches: a
// peer fetch (CPU on both sides), in ms.
func (s *sim) gdsfPeerCost(_ string, size int64) float64 {
	return float64(2*s.c.Peer(size)) / 1e6
}

// alloc takes a request slot from the pool.
func (s *sim) alloc() int32 {
	if s.free >= 0 {
		i := s.free
		s.free = s.reqs[i].next
		return i
	}
	s.reqs = append(s.reqs, reqState{})
	return int32(len(s.reqs) - 1)
}

// admit reads the next access — of connection prev when it has more
// (keepalive.go), else of a new connection — and queues it at the front at
// time t; it reports false at the end of the source.
func (s *sim) admit(t int64, prev uint64) (bool, error) {
	if s.srcDone && prev == 0 {
		return false, nil
	}
	a, conn, err := s.next(prev)
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sim: %w", err)
	}
	i := s.alloc()
	r := &s.reqs[i]
	r.pr = policy.Request{URL: a.URL, Size: max(a.Size, 0), Conn: conn, Holder: -1}
	r.holder, r.node, r.fetch = -1, -1, -1
	if s.cfg.TimeScale > 0 {
		at := int64(float64(a.At) * s.cfg.TimeScale)
		r.at = max(at, t) // a trace out of order cannot go back in time
		s.q.push(r.at, evArrive, i)
		return true, nil
	}
	r.at = t
	s.q.push(s.front.serve(t, s.frontD), evFront, i)
	return true, nil
}

func (s *sim) run() error {
	if s.cfg.TimeScale > 0 {
		if _, err := s.admit(0, 0); err != nil {
			return err
		}
	} else {
		for range s.res.Window {
			ok, err := s.admit(0, 0)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
		}
	}
	for {
		ev, ok := s.q.pop()
		if !ok {
			return nil
		}
		s.advance(ev.t)
		i := ev.req
		r := &s.reqs[i]
		switch ev.kind {
		case evArrive:
			if !s.started {
				s.first, s.started = s.now, true
			}
			s.q.push(s.front.serve(s.now, s.frontD), evFront, i)
			if _, err := s.admit(s.now, 0); err != nil {
				return err
			}
		case evFront:
			s.dispatch(i, r)
		case evHolder:
			s.serve(i, r, int64(s.c.HandoffIn))
		case evEntry:
			s.fetch(i, r)
		case evPeerSend:
			n := &s.nodes[r.node]
			d := int64(s.c.Peer(r.pr.Size) + s.c.Transmit(r.pr.Size) + s.c.ConnTeardown)
			s.q.push(n.cpu.serve(s.now, d), evDone, i)
		case evDisk:
			if r.from == fromPeerDisk {
				o := &s.nodes[r.fetch]
				s.q.push(o.cpu.serve(s.now, int64(s.c.Peer(r.pr.Size))), evPeerSend, i)
				break
			}
			n := &s.nodes[r.node]
			d := int64(s.c.Transmit(r.pr.Size) + s.c.ConnTeardown)
			s.q.push(n.cpu.serve(s.now, d), evDone, i)
		case evDone:
			if r.node >= 0 && s.c.Delivery > 0 {
				s.q.push(s.now+int64(s.c.Delivery), evClient, i)
				break
			}
			if err := s.complete(i, r); err != nil {
				return err
			}
		case evClient:
			if err := s.complete(i, r); err != nil {
				return err
			}
		}
	}
}

// dispatch asks the policy for a node once the front has processed request i.
func (s *sim) dispatch(i int32, r *reqState) {
	if s.now >= s.nextLoad {
		s.reportLoad()
	}
	r.pr.Now = time.Duration(s.now)
	cs := s.conns[r.pr.Conn]
	switch {
	case cs != nil && cs.node >= 0:
		r.pr.Holder, r.holder = int(cs.node), cs.node // a later request on a keep-alive connection
	case s.l4 != nil:
		h := s.l4.Pick(&s.cl, &r.pr)
		r.pr.Holder = h.Node
		r.holder = int32(h.Node)
	}
	d := s.pol.Pick(&s.cl, &r.pr)
	if cs != nil && d.Node >= 0 {
		cs.node = int32(d.Node)
	}
	if d.Node < 0 || d.Node >= len(s.nodes) {
		s.res.Rejected++
		r.node = -1
		s.q.push(s.now, evDone, i)
		return
	}
	s.cl.Start(d.Node)
	r.node = int32(d.Node)
	r.fetch = int32(d.Fetch)
	if d.Fetch >= len(s.nodes) {
		r.fetch = -1
	}
	switch {
	case r.holder >= 0 && r.holder != r.node:
		// Node-to-node handoff: the holder accepted the connection and hands it on.
		s.res.Handoffs++
		s.res.Moves++
		h := &s.nodes[r.holder]
		s.q.push(h.cpu.serve(s.now, int64(s.c.ConnSetup+s.c.HandoffOut)), evHolder, i)
	case s.path == PathL7:
		s.res.Handoffs++ // the front handed the connection to the node
		s.serve(i, r, int64(s.c.HandoffIn))
	default:
		s.serve(i, r, int64(s.c.ConnSetup))
	}
}

// serve decides where request i's object comes from on its serving node and
// queues the node's first CPU job (entry = setup or handoff-in cost).
func (s *sim) serve(i int32, r *reqState, entry int64) {
	n := &s.nodes[r.node]
	size := r.pr.Size
	s.reqB += size
	stores := s.cl.Storage == nil || s.cl.Stores(int(r.node), r.pr.URL)
	switch {
	case size > s.c.NoCacheAbove:
		s.res.BigToDisk++
		r.from = fromDisk
		if !stores {
			// Partitioned: the first holder reads its disk and sends it.
			r.fetch, r.from = s.holder(r), fromPeerDisk
			s.internal += size
		}
	case s.hit(n, r.pr.URL):
		r.from = fromMem
	default:
		// The live node's order (internal/cluster/node fromPeer): the policy's
		// hint when that peer has the object in memory or stores it, then,
		// for a file this node does not store, its first holder.
		src, mem := int32(-1), false
		if h := r.fetch; h >= 0 && h != r.node {
			if s.hit(&s.nodes[h], r.pr.URL) {
				src, mem = h, true
			} else if s.cl.Storage == nil || s.cl.Stores(int(h), r.pr.URL) {
				src = h
			}
		}
		if src < 0 && !stores {
			h := s.holder(r)
			src, mem = h, s.hit(&s.nodes[h], r.pr.URL)
		}
		if src < 0 {
			r.fetch, r.from = -1, fromDisk
			n.cache.Add(r.pr.URL, struct{}{}, store.Footprint(size, 0))
			break
		}
		r.fetch = src
		if mem {
			r.from = fromPeer
		} else {
			r.from = fromPeerDisk
			s.nodes[src].cache.Add(r.pr.URL, struct{}{}, store.Footprint(size, 0))
		}
		s.internal += size
		if !stores {
			n.cache.Add(r.pr.URL, struct{}{}, store.Footprint(size, 0)) // no disk copy here: keep it
		}
	}
	if r.from == fromMem {
		s.res.MemHits++
		d := entry + int64(s.c.Transmit(size)+s.c.ConnTeardown)
		s.q.push(n.cpu.serve(s.now, d), evDone, i)
		return
	}
	s.q.push(n.cpu.serve(s.now, entry), evEntry, i)
}

// holder is the first node other than r's that stores r's URL.
func (s *sim) holder(r *reqState) int32 {
	var buf [16]int
	for _, h := range s.cl.Holders(buf[:0], r.pr.URL) {
		if int32(h) != r.node {
			return int32(h)
		}
	}
	return r.node
}

func (s *sim) hit(n *node, url string) bool {
	_, ok := n.cache.Get(url)
	return ok
}

// fetch starts the data step after the serving node's entry CPU job.
func (s *sim) fetch(i int32, r *reqState) {
	size := r.pr.Size
	switch r.from {
	case fromPeer:
		s.res.PeerHits++
		o := &s.nodes[r.fetch]
		s.q.push(o.cpu.serve(s.now, int64(s.c.Peer(size))), evPeerSend, i)
	case fromPeerDisk:
		s.res.DiskReads++
		s.missB += size
		o := &s.nodes[r.fetch]
		s.q.push(o.disk.serve(s.now, int64(s.c.Disk(size))), evDisk, i)
	default:
		s.res.DiskReads++
		s.missB += size
		n := &s.nodes[r.node]
		s.q.push(n.disk.serve(s.now, int64(s.c.Disk(size))), evDisk, i)
	}
}

// complete retires request i and, in throughput mode, admits the next one.
func (s *sim) complete(i int32, r *reqState) error {
	if r.node >= 0 {
		s.cl.Finish(int(r.node))
		r.pr.Now = time.Duration(s.now)
		s.pol.Done(&s.cl, int(r.node), &r.pr)
		s.res.Requests++
		if s.res.NodeRequests == nil {
			s.res.NodeRequests = make([]int64, len(s.nodes))
		}
		s.res.NodeRequests[r.node]++
		s.latSum += s.now - r.at
	}
	conn := r.pr.Conn
	if s.connDone(conn) {
		if s.closer != nil {
			s.closer.CloseConn(conn)
		}
		conn = 0
	}
	s.last = s.now
	if s.cfg.Progress != nil && (s.res.Requests+s.res.Rejected)&0xffff == 0 {
		s.cfg.Progress(s.res.Requests + s.res.Rejected)
	}
	r.pr = policy.Request{}
	r.next = s.free
	s.free = i
	if s.cfg.TimeScale == 0 {
		if _, err := s.admit(s.now, conn); err != nil {
			return err
		}
	}
	return nil
}

// reportLoad feeds each node's utilisation over the last period into
// Node.Load (dfwrr's feedback), as a node's status report would: the busier
// of its CPU and its disk, since a disk-bound node is as loaded as a
// CPU-bound one (LVS feedback daemons combine CPU and I/O load likewise).
func (s *sim) reportLoad() {
	for j := range s.nodes {
		n := &s.nodes[j]
		cpu := float64(n.cpu.busy-n.lastBusy) / float64(s.period)
		disk := float64(n.disk.busy-n.lastDisk) / float64(s.period)
		s.cl.Nodes[j].Load = min(max(cpu, disk), 1)
		n.lastBusy, n.lastDisk = n.cpu.busy, n.disk.busy
	}
	for s.nextLoad <= s.now {
		s.nextLoad += s.period
	}
}

func (s *sim) result() Result {
	res := s.res
	el := s.last - s.first
	res.Elapsed = time.Duration(el)
	req := res.Requests
	res.NodeCPU = make([]float64, len(s.nodes))
	res.NodeDisk = make([]float64, len(s.nodes))
	if el > 0 {
		for j := range s.nodes {
			res.NodeCPU[j] = float64(s.nodes[j].cpu.busy) / float64(el)
			res.NodeDisk[j] = float64(s.nodes[j].disk.busy) / float64(el)
			res.NodeCPUUtil += res.NodeCPU[j] / float64(len(s.nodes))
			res.NodeDiskUtil += res.NodeDisk[j] / float64(len(s.nodes))
			res.MaxNodeCPU = max(res.MaxNodeCPU, res.NodeCPU[j])
		}
		res.FrontCPUUtil = float64(s.front.busy) / float64(el)
		res.ThroughputRPS = float64(req) / time.Duration(el).Seconds()
	}
	if req > 0 {
		res.MissRatio = float64(res.DiskReads) / float64(req)
		res.HitRatio = 1 - res.MissRatio
		res.HandoffsPerRequest = float64(res.Handoffs) / float64(req)
		res.MovesPerRequest = float64(res.Moves) / float64(req)
		res.InternalBytesPerRequest = float64(s.internal+s.perReqIB*req) / float64(req)
		res.FetchBytesPerRequest = float64(s.internal) / float64(req)
		res.MeanLatencyMS = float64(s.latSum) / float64(req) / 1e6
	}
	if s.reqB > 0 {
		res.ByteMissRatio = float64(s.missB) / float64(s.reqB)
		res.ByteHitRatio = 1 - res.ByteMissRatio
	}
	return res
}
