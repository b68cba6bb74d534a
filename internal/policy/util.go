package policy

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

// leastActive returns the usable node with the fewest in-flight requests
// (ties to the lowest index), or -1.
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

// mix64 is the splitmix64 finaliser.
func mix64(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// decide is the plain decision for node i (or None for -1).
func decide(i int) Decision {
	if i < 0 {
		return None
	}
	return Decision{Node: i, Fetch: -1}
}
