package policy

// holderLeast is the usable node storing url (Cluster.Storage) with the
// fewest active requests, or -1: no Storage (every node stores every
// file), no usable holder, or the best holder overloaded by LARD's rule
// (the caller's tlow/thigh) — the caller then takes the least loaded node
// of all, which fetches the file from a holder (cheaper than a queue).
func holderLeast(c *Cluster, url string, tlow, thigh int) int {
	if c.Storage == nil {
		return -1
	}
	var buf [16]int
	best := -1
	for _, i := range c.Holders(buf[:0], url) {
		if i < len(c.Nodes) && c.Nodes[i].Usable() && (best < 0 || c.Nodes[i].Active < c.Nodes[best].Active) {
			best = i
		}
	}
	if best < 0 || lardOverloaded(c, c.Nodes[best].Active, tlow, thigh) {
		return -1
	}
	return best
}
