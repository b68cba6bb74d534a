package policy

// LC is LVS least-connection scheduling (seed 000 §1 and seed 004's LVS,
// SPEC §3) on Node.Active, the caller's in-flight count. With weighted set
// (wlc) it minimises Active/Weight, compared by cross-multiplication
// (a.Active·b.Weight < b.Active·a.Weight) as ip_vs_wlc does, so no division
// and no float rounding. Ties go to the lowest index, which keeps decisions
// deterministic.
type LC struct{ weighted bool }

// Name implements Policy.
func (p *LC) Name() string {
	if p.weighted {
		return "wlc"
	}
	return "lc"
}

// Traits implements Describer: content-blind behind a layer-4 switch (LVS).
func (p *LC) Traits() Traits {
	return Traits{Placement: Blind, Front: FrontL4}
}

// Pick implements Policy.
func (p *LC) Pick(c *Cluster, r *Request) Decision {
	if !p.weighted {
		return decide(leastActive(c))
	}
	best := -1
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if !n.Usable() {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &c.Nodes[best]
		if int64(n.Active)*int64(b.Weight) < int64(b.Active)*int64(n.Weight) {
			best = i
		}
	}
	return decide(best)
}

// Done implements Policy.
func (p *LC) Done(*Cluster, int, *Request) {}
