package control

import "shoal/internal/cluster/policy"

// Forget drops urls from the policy's per-URL tables (policy.Forgetter),
// under the cluster lock; policies without such tables ignore it. The
// publisher calls it with the URLs a new site version changed or removed.
func (c *Cluster) Forget(urls []string) {
	if len(urls) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.pol.(policy.Forgetter)
	if !ok {
		return
	}
	for _, u := range urls {
		f.Forget(u)
	}
}
