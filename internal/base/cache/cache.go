// Package cache holds the byte-budgeted replacement policies of a node's
// memory cache (SPEC §2 "Content and caches"): LRU, GDSF (Cherkasova's
// Greedy-Dual-Size-Frequency) and cluster GDSF ("cgdsf", Weblins, seed 001 §3
// "Cache replacement policy"). The same code runs in the server and in the
// simulator, so the policies are deterministic and allocation-free on Get.
//
// A Cache is not safe for concurrent use; wrap it with NewSync to share it.
package cache

import (
	"errors"
	"fmt"
	"sync"
)

// Cache is a byte-budgeted key/value cache with one replacement policy.
type Cache[V any] interface {
	// Get returns the value for key, counting a hit (and its bytes) or a miss,
	// and updates the policy's recency/frequency state.
	Get(key string) (V, bool)
	// Peek returns the value for key without touching stats or policy state.
	Peek(key string) (V, bool)
	// Add caches v under key with the given size in bytes, evicting as needed.
	// It returns false, and caches nothing, when size is negative, exceeds
	// MaxObject (if set) or exceeds Capacity; a stale entry for key is then
	// dropped. Adding a key that is not cached counts size in Stats.MissBytes
	// (the usual pattern is Get → miss → fetch → Add).
	Add(key string, v V, size int64) bool
	// Remove drops key; it reports whether key was cached. OnEvict is not called.
	Remove(key string) bool
	Len() int        // number of cached objects
	Bytes() int64    // sum of cached sizes
	Capacity() int64 // byte budget
	Stats() Stats    // counters since creation
}

// Stats counts cache traffic. Object hit ratio = Hits/(Hits+Misses); byte hit
// ratio = HitBytes/(HitBytes+MissBytes) (SPEC §2 asks for both).
type Stats struct {
	Hits, Misses        int64 // Get outcomes
	HitBytes, MissBytes int64 // sizes of Get hits; sizes given to Add for uncached keys
	Evictions           int64 // entries dropped to make room (not Remove, not replacement)
}

// ObjectHitRatio is Hits/(Hits+Misses), or 0 before any Get.
func (s Stats) ObjectHitRatio() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// ByteHitRatio is HitBytes/(HitBytes+MissBytes), or 0 before any traffic.
func (s Stats) ByteHitRatio() float64 {
	if s.HitBytes+s.MissBytes == 0 {
		return 0
	}
	return float64(s.HitBytes) / float64(s.HitBytes+s.MissBytes)
}

// Served counts where a server's answered file bytes came from: the byte
// hit ratio of a live node as the simulator defines it (sim.Row's
// byte_hit_ratio), which Stats cannot give since it sees neither the files
// above MaxObject (always from disk) nor the objects a node fetched from a
// peer's memory. It is declared once here and carried, inline, by the
// node's /.shoal/status (node.Status), the front's copy of it
// (control.Status) and /metrics (shoal_node_served_bytes_total).
type Served struct {
	// ObjectBytes counts file body bytes sent to clients (200 and 206
	// answers; not HEAD or 304). MemoryBytes counts those of them that
	// came from a memory, the node's cache or the memory of the peer it
	// fetched them from, rather than a disk. MemoryBytes/ObjectBytes is the
	// byte hit ratio.
	ObjectBytes int64 `json:"object_bytes"`
	MemoryBytes int64 `json:"memory_bytes"`
}

// ByteHitRatio is MemoryBytes/ObjectBytes, or 0 before any bytes.
func (s Served) ByteHitRatio() float64 {
	if s.ObjectBytes == 0 {
		return 0
	}
	return float64(s.MemoryBytes) / float64(s.ObjectBytes)
}

// Config selects and tunes a policy. Zero values of the optional fields take
// the documented defaults.
type Config[V any] struct {
	// Policy is "lru", "gdsf" or "cgdsf".
	Policy string
	// Capacity is the byte budget (> 0).
	Capacity int64
	// MaxObject is the largest object admitted, in bytes; 0 = no threshold
	// (SPEC §2: 500 KB in TB-CCRD, 100 KB in Weblins).
	MaxObject int64
	// OnEvict, if set, is called for each entry evicted to make room, before
	// Add returns. It must not call back into the cache.
	OnEvict func(key string, v V, size int64)
	// Cost is GDSF's retrieval cost C of an object (for cgdsf: the cost when
	// this is the cluster's last cached copy, i.e. a disk read); nil = 1,
	// which makes GDSF optimise the object hit ratio.
	Cost func(key string, size int64) float64
	// CachedElsewhere (cgdsf) reports whether another node's memory still
	// holds key. nil = never, which makes cgdsf behave exactly like gdsf.
	// It is called with the cache's state (and NewSync's lock) held, so it
	// must not call into this cache; consult a URL table, not peer locks.
	CachedElsewhere func(key string) bool
	// PeerCost (cgdsf) is C when CachedElsewhere(key) is true: re-fetching
	// from a peer's memory. nil = Cost/10. It should be below Cost so that
	// duplicates are evicted before singlets.
	PeerCost func(key string, size int64) float64
	// Admission (gdsf and cgdsf) makes a new object earn its place: the
	// cache counts every request, cached or not, in a frequency sketch
	// (TinyLFU's, sketch.go), and an Add that needs room evicts a victim
	// only while the newcomer's value, requests·C/S, beats the victim's;
	// otherwise Add caches nothing and returns false. Without it every
	// miss is cached and evicts something, so a working set larger than
	// the cache churns through it: on a replayed trace (each pass asks for
	// the same files) plain GDSF re-read about a quarter of the cache's
	// worth per pass (docs/benchmarks.md). Off (false) by default; the
	// nodes' stores and the front's mirrors of them turn it on.
	Admission bool
}

// DiskBytesPerIO is the size at which a disk read's transfer costs as much
// as the read itself on a cloud volume's baseline: 125 MB/s over 3,000
// IOPS (a gp3 volume's; the throttled disk of docs/benchmarks.md).
const DiskBytesPerIO = 125_000_000 / 3000

// DiskCost is a GDSF retrieval cost C for objects read from a disk: one
// I/O plus the transfer, in I/Os (1 + size/DiskBytesPerIO). It has the
// shape of Cao and Irani's "packet" cost (2 + size/536) that Cherkasova
// evaluates GDSF with (HPL-98-69R1 §4): GDSF keeps small popular objects
// first, as with C = 1, while a large object's priority F·C/S tends to
// F/DiskBytesPerIO, its frequency, so the popular large files that make
// most of the disk's bytes stay too. The nodes' object stores and the
// front's mirrors of them use it.
func DiskCost(_ string, size int64) float64 { return 1 + float64(max(size, 0))/DiskBytesPerIO }

// Policy names accepted by New.
const (
	LRU   = "lru"
	GDSF  = "gdsf"
	CGDSF = "cgdsf"
)

// ErrConfig is wrapped by New's validation errors.
var ErrConfig = errors.New("cache: invalid config")

// New builds an empty cache with cfg's policy.
func New[V any](cfg Config[V]) (Cache[V], error) {
	if cfg.Capacity <= 0 {
		return nil, fmt.Errorf("%w: capacity %d must be > 0", ErrConfig, cfg.Capacity)
	}
	if cfg.MaxObject < 0 {
		return nil, fmt.Errorf("%w: max object %d must be >= 0", ErrConfig, cfg.MaxObject)
	}
	switch cfg.Policy {
	case LRU:
		return newLRU(cfg), nil
	case GDSF, CGDSF:
		return newGDSF(cfg, cfg.Policy == CGDSF), nil
	}
	return nil, fmt.Errorf("%w: unknown policy %q (want lru, gdsf or cgdsf)", ErrConfig, cfg.Policy)
}

// entry is shared by the policies; LRU uses prev/next, GDSF the heap fields.
type entry[V any] struct {
	key        string
	val        V
	size       int64
	prev, next *entry[V] // LRU list; next also links the free list
	h          float64   // GDSF priority H = L + F·C/S
	base       float64   // L when H was last computed (cgdsf re-costing)
	freq       float64   // F: hits while cached, starting at 1
	seq        uint64    // access order; breaks H ties oldest-first
	idx        int       // position in the heap
	dup        bool      // cgdsf: C was the peer cost (another copy existed)
}

// common holds what all policies share: the index, budget, stats and a small
// free list of entries so steady-state Add does not allocate either.
type common[V any] struct {
	cfg   Config[V]
	m     map[string]*entry[V]
	bytes int64
	st    Stats
	free  *entry[V]
	nfree int
}

const maxFree = 1024

func (c *common[V]) admissible(size int64) bool {
	return size >= 0 && size <= c.cfg.Capacity && (c.cfg.MaxObject == 0 || size <= c.cfg.MaxObject)
}

func (c *common[V]) alloc() *entry[V] {
	if e := c.free; e != nil {
		c.free, e.next = e.next, nil
		c.nfree--
		return e
	}
	return new(entry[V])
}

func (c *common[V]) release(e *entry[V]) {
	*e = entry[V]{}
	if c.nfree < maxFree {
		e.next, c.free = c.free, e
		c.nfree++
	}
}

// lookup returns key's entry, or nil, and counts the hit or the miss: the
// bookkeeping half of every policy's Get.
func (c *common[V]) lookup(key string) *entry[V] {
	e := c.m[key]
	if e == nil {
		c.st.Misses++
		return nil
	}
	c.st.Hits++
	c.st.HitBytes += e.size
	return e
}

// forget does the index and budget half of removing e, after the policy
// has taken it out of its own order (list or heap).
func (c *common[V]) forget(e *entry[V]) {
	delete(c.m, e.key)
	c.bytes -= e.size
	c.release(e)
}

// evicted counts e as evicted and tells Config.OnEvict, before the policy
// drops it.
func (c *common[V]) evicted(e *entry[V]) {
	c.st.Evictions++
	if c.cfg.OnEvict != nil {
		c.cfg.OnEvict(e.key, e.val, e.size)
	}
}

func (c *common[V]) Peek(key string) (V, bool) {
	if e, ok := c.m[key]; ok {
		return e.val, true
	}
	var zero V
	return zero, false
}

func (c *common[V]) Len() int        { return len(c.m) }
func (c *common[V]) Bytes() int64    { return c.bytes }
func (c *common[V]) Capacity() int64 { return c.cfg.Capacity }
func (c *common[V]) Stats() Stats    { return c.st }

// syncCache serialises every call with one mutex (Get mutates policy state,
// so a read lock would not do).
type syncCache[V any] struct {
	mu sync.Mutex
	c  Cache[V]
}

// NewSync wraps c so that it is safe for concurrent use.
func NewSync[V any](c Cache[V]) Cache[V] { return &syncCache[V]{c: c} }

func (s *syncCache[V]) Get(key string) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Get(key)
}

func (s *syncCache[V]) Peek(key string) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Peek(key)
}

func (s *syncCache[V]) Add(key string, v V, size int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Add(key, v, size)
}

func (s *syncCache[V]) Remove(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Remove(key)
}

func (s *syncCache[V]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Len()
}

func (s *syncCache[V]) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Bytes()
}

func (s *syncCache[V]) Capacity() int64 { return s.c.Capacity() }

func (s *syncCache[V]) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Stats()
}

// Keys calls f with every cached key, in no particular order, without
// touching stats or policy state; f must not call into the cache. The
// node's cache digest (internal/cluster/peer, Summary Cache) is built from it.
func (c *common[V]) Keys(f func(key string)) {
	for k := range c.m {
		f(k)
	}
}

// Keys is common.Keys under the lock, for caches that have it.
func (s *syncCache[V]) Keys(f func(key string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.c.(interface{ Keys(func(string)) }); ok {
		k.Keys(f)
	}
}
