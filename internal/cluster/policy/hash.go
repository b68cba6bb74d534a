package policy

import (
	"slices"
)

// URLHash sends each URL to usable node hashString(URL) mod |usable| (the
// static "URL-Hash" dispatcher seed 000 §1 compares against): perfect cache
// affinity, no load awareness, and a change in membership remaps most URLs —
// chbl is the fix for both. The hash is FNV-1a with a fixed finaliser, so the
// mapping is the same on every run and machine.
type URLHash struct{ v view }

// Name implements Policy.
func (p *URLHash) Name() string { return "urlhash" }

// Traits implements Describer: content-aware at an l7 front.
func (p *URLHash) Traits() Traits {
	return Traits{Placement: AtFront, Front: FrontL7}
}

// Pick implements Policy.
func (p *URLHash) Pick(c *Cluster, r *Request) Decision {
	for range 2 {
		p.v.refresh(c)
		if len(p.v.usable) == 0 {
			return None
		}
		i := p.v.usable[hashString(r.URL)%uint64(len(p.v.usable))]
		if c.Nodes[i].Usable() {
			return decide(i)
		}
		p.v.valid = false // health changed without a Version bump: rescan
	}
	return None
}

// Done implements Policy.
func (p *URLHash) Done(*Cluster, int, *Request) {}

// CHBL is consistent hashing with bounded loads (Mirrokni, Thorup and
// Zadimoghaddam 2018, as HAProxy's hash-balance-factor; SPEC §3). Every usable
// node puts VirtualNodes points on a 64-bit ring (hashed from its Name, so
// the ring survives reordering); a URL goes to the first node clockwise from
// its hash whose in-flight count is below
//
//	cap = ⌈(1+ε)·(total in-flight + 1) / usable nodes⌉
//
// and otherwise the walk continues. No node therefore ever holds more than
// cap requests after the placement, while an unloaded cluster keeps the pure
// consistent-hash affinity. ε is kept as an integer per-mille factor so the
// bound is exact integer arithmetic (ε = 0.25 → 1250‰).
//
// Build it with New("chbl", cfg); the zero value is not ready for use.
type CHBL struct {
	eps    float64
	vnodes int
	v      view
	ring   []ringPoint
}

type ringPoint struct {
	h    uint64
	node int
}

// Name implements Policy.
func (p *CHBL) Name() string { return "chbl" }

// Traits implements Describer: content-aware at an l7 front.
func (p *CHBL) Traits() Traits {
	return Traits{Placement: AtFront, Front: FrontL7, Active: true, Keys: []string{"epsilon", "virtual_nodes"}}
}

func (p *CHBL) build(c *Cluster) {
	p.ring = p.ring[:0]
	for _, i := range p.v.usable {
		base := hashString(c.Nodes[i].Name)
		if c.Nodes[i].Name == "" {
			base ^= mix64(uint64(i) + 1)
		}
		for j := 0; j < p.vnodes; j++ {
			p.ring = append(p.ring, ringPoint{h: mix64(base + uint64(j)*0x9e3779b97f4a7c15), node: i})
		}
	}
	slices.SortFunc(p.ring, func(a, b ringPoint) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return a.node - b.node
	})
}

// boundedCap is ⌈(1+ε)·(total+1)/n⌉ in integer arithmetic.
func boundedCap(eps float64, total, n int) int {
	f := int64(1000 + eps*1000 + 0.5)
	d := int64(1000 * n)
	return int((int64(total+1)*f + d - 1) / d)
}

// Pick implements Policy.
func (p *CHBL) Pick(c *Cluster, r *Request) Decision {
	if p.v.refresh(c) {
		p.build(c)
	}
	n := len(p.v.usable)
	if n == 0 {
		return None
	}
	total := 0
	for _, i := range p.v.usable {
		total += c.Nodes[i].Active
	}
	limit := boundedCap(p.eps, total, n)
	h := hashString(r.URL)
	lo, hi := 0, len(p.ring)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.ring[m].h < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for k := 0; k < len(p.ring); k++ {
		pt := p.ring[(lo+k)%len(p.ring)]
		nd := &c.Nodes[pt.node]
		if nd.Usable() && nd.Active < limit {
			return decide(pt.node)
		}
	}
	return None
}

// Done implements Policy.
func (p *CHBL) Done(*Cluster, int, *Request) {}
