package policy

import "time"

// Replacer orders one node's cached objects for eviction. tbccrd and weblins
// keep a mirror of every node's memory cache at the front (seed 000 §2.2.1:
// the front "manages the back-ends' caches centrally"), and the mirror must
// evict in the same order as the node itself, so the node's replacement
// policy is pluggable here: LRU by default (seed 000 §3.3.1), GDSF or cluster
// GDSF from the cache package when the nodes run those.
type Replacer interface {
	// Add records that key, of size bytes, entered the cache at now.
	Add(key string, size int64, now time.Duration)
	// Hit records an access to a cached key at now.
	Hit(key string, now time.Duration)
	// Remove forgets key.
	Remove(key string)
	// Victim returns the key that should be evicted next (without removing
	// it), or false when the cache is empty.
	Victim() (string, bool)
}

// LRU is the least-recently-used Replacer: the victim is the key with the
// oldest last access. It is an intrusive doubly-linked list plus a map, so
// Hit and Victim are O(1); entries are recycled through a free list.
type LRU struct {
	m    map[string]*lruEntry
	head lruEntry // sentinel: head.next is most recent, head.prev least
	free *lruEntry
}

type lruEntry struct {
	key        string
	prev, next *lruEntry
}

// NewLRU returns an empty LRU.
func NewLRU() *LRU {
	l := &LRU{m: map[string]*lruEntry{}}
	l.head.next, l.head.prev = &l.head, &l.head
	return l
}

func (l *LRU) pushFront(e *lruEntry) {
	e.prev, e.next = &l.head, l.head.next
	l.head.next.prev = e
	l.head.next = e
}

func unlink(e *lruEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// Add implements Replacer.
func (l *LRU) Add(key string, _ int64, now time.Duration) {
	if e, ok := l.m[key]; ok {
		unlink(e)
		l.pushFront(e)
		return
	}
	e := l.free
	if e != nil {
		l.free = e.next
		e.next = nil
	} else {
		e = &lruEntry{}
	}
	e.key = key
	l.m[key] = e
	l.pushFront(e)
}

// Hit implements Replacer.
func (l *LRU) Hit(key string, _ time.Duration) {
	if e, ok := l.m[key]; ok {
		unlink(e)
		l.pushFront(e)
	}
}

// Remove implements Replacer.
func (l *LRU) Remove(key string) {
	if e, ok := l.m[key]; ok {
		delete(l.m, key)
		unlink(e)
		e.key = ""
		e.next, l.free = l.free, e
	}
}

// Victim implements Replacer.
func (l *LRU) Victim() (string, bool) {
	if l.head.prev == &l.head {
		return "", false
	}
	return l.head.prev.key, true
}

// mirror is the front's copy of one node's memory cache: which URLs it holds,
// their accounted sizes, the byte budget (MAX_CACHE_SIZE) and the node's
// replacement order.
type mirror struct {
	limit int64
	used  int64
	size  map[string]int64
	repl  Replacer
}

func newMirror(limit int64, r Replacer) *mirror {
	return &mirror{limit: limit, size: map[string]int64{}, repl: r}
}

func (m *mirror) has(url string) bool { _, ok := m.size[url]; return ok }

// hit records an access to a cached url.
func (m *mirror) hit(url string, now time.Duration) { m.repl.Hit(url, now) }

// insert caches url with size bytes (an unknown size, < 0, is accounted as 0
// until a later insert learns it), then evicts in replacement order while
// Σ size > limit, calling evicted for every URL it drops. If the replacement
// order makes url itself the victim (or url alone exceeds the budget), url is
// not kept; insert reports whether it was.
func (m *mirror) insert(url string, size int64, now time.Duration, evicted func(string)) bool {
	size = max(size, 0)
	if size > m.limit {
		if m.has(url) {
			m.remove(url)
			evicted(url)
		}
		return false
	}
	if old, ok := m.size[url]; ok {
		m.used += size - old
		m.size[url] = size
		m.repl.Hit(url, now)
	} else {
		m.size[url] = size
		m.used += size
		m.repl.Add(url, size, now)
	}
	for m.used > m.limit {
		v, ok := m.repl.Victim()
		if !ok {
			break
		}
		m.remove(v)
		evicted(v)
	}
	return m.has(url)
}

// remove drops url from the mirror.
func (m *mirror) remove(url string) {
	if s, ok := m.size[url]; ok {
		m.used -= s
		delete(m.size, url)
	}
	m.repl.Remove(url) // unconditionally, so a stale victim cannot loop insert

}

// clear empties the mirror (the node restarted or left), calling evicted for
// every URL.
func (m *mirror) clear(evicted func(string)) {
	for u := range m.size {
		m.repl.Remove(u)
		evicted(u)
	}
	clear(m.size)
	m.used = 0
}
