package cdnsim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
)

// TransitStubConfig describes a transit-stub topology (Zegura, Calvert and
// Bhattacharjee, "How to model an internetwork", INFOCOM 1996, the GT-ITM
// model): transit domains of backbone routers joined by long-haul links,
// stub domains hanging off the transit routers (some multi-homed to a
// second transit router), and the matrix's locations in the stub domains.
// RTT is twice the shortest path's delay, so routes follow the hierarchy
// rather than the map: a second synthetic matrix independent of the
// great-circle one (Generate), with its path inflation and detours. The
// delays are one-way, in ms, drawn uniformly in [lo, hi].
type TransitStubConfig struct {
	// Locations is the number of locations (stub nodes).
	Locations int
	// Transits is the number of transit domains, TransitNodes the routers
	// in each, StubsPerRouter the stub domains hanging off each router.
	Transits, TransitNodes, StubsPerRouter int
	// InterDomainProb is the chance that two transit domains are linked
	// directly (a ring links them all in any case); IntraDomainProb the
	// chance of an extra link between two routers of one domain (a ring
	// links them in any case); MultiHomeProb the chance that a stub domain
	// has a second link to a router of another transit domain.
	InterDomainProb, IntraDomainProb, MultiHomeProb float64
	// InterMs, IntraMs, UplinkMs, MultiHomeMs and StubMs are the delay
	// ranges of long-haul links, links inside a transit domain, stub
	// uplinks, multi-homing links and links inside a stub domain; AccessMs
	// is the delay from a location to its stub router (the RTT within a
	// location is twice it).
	InterMs, IntraMs, UplinkMs, MultiHomeMs, StubMs, AccessMs [2]float64
	Seed                                                      uint64
}

// DefaultTransitStubConfig returns a topology for n locations: 10 transit
// domains of 5 routers with 3 stub domains each (150 stub domains), half
// the transit domains linked directly, 20 % of stub domains multi-homed;
// long-haul links 10–70 ms, inside a transit domain 2–15 ms, uplinks 1–8
// ms, inside a stub domain 0.5–4 ms, access 0.5–2 ms (one-way).
func DefaultTransitStubConfig(n int) TransitStubConfig {
	return TransitStubConfig{Locations: n, Transits: 10, TransitNodes: 5, StubsPerRouter: 3,
		InterDomainProb: 0.5, IntraDomainProb: 0.4, MultiHomeProb: 0.2,
		InterMs: [2]float64{10, 70}, IntraMs: [2]float64{2, 15}, UplinkMs: [2]float64{1, 8},
		MultiHomeMs: [2]float64{3, 20}, StubMs: [2]float64{0.5, 4}, AccessMs: [2]float64{0.5, 2}, Seed: 1}
}

// tsGraph is an undirected weighted graph as adjacency lists.
type tsGraph struct {
	adj [][]tsEdge
	rng *rand.Rand
}

type tsEdge struct {
	to int
	ms float64
}

func (g *tsGraph) node() int { g.adj = append(g.adj, nil); return len(g.adj) - 1 }

func (g *tsGraph) link(a, b int, r [2]float64) {
	ms := r[0] + (r[1]-r[0])*g.rng.Float64()
	g.adj[a] = append(g.adj[a], tsEdge{b, ms})
	g.adj[b] = append(g.adj[b], tsEdge{a, ms})
}

// ring links nodes in a ring and adds each other pair with probability p.
func (g *tsGraph) ring(nodes []int, p float64, r [2]float64) {
	for i := range nodes {
		if len(nodes) > 1 && (len(nodes) > 2 || i == 0) {
			g.link(nodes[i], nodes[(i+1)%len(nodes)], r)
		}
		for j := i + 2; j < len(nodes); j++ {
			if (i != 0 || j != len(nodes)-1) && g.rng.Float64() < p {
				g.link(nodes[i], nodes[j], r)
			}
		}
	}
}

// TransitStub builds the matrix of a transit-stub topology.
func TransitStub(c TransitStubConfig) (*Matrix, error) {
	stubs := c.Transits * c.TransitNodes * c.StubsPerRouter
	if c.Locations < 2 || c.Transits < 1 || c.TransitNodes < 1 || c.StubsPerRouter < 1 {
		return nil, fmt.Errorf("transit-stub: %d locations (want ≥ 2), %d transit domains of %d routers with %d stubs each (want ≥ 1)",
			c.Locations, c.Transits, c.TransitNodes, c.StubsPerRouter)
	}
	g := &tsGraph{rng: rand.New(rand.NewPCG(c.Seed, 0x75))}
	routers := make([][]int, c.Transits)
	for d := range routers {
		for range c.TransitNodes {
			routers[d] = append(routers[d], g.node())
		}
		g.ring(routers[d], c.IntraDomainProb, c.IntraMs)
	}
	gw := make([]int, c.Transits) // each domain's router for a long-haul link
	for d := range gw {
		gw[d] = routers[d][g.rng.IntN(c.TransitNodes)]
	}
	g.ring(gw, c.InterDomainProb, c.InterMs)
	// Stub domains: a stub router per domain, uplinked to its transit
	// router, sometimes to a second one elsewhere.
	stubRouter := make([]int, 0, stubs)
	for d := range routers {
		for _, r := range routers[d] {
			for range c.StubsPerRouter {
				s := g.node()
				g.link(s, r, c.UplinkMs)
				if c.Transits > 1 && g.rng.Float64() < c.MultiHomeProb {
					od := (d + 1 + g.rng.IntN(c.Transits-1)) % c.Transits
					g.link(s, routers[od][g.rng.IntN(c.TransitNodes)], c.MultiHomeMs)
				}
				stubRouter = append(stubRouter, s)
			}
		}
	}
	// Locations: spread over the stub domains, each one a node inside its
	// domain (StubMs from the stub router) with its access delay.
	names := make([]string, c.Locations)
	loc := make([]int, c.Locations)
	access := make([]float64, c.Locations)
	for i := range loc {
		sd := g.rng.IntN(stubs)
		n := g.node()
		g.link(n, stubRouter[sd], c.StubMs)
		loc[i] = n
		access[i] = c.AccessMs[0] + (c.AccessMs[1]-c.AccessMs[0])*g.rng.Float64()
		names[i] = fmt.Sprintf("ts%d-s%d", i, sd)
	}
	m := newMatrix(names)
	for a := range loc {
		dist := g.shortest(loc[a])
		m.rtt[a*len(loc)+a] = float32(2 * 2 * access[a])
		for b := a + 1; b < len(loc); b++ {
			if math.IsInf(dist[loc[b]], 1) {
				return nil, fmt.Errorf("transit-stub: %s and %s are not connected", names[a], names[b])
			}
			m.set(a, b, 2*(access[a]+dist[loc[b]]+access[b]))
		}
	}
	return m, nil
}

// shortest returns the delay from src to every node (Dijkstra).
func (g *tsGraph) shortest(src int) []float64 {
	dist := make([]float64, len(g.adj))
	for i := range dist {
		dist[i] = math.Inf(1)
	}
	dist[src] = 0
	q := &tsHeap{{src, 0}}
	for q.Len() > 0 {
		it := heap.Pop(q).(tsItem)
		if it.d > dist[it.n] {
			continue
		}
		for _, e := range g.adj[it.n] {
			if d := it.d + e.ms; d < dist[e.to] {
				dist[e.to] = d
				heap.Push(q, tsItem{e.to, d})
			}
		}
	}
	return dist
}

type tsItem struct {
	n int
	d float64
}

type tsHeap []tsItem

func (h tsHeap) Len() int           { return len(h) }
func (h tsHeap) Less(i, j int) bool { return h[i].d < h[j].d }
func (h tsHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *tsHeap) Push(x any)        { *h = append(*h, x.(tsItem)) }
func (h *tsHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
