package cache

// lru is a byte-budgeted least-recently-used cache: a map plus an intrusive
// doubly linked list with a sentinel, so Get, Add and eviction are O(1).
type lru[V any] struct {
	common[V]
	root entry[V] // root.next = most recent, root.prev = least recent
}

func newLRU[V any](cfg Config[V]) *lru[V] {
	c := &lru[V]{common: common[V]{cfg: cfg, m: make(map[string]*entry[V])}}
	c.root.next, c.root.prev = &c.root, &c.root
	return c
}

func (c *lru[V]) unlink(e *entry[V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *lru[V]) pushFront(e *entry[V]) {
	e.prev, e.next = &c.root, c.root.next
	e.prev.next, e.next.prev = e, e
}

func (c *lru[V]) Get(key string) (V, bool) {
	e := c.lookup(key)
	if e == nil {
		var zero V
		return zero, false
	}
	if c.root.next != e {
		c.unlink(e)
		c.pushFront(e)
	}
	return e.val, true
}

func (c *lru[V]) Add(key string, v V, size int64) bool {
	e, exists := c.m[key]
	if !exists {
		c.st.MissBytes += max(size, 0)
	}
	if !c.admissible(size) {
		if exists {
			c.drop(e)
		}
		return false
	}
	if exists {
		c.bytes += size - e.size
		e.val, e.size = v, size
		c.unlink(e)
		c.pushFront(e) // at the front, so eviction below never picks it
	} else {
		e = c.alloc()
		e.key, e.val, e.size = key, v, size
		c.m[key] = e
		c.bytes += size
		c.pushFront(e)
	}
	for c.bytes > c.cfg.Capacity {
		victim := c.root.prev
		c.evicted(victim)
		c.drop(victim)
	}
	return true
}

func (c *lru[V]) drop(e *entry[V]) {
	c.unlink(e)
	c.forget(e)
}

func (c *lru[V]) Remove(key string) bool {
	e, ok := c.m[key]
	if ok {
		c.drop(e)
	}
	return ok
}
