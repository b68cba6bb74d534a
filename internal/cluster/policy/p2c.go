package policy

import "math/rand/v2"

// P2C is the power of two choices (Mitzenmacher 2001; SPEC §3): draw two
// distinct usable nodes at random and take the one with fewer in-flight
// requests (the first drawn on a tie). It needs no shared state between
// front-ends and avoids the herd effect of pure least-connections. Randomness
// is a PCG source seeded from Config.Seed, so a seed fixes the sequence.
//
// Build it with New("p2c", cfg); the zero value is not ready for use.
type P2C struct {
	rng *rand.Rand
	v   view
}

func newP2C(seed uint64) *P2C {
	return &P2C{rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))}
}

// Name implements Policy.
func (p *P2C) Name() string { return "p2c" }

// Traits implements Describer: content-blind behind a layer-4 switch.
func (p *P2C) Traits() Traits {
	return Traits{Placement: Blind, Front: FrontL4, Active: true, Keys: []string{"seed"}}
}

// Pick implements Policy.
func (p *P2C) Pick(c *Cluster, r *Request) Decision {
	p.v.refresh(c)
	u := p.v.usable
	switch len(u) {
	case 0:
		return None
	case 1:
		if !c.Nodes[u[0]].Usable() {
			return decide(leastActive(c))
		}
		return decide(u[0])
	}
	a := p.rng.IntN(len(u))
	b := p.rng.IntN(len(u) - 1)
	if b >= a {
		b++
	}
	if !c.Nodes[u[a]].Usable() || !c.Nodes[u[b]].Usable() {
		// Health changed without a Version bump: rescan and retry once.
		if p.v.valid {
			p.v.valid = false
			return p.Pick(c, r)
		}
		return decide(leastActive(c))
	}
	if c.Nodes[u[b]].Active < c.Nodes[u[a]].Active {
		return decide(u[b])
	}
	return decide(u[a])
}

// Done implements Policy.
func (p *P2C) Done(*Cluster, int, *Request) {}
