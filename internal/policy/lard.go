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

// LARD is locality-aware request distribution (Pai et al. 1998; SPEC §3): a
// target (URL) table maps each target to one node so the cluster's caches
// partition the working set. The first request for a target goes to the
// least loaded node; a target moves to the least loaded node when its node's
// load exceeds T_high while some node is below T_low, or reaches 2·T_high. A
// target whose node is down or drained is placed afresh. The table keeps one
// entry per distinct URL (as in the paper); URL strings must be immutable.
//
// Build it with New("lard", cfg); the zero value is not ready for use.
type LARD struct {
	tlow, thigh int
	target      map[string]int
}

func newLARD(cfg Config) *LARD {
	return &LARD{tlow: cfg.TLow, thigh: cfg.THigh, target: map[string]int{}}
}

// Name implements Policy.
func (p *LARD) Name() string { return "lard" }

// Pick implements Policy.
func (p *LARD) Pick(c *Cluster, r *Request) Decision {
	n, ok := p.target[r.URL]
	if !ok || n >= len(c.Nodes) || !c.Nodes[n].Usable() ||
		lardOverloaded(c, c.Nodes[n].Active, p.tlow, p.thigh) {
		n = leastActive(c)
		if n < 0 {
			return None
		}
		p.target[r.URL] = n
	}
	return decide(n)
}

// Done implements Policy.
func (p *LARD) Done(*Cluster, int, *Request) {}

// LARDTables is LARD's admin snapshot: the number of targets and up to limit
// target → node rows.
type LARDTables struct {
	Targets int            `json:"targets"`
	Rows    map[string]int `json:"rows,omitempty"`
}

// Tables implements Tabler.
func (p *LARD) Tables(limit int) any {
	t := LARDTables{Targets: len(p.target), Rows: map[string]int{}}
	for u, n := range p.target {
		if len(t.Rows) >= limit {
			break
		}
		t.Rows[u] = n
	}
	return t
}

// LARDR is LARD with replication (LARD/R, Pai et al. 1998; SPEC §3): each
// target maps to a server *set*. A request goes to the least loaded member;
// if that member is overloaded by LARD's rule, the globally least loaded node
// joins the set and serves. When the set has more than one member and has not
// changed for K, its most loaded member is dropped, so a target that cooled
// down shrinks back. This is the paper's pseudo-code line by line; time is
// Request.Now. Ties: least loaded → lowest index, most loaded → highest.
//
// Build it with New("lardr", cfg); the zero value is not ready for use.
type LARDR struct {
	tlow, thigh int
	k           time.Duration
	sets        map[string]*serverSet
}

type serverSet struct {
	nodes   []int
	lastMod time.Duration
}

func newLARDR(cfg Config) *LARDR {
	return &LARDR{tlow: cfg.TLow, thigh: cfg.THigh, k: cfg.K, sets: map[string]*serverSet{}}
}

// Name implements Policy.
func (p *LARDR) Name() string { return "lardr" }

// Pick implements Policy.
func (p *LARDR) Pick(c *Cluster, r *Request) Decision {
	s := p.sets[r.URL]
	if s != nil {
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
	if s == nil || len(s.nodes) == 0 {
		n := leastActive(c)
		if n < 0 {
			return None
		}
		if s == nil {
			s = &serverSet{}
			p.sets[r.URL] = s
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
		q := leastActive(c)
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
	if s := p.sets[url]; s != nil {
		return slices.Clone(s.nodes)
	}
	return nil
}

// Done implements Policy.
func (p *LARDR) Done(*Cluster, int, *Request) {}

// LARDRTables is LARD/R's admin snapshot: the number of targets and up to
// limit target → server-set rows.
type LARDRTables struct {
	Targets int              `json:"targets"`
	Rows    map[string][]int `json:"rows,omitempty"`
}

// Tables implements Tabler.
func (p *LARDR) Tables(limit int) any {
	t := LARDRTables{Targets: len(p.sets), Rows: map[string][]int{}}
	for u, s := range p.sets {
		if len(t.Rows) >= limit {
			break
		}
		t.Rows[u] = slices.Clone(s.nodes)
	}
	return t
}
