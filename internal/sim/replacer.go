package sim

import (
	"strconv"
	"time"

	"shoal/internal/cache"
	"shoal/internal/policy"
)

// mirrorReplacers lets tbccrd's and weblins' front-side mirrors of the node
// caches evict in the nodes' own order when the nodes run GDSF or cluster
// GDSF (seed 000 §2.2.2(c): the front evicts "by the agreed replacement
// policy"). policy.NewLRU covers LRU; for the others each mirror gets a
// cacheReplacer: a policy.Replacer backed by an internal/cache cache of the
// same policy and budget, so no replacement logic lives here. Object ids
// (the policy's dense URL ids) become string keys; cgdsf's CachedElsewhere
// asks the other mirrors, as the front knows only its mirrors.
type mirrorReplacers struct {
	reps []*cacheReplacer
	keys []string // id → key, shared so Hit does not allocate
	cfg  cache.Config[struct{}]
}

// newReplacer is a policy.Config.NewReplacer.
func (m *mirrorReplacers) newReplacer(node int) policy.Replacer {
	r := &cacheReplacer{m: m}
	cfg := m.cfg
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
		// Unreachable: newSim built the node caches with these settings.
		// Fall back to the policy's default order rather than fail mid-run.
		return policy.NewLRU()
	}
	r.c = c
	for len(m.reps) <= node {
		m.reps = append(m.reps, nil)
	}
	m.reps[node] = r
	return r
}

func (m *mirrorReplacers) key(id int32) string {
	for int(id) >= len(m.keys) {
		m.keys = append(m.keys, strconv.Itoa(len(m.keys)))
	}
	return m.keys[id]
}

// cacheReplacer adapts a cache.Cache to policy.Replacer. The cache has the
// mirror's budget, so when an Add overflows it the cache itself picks the
// victims (OnEvict); Victim hands them to the mirror one by one.
type cacheReplacer struct {
	m       *mirrorReplacers
	c       cache.Cache[struct{}]
	pending []string
}

// Add implements policy.Replacer.
func (r *cacheReplacer) Add(id int32, size int64, _ time.Duration) {
	r.c.Add(r.m.key(id), struct{}{}, max(size, 0))
}

// Hit implements policy.Replacer.
func (r *cacheReplacer) Hit(id int32, _ time.Duration) { r.c.Get(r.m.key(id)) }

// Remove implements policy.Replacer.
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

// Victim implements policy.Replacer: the oldest victim the cache chose and
// the mirror has not removed yet.
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
