package cache

// gdsf implements Greedy-Dual-Size-Frequency (L. Cherkasova, "Improving WWW
// proxies performance with Greedy-Dual-Size-Frequency caching policy",
// HP Labs HPL-98-69R1, 1998; SPEC §2) and, with cluster set, the cluster-aware
// variant of Weblins (seed 001, §3 "Cache replacement policy").
//
// Every cached object p has a priority
//
//	H(p) = L + F(p)·C(p)/S(p)
//
// with F the number of hits since p entered the cache (1 on insertion), C its
// retrieval cost, S its size and L the inflating clock: on each eviction L is
// set to the victim's H, so objects that stop being used age relative to newly
// computed priorities. The victim is always the object with the lowest H
// (ties: least recently accessed first). Small, popular, costly objects stay.
//
// Cluster GDSF: Weblins (seed 001) lists "adapting the traditional greedy
// dual-size frequency (GDSF) replacement algorithm to suit cluster
// environments" as contribution (a) (§1), and its §3 "Cache replacement
// policy" names the value of a file as its size, popularity, time of reference
// and "the cost of bringing the file into the cache". (The stored seed text
// keeps only that opening paragraph of §3; the rule below is SPEC §2's
// summary of it.) In a cooperative cluster that cost is low when another
// node's memory still holds the file (a peer fetch) and is the disk cost when
// this node holds the last cached copy. So C(p) = PeerCost when
// CachedElsewhere(p), else Cost, and replicas are evicted before singlets,
// which keeps more distinct files in the cluster's aggregate memory. C is
// evaluated when p is inserted or hit; because a peer may drop its copy later,
// a victim whose C was the peer cost is re-checked before eviction and, if it
// has become the last copy, re-prioritised with the disk cost (at most once
// per access, so eviction always terminates).
type gdsf[V any] struct {
	common[V]
	cluster bool
	sketch  *sketch // Config.Admission's request counts; nil without it
	clock   float64 // L
	seq     uint64
	heap    []*entry[V] // 4-ary min-heap on (h, seq)
}

func newGDSF[V any](cfg Config[V], cluster bool) *gdsf[V] {
	c := &gdsf[V]{common: common[V]{cfg: cfg, m: make(map[string]*entry[V])}, cluster: cluster}
	if cfg.Admission {
		c.sketch = newSketch(cfg.Capacity / admissionObject)
	}
	return c
}

// admissionObject is the object size the admission sketch is sized for: a
// page, so a cache of small objects still counts them apart.
const admissionObject = 4096

// value is what admission compares: key's recent requests times its
// retrieval cost over its size (GDSF's F·C/S without the clock, since the
// sketch's counts age by themselves); dup (cgdsf) prices a copy another
// node's memory holds at the peer cost, as prioritise does.
func (c *gdsf[V]) value(key string, size int64, dup bool) float64 {
	return float64(c.sketch.estimate(key)) * max(c.cost(key, size, dup), 0) / float64(max(size, 1))
}

// cost is C for key: the disk cost, or for a copy held elsewhere (dup,
// cgdsf) the peer cost (default a tenth of the disk cost).
func (c *gdsf[V]) cost(key string, size int64, dup bool) float64 {
	disk := 1.0
	if c.cfg.Cost != nil {
		disk = c.cfg.Cost(key, size)
	}
	switch {
	case !dup:
		return disk
	case c.cfg.PeerCost != nil:
		return c.cfg.PeerCost(key, size)
	}
	return disk / 10
}

// diskCost is C for the last cached copy (and for plain GDSF).
func (c *gdsf[V]) diskCost(e *entry[V]) float64 {
	if c.cfg.Cost == nil {
		return 1
	}
	return c.cfg.Cost(e.key, e.size)
}

// prioritise recomputes e's cost and priority against the current clock.
func (c *gdsf[V]) prioritise(e *entry[V]) {
	e.dup = c.cluster && c.cfg.CachedElsewhere != nil && c.cfg.CachedElsewhere(e.key)
	cost := c.cost(e.key, e.size, e.dup)
	e.base = c.clock
	e.h = c.clock + e.freq*max(cost, 0)/float64(max(e.size, 1)) // H ≥ L keeps L monotone
	c.seq++
	e.seq = c.seq
}

func (c *gdsf[V]) Get(key string) (V, bool) {
	e := c.lookup(key)
	if e == nil {
		var zero V
		return zero, false
	}
	if c.sketch != nil {
		c.sketch.add(key)
	}
	e.freq++
	c.prioritise(e)
	c.fix(e.idx)
	return e.val, true
}

func (c *gdsf[V]) Add(key string, v V, size int64) bool {
	freq := 1.0
	if e, ok := c.m[key]; ok {
		// Replacement: keep the frequency, re-insert with the new size.
		freq = e.freq
		c.drop(e)
	} else {
		c.st.MissBytes += max(size, 0)
		if c.sketch != nil {
			c.sketch.add(key)
		}
	}
	if !c.admissible(size) {
		return false
	}
	if c.sketch != nil && c.bytes+size > c.cfg.Capacity {
		if !c.makeRoom(key, size) {
			return false
		}
	}
	for c.bytes+size > c.cfg.Capacity {
		c.evict()
	}
	e := c.alloc()
	e.key, e.val, e.size, e.freq = key, v, size, freq
	c.m[key] = e
	c.bytes += size
	c.prioritise(e)
	c.push(e)
	return true
}

// makeRoom is Config.Admission's test: it evicts in priority order while
// the newcomer key (size bytes) is worth more than the next victim, and
// reports whether that made room. A tie keeps the cached object, so a
// steady working set larger than the cache stays put instead of churning;
// victims already evicted when a later one wins stay evicted (their room
// goes to the next newcomer).
func (c *gdsf[V]) makeRoom(key string, size int64) bool {
	dup := c.cluster && c.cfg.CachedElsewhere != nil && c.cfg.CachedElsewhere(key)
	v := c.value(key, size, dup)
	for c.bytes+size > c.cfg.Capacity {
		e := c.heap[0]
		if c.value(e.key, e.size, e.dup) >= v {
			return false
		}
		c.evict()
	}
	return true
}

// evict removes the lowest-priority entry and advances the clock to its H.
func (c *gdsf[V]) evict() {
	for {
		e := c.heap[0]
		if e.dup && c.cluster && !c.cfg.CachedElsewhere(e.key) {
			// The other copy is gone: this is now the last one, so it is
			// worth the disk cost again. H keeps its original clock base.
			e.dup = false
			e.h = e.base + e.freq*max(c.diskCost(e), 0)/float64(max(e.size, 1))
			c.fix(0)
			continue
		}
		c.clock = e.h
		c.evicted(e)
		c.drop(e)
		return
	}
}

func (c *gdsf[V]) drop(e *entry[V]) {
	c.removeAt(e.idx)
	c.forget(e)
}

func (c *gdsf[V]) Remove(key string) bool {
	e, ok := c.m[key]
	if ok {
		c.drop(e)
	}
	return ok
}

// The heap is 4-ary: half the depth of a binary heap and its children share a
// cache line, which is why it is the usual choice for timer/priority queues.

func (c *gdsf[V]) less(a, b *entry[V]) bool {
	return a.h < b.h || a.h == b.h && a.seq < b.seq
}

func (c *gdsf[V]) push(e *entry[V]) {
	e.idx = len(c.heap)
	c.heap = append(c.heap, e)
	c.up(e.idx)
}

func (c *gdsf[V]) removeAt(i int) {
	last := len(c.heap) - 1
	if i != last {
		c.heap[i] = c.heap[last]
		c.heap[i].idx = i
	}
	c.heap[last] = nil
	c.heap = c.heap[:last]
	if i < last {
		c.fix(i)
	}
}

func (c *gdsf[V]) fix(i int) {
	if !c.up(i) {
		c.down(i)
	}
}

func (c *gdsf[V]) up(i int) bool {
	h := c.heap
	e := h[i]
	moved := false
	for i > 0 {
		p := (i - 1) / 4
		if !c.less(e, h[p]) {
			break
		}
		h[i] = h[p]
		h[i].idx = i
		i = p
		moved = true
	}
	h[i] = e
	e.idx = i
	return moved
}

func (c *gdsf[V]) down(i int) {
	h := c.heap
	n := len(h)
	e := h[i]
	for {
		first := 4*i + 1
		if first >= n {
			break
		}
		best := first
		for k := first + 1; k < first+4 && k < n; k++ {
			if c.less(h[k], h[best]) {
				best = k
			}
		}
		if !c.less(h[best], e) {
			break
		}
		h[i] = h[best]
		h[i].idx = i
		i = best
	}
	h[i] = e
	e.idx = i
}
