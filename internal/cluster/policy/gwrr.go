package policy

// GWRR is group weighted round robin (seed 004 §3, SPEC §3): nodes are
// grouped by Node.Group (capacity class or function), groups are scheduled by
// LVS WRR on the group weight, and the node inside the chosen group by LVS WRR
// on the members' weights. A group's weight is Config.GroupWeights[group] when
// set, else the sum of its usable members' weights, so with default weights
// gwrr sends the same share to each node as wrr but keeps every group's
// members evenly loaded among themselves. Groups are ordered by their first
// member's index. A group with no usable member weighs 0.
//
// Build it with New("gwrr", cfg); the zero value is not ready for use.
type GWRR struct {
	groupWeights map[string]int
	v            view
	groups       []wrrGroup
	gw           []int
	gs           lvsWRR
	ini          bool
}

type wrrGroup struct {
	name    string
	members []int // node indices
	w       []int // members' effective weights
	s       lvsWRR
}

// Name implements Policy.
func (p *GWRR) Name() string { return "gwrr" }

// Traits implements Describer: content-blind behind a layer-4 switch.
func (p *GWRR) Traits() Traits {
	return Traits{Placement: Blind, Front: FrontL4, Keys: []string{"group_weights"}}
}

func (p *GWRR) rebuild(c *Cluster) {
	old := make(map[string]lvsWRR, len(p.groups))
	for _, g := range p.groups {
		old[g.name] = g.s
	}
	p.groups = p.groups[:0]
	pos := map[string]int{}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if n.Removed {
			continue
		}
		k, ok := pos[n.Group]
		if !ok {
			k = len(p.groups)
			pos[n.Group] = k
			s, had := old[n.Group]
			if !had {
				s = newLVSWRR()
			}
			p.groups = append(p.groups, wrrGroup{name: n.Group, s: s})
		}
		g := &p.groups[k]
		w := 0
		if n.Usable() {
			w = n.Weight
		}
		g.members = append(g.members, i)
		g.w = append(g.w, w)
	}
	p.gw = p.gw[:0]
	for k := range p.groups {
		g := &p.groups[k]
		g.s.setWeights(g.w)
		sum := 0
		for _, w := range g.w {
			sum += w
		}
		if ow, ok := p.groupWeights[g.name]; ok && sum > 0 {
			sum = ow
		}
		p.gw = append(p.gw, sum)
	}
	p.gs.setWeights(p.gw)
}

// Pick implements Policy.
func (p *GWRR) Pick(c *Cluster, r *Request) Decision {
	if !p.ini {
		p.gs, p.ini = newLVSWRR(), true
	}
	if p.v.refresh(c) {
		p.rebuild(c)
	}
	for tries := 0; tries <= len(p.groups); tries++ {
		k := p.gs.next(p.gw, nil, nil)
		if k < 0 {
			return None
		}
		g := &p.groups[k]
		if m := g.s.next(g.w, c.Nodes, g.members); m >= 0 {
			return decide(g.members[m])
		}
	}
	return None
}

// Done implements Policy.
func (p *GWRR) Done(*Cluster, int, *Request) {}
