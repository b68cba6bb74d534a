package policy

// LC is LVS least-connection scheduling (seed 000 §1 and seed 004's LVS,
// SPEC §3) on Node.Active, the caller's in-flight count. With weighted set
// (wlc) it minimises Active/Weight, compared by cross-multiplication
// (a.Active·b.Weight < b.Active·a.Weight) as ip_vs_wlc does, so no division
// and no float rounding. Ties among the least loaded go round the nodes
// (rotor), deterministically, so equal loads do not all land on node 0.
type LC struct {
	weighted bool
	r        rotor
}

// Name implements Policy.
func (p *LC) Name() string {
	if p.weighted {
		return "wlc"
	}
	return "lc"
}

// Traits implements Describer: content-blind behind a layer-4 switch (LVS).
func (p *LC) Traits() Traits {
	return Traits{Placement: Blind, Front: FrontL4, Active: true}
}

// Pick implements Policy.
func (p *LC) Pick(c *Cluster, r *Request) Decision {
	if !p.weighted {
		return decide(p.r.leastActive(c))
	}
	return decide(p.r.leastWeighted(c))
}

// Done implements Policy.
func (p *LC) Done(*Cluster, int, *Request) {}
