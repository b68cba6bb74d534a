package up

import (
	"shoal/internal/base/store"
)

// DefaultCacheMB is each node's cache when nothing sizes it: no --cache-mb,
// no --memory and no memory cgroup limit.
const DefaultCacheMB = 64

// planMemory sizes the nodes' caches when CacheMB is 0: from Memory, or
// else the memory cgroup's limit, the process's budget (store.PlanMemory)
// is split between the nodes; without either the caches take
// DefaultCacheMB. In-process nodes share one Go runtime, whose limit
// MemoryPlan.GoLimit names (the command applies it); node processes each
// plan their share (nodeMemory).
func (c *Config) planMemory() {
	if c.CacheMB != 0 {
		return
	}
	limit, src := c.Memory, "--memory"
	if limit <= 0 {
		limit, src, _ = store.CgroupLimit() // unreadable: no limit, the default caches
	}
	c.MemoryPlan = store.PlanMemory(limit, src, c.Nodes)
	c.CacheMB = DefaultCacheMB
	if c.MemoryPlan.Store > 0 {
		c.CacheMB = max(int(c.MemoryPlan.Store>>20), 1)
	}
}

// nodeMemory is the memory each node process may use when the caches were
// planned from a limit (0 otherwise): what the front's process leaves,
// shared equally. The node process plans its own cache from it
// (--memory), and CacheMB becomes that cache, for the front's mirrors.
func (c *Config) nodeMemory() int64 {
	if c.MemoryPlan.Limit <= 0 {
		return 0
	}
	share := max((c.MemoryPlan.Limit-store.ProcessOverhead)/int64(c.Nodes), store.ProcessOverhead+store.MinStore)
	c.CacheMB = max(int(store.PlanMemory(share, "", 1).Store>>20), 1)
	return share
}
