package policy

import "shoal/internal/cluster/placement"

// view caches the list of usable node indices for one Cluster.Version, so
// policies that choose among usable nodes do not rescan health on every
// request. Callers bump Cluster.Version on any membership, weight or health
// change (see Cluster); the node count is checked too in case they forget
// after an append.
type view struct {
	valid   bool
	version uint64
	n       int
	usable  []int
}

// refresh recomputes the view when the cluster changed and reports whether it
// did.
func (v *view) refresh(c *Cluster) bool {
	if v.valid && v.version == c.Version && v.n == len(c.Nodes) {
		return false
	}
	v.valid, v.version, v.n = true, c.Version, len(c.Nodes)
	v.usable = v.usable[:0]
	for i := range c.Nodes {
		if c.Nodes[i].Usable() {
			v.usable = append(v.usable, i)
		}
	}
	return true
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// rotor breaks ties between equally loaded nodes round-robin, as HAProxy's
// leastconn and nginx's least_conn do: among the least loaded usable nodes
// it takes the first at or after its position (wrapping) and moves past it.
// A lowest-index rule sends every request to node 0 whenever the nodes
// show equal loads — the common case when requests finish before the next
// one arrives, which is how a live front often sees them (see
// docs/parity.md) — while the rotation spreads those picks evenly. It is
// deterministic: equal inputs, equal picks, so the simulator stays a pure
// function of its trace. The zero value starts at node 0.
type rotor struct{ next int }

// leastActive returns the usable node with the fewest in-flight requests
// (Node.Active), ties broken by the rotation, or -1 when none is usable.
func (t *rotor) leastActive(c *Cluster) int {
	n := len(c.Nodes)
	best := -1
	for k := range n {
		i := (t.next + k) % n
		nd := &c.Nodes[i]
		if nd.Usable() && (best < 0 || nd.Active < c.Nodes[best].Active) {
			best = i
		}
	}
	if best >= 0 {
		t.next = best + 1
	}
	return best
}

// leastWeighted is leastActive on Active/Weight (wlc), compared by
// cross-multiplication as ip_vs_wlc does (no division, no rounding).
func (t *rotor) leastWeighted(c *Cluster) int {
	n := len(c.Nodes)
	best := -1
	for k := range n {
		i := (t.next + k) % n
		nd := &c.Nodes[i]
		if !nd.Usable() {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &c.Nodes[best]
		if int64(nd.Active)*int64(b.Weight) < int64(b.Active)*int64(nd.Weight) {
			best = i
		}
	}
	if best >= 0 {
		t.next = best + 1
	}
	return best
}

// leastActive returns the usable node with the fewest in-flight requests
// (ties to the lowest index), or -1: p2c's fallback when health changed
// under it, where no rotation state is kept.
func leastActive(c *Cluster) int {
	best := -1
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if !n.Usable() {
			continue
		}
		if best < 0 || n.Active < c.Nodes[best].Active {
			best = i
		}
	}
	return best
}

// hashString is 64-bit FNV-1a finished with a splitmix64 mix: fast, no
// allocation, fixed (so placements are identical across runs and machines),
// and well spread in the high bits the ring search uses.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix64(h)
}

// mix64 is the splitmix64 finaliser, placement.Mix64.
func mix64(h uint64) uint64 { return placement.Mix64(h) }

// decide is the plain decision for node i (or None for -1).
func decide(i int) Decision {
	if i < 0 {
		return None
	}
	return Decision{Node: i, Fetch: -1}
}
