package policy

import (
	"slices"
	"time"
)

// lardRule is LARD's overload test (Pai et al. 1998, SPEC §3) for a node with
// load l: l > T_high while some usable node is below T_low, or l ≥ 2·T_high.
// Load is the caller's in-flight count Node.Active.
func lardOverloaded(c *Cluster, l, tlow, thigh int) bool {
	if l >= 2*thigh {
		return true
	}
	if l <= thigh {
		return false
	}
	for i := range c.Nodes {
		if c.Nodes[i].Usable() && c.Nodes[i].Active < tlow {
			return true
		}
	}
	return false
}

// AdmissionBound is LARD's bound on the requests outstanding in a cluster
// of n nodes, S = (n−1)·T_high + T_low − 1 with c's thresholds (defaults
// filled): LARD's front holds back requests beyond it, which keeps every node
// below 2·T_high and lets the T_low/T_high rule fire (Pai et al. 1998). The
// simulator keeps S requests in the system in throughput mode. At least 1.
func (c Config) AdmissionBound(n int) int {
	c.fill()
	return max((n-1)*c.THigh+c.TLow-1, 1)
}

// LARD is locality-aware request distribution (Pai et al. 1998; SPEC §3): a
// target (URL) table maps each target to one node so the cluster's caches
// partition the working set. The first request for a target goes to the
// least loaded node; a target moves to the least loaded node when its node's
// load exceeds T_high while some node is below T_low, or reaches 2·T_high. A
// target whose node is down or drained is placed afresh. The table keeps one
// entry per distinct URL, as in the paper, but at most Config.MaxURLs of
// them (and MaxURLBytes of URL text): the least recently requested target
// leaves to make room and is placed afresh if it comes back, which is what
// the paper's front does with a target it has never seen. A target a node
// answered 404, 410 or 403 for (Request.Status in Done) leaves at once, so
// a scan of missing URLs on the relay path leaves nothing behind. URL
// strings must be immutable.
//
// Build it with New("lard", cfg); the zero value is not ready for use.
type LARD struct {
	tlow, thigh int
	idx         *urlIndex
	target      []int32 // node by URL id
	r           rotor   // ties among the least loaded (util.go)
}

func newLARD(cfg Config) *LARD {
	return &LARD{tlow: cfg.TLow, thigh: cfg.THigh, idx: newURLIndex(cfg.MaxURLs, cfg.MaxURLBytes)}
}

// Name implements Policy.
func (p *LARD) Name() string { return "lard" }

// Traits implements Describer: content-aware at LARD's l7 front (Pai et al. 1998).
func (p *LARD) Traits() Traits {
	return Traits{Placement: AtFront, Front: FrontL7, Active: true, Keys: []string{"t_low", "t_high", "max_urls", "max_url_mb"}}
}

// Pick implements Policy.
func (p *LARD) Pick(c *Cluster, r *Request) Decision {
	id, added := p.idx.get(r.URL)
	if int(id) == len(p.target) {
		p.target = append(p.target, -1)
	}
	if added {
		p.target[id] = -1
	}
	n := int(p.target[id])
	if n < 0 || n >= len(c.Nodes) || !c.Nodes[n].Usable() ||
		lardOverloaded(c, c.Nodes[n].Active, p.tlow, p.thigh) {
		if n = holderLeast(c, r.URL, p.tlow, p.thigh); n < 0 {
			n = p.r.leastActive(c)
		}
		if n < 0 {
			if added {
				p.idx.remove(id) // nothing placed: enter nothing
			}
			return None
		}
		p.target[id] = int32(n)
	}
	return decide(n)
}

// Done implements Policy: a target the node could not serve
// (unservable(r.Status)) leaves the table.
func (p *LARD) Done(_ *Cluster, _ int, r *Request) {
	if unservable(r.Status) {
		if id, ok := p.idx.lookup(r.URL); ok {
			p.idx.remove(id)
		}
	}
}

// LARDTables is LARD's admin snapshot: the number of targets (at most
// Max), how many were evicted to make room, and up to limit target → node
// rows.
type LARDTables struct {
	Targets int            `json:"targets"`
	Max     int            `json:"max"`
	Evicted uint64         `json:"evicted"`
	Rows    map[string]int `json:"rows,omitempty"`
}

// Tables implements Tabler.
func (p *LARD) Tables(limit int) any {
	t := LARDTables{Targets: p.idx.len(), Max: p.idx.max, Evicted: p.idx.evicted, Rows: map[string]int{}}
	for u, id := range p.idx.ids {
		if len(t.Rows) >= limit {
			break
		}
		t.Rows[u] = int(p.target[id])
	}
	return t
}

// LARDR is LARD with replication (LARD/R, Pai et al. 1998; SPEC §3): each
// target maps to a server *set*. A request goes to the least loaded member;
// if that member is overloaded by LARD's rule, the globally least loaded node
// joins the set and serves. When the set has more than one member and has not
// changed for K, its most loaded member is dropped, so a target that cooled
// down shrinks back. This is the paper's pseudo-code line by line; time is
// Request.Now. Ties: the globally least loaded node rotates among equals
// (rotor); within a set, least loaded → lowest index, most loaded → highest.
// The target table is bounded like LARD's (Config.MaxURLs, MaxURLBytes,
// LRU eviction; unservable targets leave in Done).
//
// Build it with New("lardr", cfg); the zero value is not ready for use.
type LARDR struct {
	tlow, thigh int
	k           time.Duration
	idx         *urlIndex
	sets        []serverSet // by URL id
	r           rotor       // ties among the least loaded nodes (util.go)
}

type serverSet struct {
	nodes   []int
	lastMod time.Duration
}

func newLARDR(cfg Config) *LARDR {
	p := &LARDR{tlow: cfg.TLow, thigh: cfg.THigh, k: cfg.K, idx: newURLIndex(cfg.MaxURLs, cfg.MaxURLBytes)}
	p.idx.onEvict = func(id int32) { p.sets[id].nodes = p.sets[id].nodes[:0] }
	return p
}

// Name implements Policy.
func (p *LARDR) Name() string { return "lardr" }

// Traits implements Describer: content-aware at LARD's l7 front (Pai et al. 1998).
func (p *LARDR) Traits() Traits {
	return Traits{Placement: AtFront, Front: FrontL7, Active: true, Keys: []string{"t_low", "t_high", "k", "max_urls", "max_url_mb"}}
}

// Pick implements Policy.
func (p *LARDR) Pick(c *Cluster, r *Request) Decision {
	id, added := p.idx.get(r.URL)
	if int(id) == len(p.sets) {
		p.sets = append(p.sets, serverSet{})
	}
	s := &p.sets[id]
	if !added {
		// Members that went away leave the set (a change like any other).
		k := 0
		for _, i := range s.nodes {
			if i < len(c.Nodes) && c.Nodes[i].Usable() {
				s.nodes[k] = i
				k++
			}
		}
		if k != len(s.nodes) {
			s.nodes, s.lastMod = s.nodes[:k], r.Now
		}
	}
	if len(s.nodes) == 0 {
		n := holderLeast(c, r.URL, p.tlow, p.thigh)
		if n < 0 {
			n = p.r.leastActive(c)
		}
		if n < 0 {
			if added {
				p.idx.remove(id) // nothing placed: enter nothing
			}
			return None
		}
		s.nodes, s.lastMod = append(s.nodes, n), r.Now
		return decide(n)
	}
	n, m := s.nodes[0], s.nodes[0]
	for _, i := range s.nodes[1:] {
		a := c.Nodes[i].Active
		if a < c.Nodes[n].Active || (a == c.Nodes[n].Active && i < n) {
			n = i
		}
		if a > c.Nodes[m].Active || (a == c.Nodes[m].Active && i > m) {
			m = i
		}
	}
	changed := false
	if lardOverloaded(c, c.Nodes[n].Active, p.tlow, p.thigh) {
		q := holderLeast(c, r.URL, p.tlow, p.thigh)
		if q < 0 || slices.Contains(s.nodes, q) {
			q = p.r.leastActive(c) // no holder free to join the set
		}
		if !slices.Contains(s.nodes, q) {
			s.nodes = append(s.nodes, q)
			changed = true
		}
		n = q
	}
	if len(s.nodes) > 1 && r.Now-s.lastMod > p.k {
		if j := slices.Index(s.nodes, m); j >= 0 {
			s.nodes = slices.Delete(s.nodes, j, j+1)
			changed = true
		}
	}
	if changed {
		s.lastMod = r.Now
	}
	return decide(n)
}

// Set returns a copy of url's server set (nil if none), for tests and the
// admin API.
func (p *LARDR) Set(url string) []int {
	if id, ok := p.idx.lookup(url); ok {
		return slices.Clone(p.sets[id].nodes)
	}
	return nil
}

// Done implements Policy: a target the node could not serve
// (unservable(r.Status)) leaves the table.
func (p *LARDR) Done(_ *Cluster, _ int, r *Request) {
	if unservable(r.Status) {
		if id, ok := p.idx.lookup(r.URL); ok {
			p.idx.remove(id)
		}
	}
}

// LARDRTables is LARD/R's admin snapshot: the number of targets (at most
// Max), how many were evicted to make room, and up to limit target →
// server-set rows.
type LARDRTables struct {
	Targets int              `json:"targets"`
	Max     int              `json:"max"`
	Evicted uint64           `json:"evicted"`
	Rows    map[string][]int `json:"rows,omitempty"`
}

// Tables implements Tabler.
func (p *LARDR) Tables(limit int) any {
	t := LARDRTables{Targets: p.idx.len(), Max: p.idx.max, Evicted: p.idx.evicted, Rows: map[string][]int{}}
	for u, id := range p.idx.ids {
		if len(t.Rows) >= limit {
			break
		}
		t.Rows[u] = slices.Clone(p.sets[id].nodes)
	}
	return t
}
