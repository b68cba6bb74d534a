package policy

import (
	"strconv"
	"time"

	"shoal/internal/base/cache"
)

// NodeCacheMirrors returns a Config.NewReplacer whose mirrors evict in the
// order of nodes running an internal/base/cache cache with cfg (policy, the
// per-node budget as Capacity, GDSF's Cost and PeerCost), so tbccrd's and
// weblins' front-side mirrors agree with the nodes' caches (seed 000
// §2.2.2(c): the front evicts "by the agreed replacement policy"). The
// simulator passes its nodes' settings, `shoal up` its nodes' (gdsf by
// default, cost 1); a front that mirrors gdsf nodes in LRU order believes
// objects cached that the nodes dropped (docs/parity.md).
//
// Each mirror is backed by a cache of the same policy and budget, so no
// replacement logic lives here; its MaxObject is 0, as the policy applies
// its own no-cache threshold. The policy's dense URL ids become string
// keys; a cgdsf mirror's CachedElsewhere asks the other mirrors, as the
// front knows only its mirrors. For "lru" (or "") it returns nil: NewLRU,
// the policies' default, is that order already.
func NodeCacheMirrors(cfg cache.Config[struct{}]) func(node int) Replacer {
	return nodeCacheMirrors(cfg, nil)
}

// nodeCacheMirrors is NodeCacheMirrors with per-node budgets (nil: every
// node's is cfg.Capacity), for Config.NodeCacheBytes.
func nodeCacheMirrors(cfg cache.Config[struct{}], capacity func(node int) int64) func(node int) Replacer {
	if cfg.Policy == "" || cfg.Policy == cache.LRU {
		return nil
	}
	m := &cacheMirrors{cfg: cfg, capacity: capacity}
	return m.newReplacer
}

// cacheMirrors holds one cluster's mirrors (NodeCacheMirrors).
type cacheMirrors struct {
	reps     []*cacheReplacer
	keys     []string // id → key, shared so Hit does not allocate
	cfg      cache.Config[struct{}]
	capacity func(node int) int64 // nil: cfg.Capacity
}

// newReplacer is a Config.NewReplacer.
func (m *cacheMirrors) newReplacer(node int) Replacer {
	r := &cacheReplacer{m: m}
	cfg := m.cfg
	if m.capacity != nil {
		cfg.Capacity = m.capacity(node)
	}
	cfg.MaxObject = 0 // the policy applies its own no-cache threshold
	cfg.OnEvict = func(key string, _ struct{}, _ int64) { r.pending = append(r.pending, key) }
	if cfg.Policy == cache.CGDSF {
		cfg.CachedElsewhere = func(key string) bool {
			for j, o := range m.reps {
				if j != node && o != nil {
					if _, ok := o.c.Peek(key); ok {
						return true
					}
				}
			}
			return false
		}
	}
	c, err := cache.New(cfg)
	if err != nil {
		// A policy or budget the nodes' caches would refuse too: fall back
		// to the policies' default order rather than fail mid-run.
		return NewLRU()
	}
	r.c = c
	for len(m.reps) <= node {
		m.reps = append(m.reps, nil)
	}
	m.reps[node] = r
	return r
}

func (m *cacheMirrors) key(id int32) string {
	for int(id) >= len(m.keys) {
		m.keys = append(m.keys, strconv.Itoa(len(m.keys)))
	}
	return m.keys[id]
}

// cacheReplacer adapts a cache.Cache to Replacer. The cache has the
// mirror's budget, so when an Add overflows it the cache itself picks the
// victims (OnEvict); Victim hands them to the mirror one by one.
type cacheReplacer struct {
	m       *cacheMirrors
	c       cache.Cache[struct{}]
	pending []string
}

// Add implements Replacer.
func (r *cacheReplacer) Add(id int32, size int64, _ time.Duration) {
	r.c.Add(r.m.key(id), struct{}{}, max(size, 0))
}

// Resize implements Resizer: the backing cache re-inserts the object with
// its new size, keeping its frequency (internal/base/cache's Add of a cached key),
// and names victims if it now overflows.
func (r *cacheReplacer) Resize(id int32, size int64) {
	if k := r.m.key(id); peeked(r.c, k) {
		r.c.Add(k, struct{}{}, size)
	}
}

// Holds implements Admitter: whether the mirror's cache took id (a cache
// with Config.Admission turns newcomers away).
func (r *cacheReplacer) Holds(id int32) bool { return peeked(r.c, r.m.key(id)) }

// Hit implements Replacer.
func (r *cacheReplacer) Hit(id int32, _ time.Duration) { r.c.Get(r.m.key(id)) }

// Remove implements Replacer.
func (r *cacheReplacer) Remove(id int32) {
	k := r.m.key(id)
	r.c.Remove(k)
	for i, p := range r.pending {
		if p == k {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			break
		}
	}
}

// Victim implements Replacer: the oldest victim the cache chose and the
// mirror has not removed yet.
func (r *cacheReplacer) Victim() (int32, bool) {
	for len(r.pending) > 0 {
		id, err := strconv.Atoi(r.pending[0])
		if err == nil {
			return int32(id), true
		}
		r.pending = r.pending[1:]
	}
	return 0, false
}

// peeked reports whether c holds key, without counting an access.
func peeked(c cache.Cache[struct{}], key string) bool {
	_, ok := c.Peek(key)
	return ok
}
