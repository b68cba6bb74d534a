package policy

import "time"

// Replacer orders one node's cached objects for eviction. tbccrd and weblins
// keep a mirror of every node's memory cache at the front (seed 000 §2.2.1:
// the front manages the back-ends' caches centrally), and the mirror must
// evict in the same order as the node itself, so the node's replacement
// policy is pluggable: LRU by default (seed 000 §3.3.1), GDSF or cluster GDSF
// when the nodes run those. Objects are named by dense ids (0, 1, 2, … in
// order of first sight) so an implementation can keep its state in slices
// instead of string maps. Ids stay below Config.MaxURLs: when a URL leaves
// the policy's bounded table, Remove is called for it on every node caching
// it before its id names another URL.
type Replacer interface {
	// Add records that object id, of size bytes, entered the cache at now.
	Add(id int32, size int64, now time.Duration)
	// Hit records an access to cached object id at now.
	Hit(id int32, now time.Duration)
	// Remove forgets id (a no-op if it is not cached).
	Remove(id int32)
	// Victim returns the object to evict next, without removing it, or
	// false when the cache is empty.
	Victim() (int32, bool)
}

// Resizer is implemented by a Replacer whose order depends on object sizes
// (NodeCacheMirrors' GDSF ones): Resize records that cached object id's
// size turned out to be size, learned after it was added (a relayed
// response's Content-Length), without counting an access. An order that
// ignores sizes (LRU) need not implement it.
type Resizer interface {
	Resize(id int32, size int64)
}

// LRU is the least-recently-used Replacer: the victim is the object with the
// oldest access. It is a doubly-linked list threaded through two slices
// indexed by id (slot 0 is the sentinel, id k lives in slot k+1), so every
// operation is O(1) with no map and no allocation once the slices have grown.
type LRU struct {
	prev, next []int32 // -1: not in the list
}

// NewLRU returns an empty LRU.
func NewLRU() *LRU { return &LRU{prev: []int32{0}, next: []int32{0}} }

func (l *LRU) grow(slot int32) {
	for int32(len(l.next)) <= slot {
		l.prev = append(l.prev, -1)
		l.next = append(l.next, -1)
	}
}

func (l *LRU) unlink(s int32) {
	p, n := l.prev[s], l.next[s]
	l.next[p], l.prev[n] = n, p
	l.prev[s], l.next[s] = -1, -1
}

func (l *LRU) pushFront(s int32) {
	n := l.next[0]
	l.prev[s], l.next[s] = 0, n
	l.prev[n], l.next[0] = s, s
}

// Add implements Replacer.
func (l *LRU) Add(id int32, _ int64, _ time.Duration) {
	s := id + 1
	l.grow(s)
	if l.next[s] >= 0 {
		l.unlink(s)
	}
	l.pushFront(s)
}

// Hit implements Replacer.
func (l *LRU) Hit(id int32, _ time.Duration) {
	if s := id + 1; int(s) < len(l.next) && l.next[s] >= 0 {
		l.unlink(s)
		l.pushFront(s)
	}
}

// Remove implements Replacer.
func (l *LRU) Remove(id int32) {
	if s := id + 1; int(s) < len(l.next) && l.next[s] >= 0 {
		l.unlink(s)
	}
}

// Victim implements Replacer.
func (l *LRU) Victim() (int32, bool) {
	if l.prev[0] == 0 {
		return 0, false
	}
	return l.prev[0] - 1, true
}
