package policy

// lvsWRR is the LVS weighted round-robin scheduler exactly as seed 004 §4
// gives it (SPEC §3):
//
//	while (true) {
//	    i = (i + 1) mod n;
//	    if (i == 0) { cw = cw - gcd(S); if (cw <= 0) { cw = max(S); if (cw == 0) return NULL; } }
//	    if (W(Si) >= cw) return Si;
//	}
//
// i starts at -1 and cw at 0. gcd and max cover the positive weights only; a
// weight of 0 takes a server out of service. It is shared by wrr, gwrr (at
// both levels) and dfwrr.
type lvsWRR struct {
	i, cw    int
	gcd, max int
}

func newLVSWRR() lvsWRR { return lvsWRR{i: -1} }

// setWeights recomputes gcd and max after a weight change. Like the Linux
// ip_vs_wrr module it keeps the position and clamps cw to the new max instead
// of restarting, so frequent changes do not favour the first server.
func (s *lvsWRR) setWeights(w []int) {
	s.gcd, s.max = 0, 0
	for _, x := range w {
		if x > 0 {
			s.gcd = gcd(s.gcd, x)
			s.max = max(s.max, x)
		}
	}
	if s.cw > s.max {
		s.cw = s.max
	}
	if s.i >= len(w) {
		s.i = -1
	}
}

// next runs the seed's loop over weights w and returns a position in w, or
// -1. When nodes is non-nil, position k is also skipped unless
// nodes[idx(k)].Usable() holds (idx nil = identity): a guard against a caller
// that changed health without bumping Cluster.Version. The loop is bounded
// (a full cycle of cw values over all positions) so stale weights can never
// spin forever.
func (s *lvsWRR) next(w []int, nodes []Node, idx []int) int {
	n := len(w)
	if s.max == 0 || n == 0 {
		return -1
	}
	for steps := n * (s.max/s.gcd + 1); steps >= 0; steps-- {
		s.i = (s.i + 1) % n
		if s.i == 0 {
			s.cw -= s.gcd
			if s.cw <= 0 {
				s.cw = s.max
				if s.cw == 0 {
					return -1
				}
			}
		}
		if w[s.i] > 0 && w[s.i] >= s.cw {
			if nodes != nil {
				j := s.i
				if idx != nil {
					j = idx[s.i]
				}
				if !nodes[j].Usable() {
					continue
				}
			}
			return s.i
		}
	}
	return -1
}

// WRR is LVS weighted round robin (seed 004 §4, SPEC §3): node i gets
// Weight/Σweights of the requests, interleaved; weight 0, down and removed
// nodes get none, and with no usable node Pick returns None. gcd and max are
// recomputed when Cluster.Version changes. Weights 4, 3, 2 give a a b a b c a b c.
type WRR struct {
	s   lvsWRR
	v   view
	w   []int
	ini bool
}

// Name implements Policy.
func (p *WRR) Name() string { return "wrr" }

// Traits implements Describer: content-blind behind a layer-4 switch (LVS).
func (p *WRR) Traits() Traits {
	return Traits{Placement: Blind, Front: FrontL4}
}

// Pick implements Policy.
func (p *WRR) Pick(c *Cluster, r *Request) Decision {
	if !p.ini {
		p.s, p.ini = newLVSWRR(), true
	}
	if p.v.refresh(c) {
		p.w = effectiveWeights(c, p.w)
		p.s.setWeights(p.w)
	}
	return decide(p.s.next(p.w, c.Nodes, nil))
}

// Done implements Policy.
func (p *WRR) Done(*Cluster, int, *Request) {}

// effectiveWeights is each node's weight, 0 for a node that is not usable.
func effectiveWeights(c *Cluster, w []int) []int {
	w = w[:0]
	for i := range c.Nodes {
		x := 0
		if c.Nodes[i].Usable() {
			x = c.Nodes[i].Weight
		}
		w = append(w, x)
	}
	return w
}

// RR is plain round robin over usable nodes (the baseline of seeds 000 and
// 004): i = (i+1) mod n, skipping nodes that are down, removed or drained
// to weight 0.
type RR struct{ next int }

// Name implements Policy.
func (p *RR) Name() string { return "rr" }

// Traits implements Describer: content-blind behind a layer-4 switch.
func (p *RR) Traits() Traits {
	return Traits{Placement: Blind, Front: FrontL4}
}

// Pick implements Policy.
func (p *RR) Pick(c *Cluster, r *Request) Decision {
	n := len(c.Nodes)
	for k := 0; k < n; k++ {
		i := p.next % n
		p.next = i + 1
		if c.Nodes[i].Usable() {
			return decide(i)
		}
	}
	return None
}

// Done implements Policy.
func (p *RR) Done(*Cluster, int, *Request) {}
