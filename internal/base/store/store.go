// Package store is a node's object store: one index of named bodies with a
// memory tier and a disk tier, shared by the two things a node serves, the
// files of its sites and the HTTP responses a CDN edge stores (SPEC §2
// "Content and caches"; seed 003's PoP storage devices).
//
// # One copy of each byte
//
// Bodies never live in the Go heap, so the collector neither scans nor
// copies them and the heap stays a few MiB whatever the budget (a heap
// holding the cache close to GOMEMLIMIT made the collector run constantly).
// The memory tier is the set of entries the replacement policy admitted
// (internal/base/cache's LRU, GDSF or cluster GDSF, with only this package's
// metadata as values), charged by Footprint against Config.MemoryBytes.
// Under GDSF a body read on a miss enters only if it is worth more than
// what it would evict (cache.Config.Admission, a TinyLFU-style frequency
// sketch): a working set larger than the tier then stays put instead of
// churning through it, and a body turned away is sent from the page cache
// once and dropped. The tier's bodies are held in one of two places:
//
//   - Small bodies (up to Config.InlineMax, 16 KiB by default) are copied
//     into an off-heap arena (anonymous mmap, 4 KiB blocks chained per
//     object, arena.go) and their page-cache copy is dropped with
//     posix_fadvise(DONTNEED): a hit copies them into the response buffer,
//     so a whole response goes out in one write.
//   - Larger bodies stay in the kernel's page cache, where reading their
//     file put them: the entry keeps the file open and a hit sends the
//     bytes with sendfile(2) (Sender). Eviction drops the pages with
//     posix_fadvise(DONTNEED), and a body the policy did not admit is
//     dropped when its last reader is done, so what the kernel keeps is
//     mostly what the policy chose: pages sendfile(2) queued that socket
//     buffers still hold survive DONTNEED and stay for the kernel's LRU.
//     That remainder is left on purpose: on the trace in a memory cgroup,
//     copying turned-away bodies so that none survive read more from disk,
//     not less (docs/benchmarks.md). Resident reports what mincore(2) says
//     is resident.
//
// Nothing else holds the bytes: the arena's freed blocks are returned to the
// kernel with madvise(DONTNEED), and a memory cgroup charges the arena and
// the page cache alike, so the process fits a budget it can compute
// (Budget, from the cgroup's limit).
//
// # Two kinds of entries
//
// A linked entry (Link) has its body in a file the store does not own: a
// site file, opened by the node confined to its root. It exists only while
// it is in the memory tier; eviction removes it.
//
// A stored entry (Create, Put) has its body in a file of the store, under
// Config.Dir, written as it streams in and visible only once committed; the
// disk tier holds every stored entry, bounded by Config.DiskBytes (least
// recently used first out), and the memory tier holds the ones the policy
// admitted. The file begins with a header holding the key and the
// metadata blob (disk.go), so the disk tier survives a restart: Open reads
// the headers back and drops files whose header does not check.
//
// # What an entry costs
//
// A stored entry nobody uses (outside the memory tier, no handle) is a
// 32-byte record of the disk tier's index, outside the Go heap and without
// its key (index.go): about 40 bytes of memory per entry, whatever the key,
// and at most one per 4 KiB of DiskBytes. Only entries in use have a Go
// object with their key and metadata; the memory tier's are charged to
// its budget by Footprint.
//
// # API
//
//	s, err := store.Open(store.Config{Dir: dir, MemoryBytes: 24 << 20, DiskBytes: 1 << 30})
//	// store a response: metadata (say the response head and its freshness)
//	// and a body of known size, or -1 for unknown, streamed from r
//	err = s.Put(key, meta, size, r)       // or w, _ := s.Create(key, meta, size); io.Copy(w, r); w.Commit()
//	h, ok := s.Get(key)                   // ref-counted handle; 0 allocations on a memory hit
//	defer h.Release()
//	h.Meta(); h.Size(); h.ReadAt(p, off)  // or, on a connection:
//	snd := store.NewSender(conn)          // once per connection
//	snd.Send(h, off, n)                   // sendfile from the page cache, or a copy from memory
//	s.SetMeta(key, meta)                  // new metadata, body untouched (304 revalidation)
//	s.Remove(key); s.Walk(prefix, f)      // purge, the CDN directory's walk (WalkMeta: with the metadata)
//	s.Stats()                             // hits and misses, bytes by tier
//	// Config.OnEvict(key) is called, outside the store's lock, when an
//	// entry leaves the store to make room (not on Remove or replacement).
//
// A Handle stays valid after its entry is replaced, removed or evicted: the
// open file and the arena blocks it reads are freed at its Release.
package store

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"os"
	"strings"
	"sync"

	"shoal/internal/base/cache"
	"shoal/internal/base/offheap"
)

// Config configures a Store. Zero fields take the defaults named.
type Config struct {
	// Dir holds the disk tier: stored bodies, one file each. "" means no
	// disk tier: Create and Put fail with ErrNoDisk, and Link still works
	// (a node serving only its site files needs no directory).
	Dir string
	// DiskBytes bounds the disk tier (file sizes rounded up to 4 KiB
	// blocks). Default DefaultDiskBytes.
	DiskBytes int64
	// MemoryBytes is the memory tier's budget, arena and page cache
	// together, charged by Footprint. Default DefaultMemoryBytes; negative
	// turns the memory tier off (every hit is a disk hit).
	MemoryBytes int64
	// Policy is the memory tier's replacement policy: cache.LRU, cache.GDSF
	// or cache.CGDSF. Default cache.GDSF.
	Policy string
	// MaxObject is the largest body the memory tier admits. Default
	// DefaultMaxObject: an eighth of MemoryBytes, at least 500 KB, so large
	// files are cached when they fit, the policy weighing their size
	// (GDSF) against the rest.
	MaxObject int64
	// InlineMax is the largest body held ready in the off-heap arena;
	// larger ones are served from the page cache with sendfile. Default
	// DefaultInlineMax; negative: nothing inline.
	InlineMax int64
	// InlineBytes bounds the arena, part of MemoryBytes: a body that finds
	// it full stays in the page cache. Default (0) and at most MemoryBytes;
	// negative: no arena, every body stays in the page cache. The arena is
	// anonymous memory the kernel cannot reclaim, so a budget planned from
	// a cgroup's limit bounds it (Plan.Inline).
	InlineBytes int64
	// Cost is GDSF's retrieval cost of a body (cache.Config.Cost). Default
	// cache.DiskCost: a disk read and its transfer.
	Cost func(key string, size int64) float64
	// NoAdmission turns off the memory tier's admission (cache.Config's
	// Admission, on by default under GDSF and cluster GDSF): with it off,
	// every body read is cached and evicts what it needs, so a working set
	// larger than the tier churns through it.
	NoAdmission bool
	// CachedElsewhere and PeerCost are cluster GDSF's (cache.Config).
	CachedElsewhere func(key string) bool
	PeerCost        func(key string, size int64) float64
	// OnEvict is called with the key of each entry that left the store to
	// make room: a stored entry pushed out of the disk tier, a linked one
	// out of the memory tier. It runs outside the store's lock and may call
	// the store.
	OnEvict func(key string)
	// Logger receives what goes wrong with files. Default slog.Default().
	Logger *slog.Logger
}

// Defaults for Config.
const (
	DefaultDiskBytes      = 1 << 30
	DefaultMemoryBytes    = 64 << 20
	DefaultMaxObjectShare = 8
	MinMaxObject          = 500 << 10
	DefaultInlineMax      = 16 << 10
)

// Limits on what an entry may carry.
const (
	MaxKey  = 8 << 10
	MaxMeta = 64 << 10
)

// Errors.
var (
	ErrNoDisk   = errors.New("store: no disk tier (Config.Dir is empty)")
	ErrTooLarge = errors.New("store: body larger than the disk tier")
	ErrShort    = errors.New("store: body length differs from the size announced")
	ErrKey      = errors.New("store: key empty or too long")
	ErrMeta     = errors.New("store: metadata too long")
	ErrNotFound = errors.New("store: no such key")
	ErrClosed   = errors.New("store: closed")
)

// DefaultMaxObject is MaxObject's default for c's MemoryBytes: an eighth
// of the budget (DefaultMaxObjectShare), and at least MinMaxObject (TB-CCRD's
// 500 KB threshold, seed 000) when the budget holds it. The simulator asks
// it too, to admit what live nodes admit.
func (c Config) DefaultMaxObject() int64 {
	m := max(c.MemoryBytes, 0)
	return min(max(m/DefaultMaxObjectShare, MinMaxObject), m)
}

func (c *Config) withDefaults() {
	if c.DiskBytes <= 0 {
		c.DiskBytes = DefaultDiskBytes
	}
	if c.MemoryBytes == 0 {
		c.MemoryBytes = DefaultMemoryBytes
	}
	if c.Policy == "" {
		c.Policy = cache.GDSF
	}
	if c.Cost == nil {
		c.Cost = cache.DiskCost
	}
	if c.MaxObject <= 0 && c.MemoryBytes > 0 {
		c.MaxObject = c.DefaultMaxObject()
	}
	if c.InlineMax == 0 {
		c.InlineMax = DefaultInlineMax
	}
	if c.InlineBytes < 0 {
		c.InlineMax = -1
	}
	if c.InlineBytes <= 0 || c.InlineBytes > c.MemoryBytes {
		c.InlineBytes = c.MemoryBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Stats counts a store's traffic and contents.
type Stats struct {
	// Hits and Misses count Get; a hit is a MemoryHit when the body was in
	// the memory tier, else a DiskHit. HitBytes sums the hits' body sizes,
	// MemoryHitBytes those of the memory hits; MissBytes sums the bodies
	// that came in from outside (Link, Hold, Put): the byte hit ratio is
	// MemoryHitBytes/(MemoryHitBytes+MissBytes).
	Hits           int64 `json:"hits"`
	Misses         int64 `json:"misses"`
	MemoryHits     int64 `json:"memory_hits"`
	DiskHits       int64 `json:"disk_hits"`
	HitBytes       int64 `json:"hit_bytes"`
	MemoryHitBytes int64 `json:"memory_hit_bytes"`
	MissBytes      int64 `json:"miss_bytes"`
	// MemoryObjects and MemoryBytes are the memory tier's entries and their
	// Footprint; InlineBytes the arena blocks in use (memory-tier bodies
	// and bodies still read by handles after eviction).
	MemoryObjects int   `json:"memory_objects"`
	MemoryBytes   int64 `json:"memory_bytes"`
	InlineBytes   int64 `json:"inline_bytes"`
	// DiskObjects and DiskBytes are the disk tier's stored entries and
	// their files' blocks.
	DiskObjects int   `json:"disk_objects"`
	DiskBytes   int64 `json:"disk_bytes"`
	// Evictions counts entries pushed out of the memory tier,
	// DiskEvictions those pushed out of the disk tier.
	Evictions     int64 `json:"evictions"`
	DiskEvictions int64 `json:"disk_evictions"`
	// MemoryCapacity and DiskCapacity are the budgets in use.
	MemoryCapacity int64 `json:"memory_capacity"`
	DiskCapacity   int64 `json:"disk_capacity"`
}

// Store is the object store. It is safe for concurrent use.
type Store struct {
	cfg  Config
	seed maphash.Seed // Store.hash's

	mu sync.Mutex
	// hot holds, by key hash, the entries that have an object: those in
	// the memory tier, linked and held ones, and stored ones read through
	// a handle. A stored entry at rest is only its record in ix.
	hot    map[uint64]*entry
	ix     *index              // the disk tier (index.go); nil without Dir or once closed
	mem    cache.Cache[*entry] // nil when the memory tier is off
	arena  *arena              // nil when nothing is inline
	st     Stats
	nextID uint64
	closed bool
	// gone collects, under mu, what an operation displaced: resources to
	// free and keys to report, handled by unlock once mu is released.
	gone []goneEntry

	metaMu sync.Mutex // serialises metadata rewrites with their readers (disk.go)
}

// goneEntry is what left the memory tier or the store during an
// operation; unlock frees it and calls OnEvict.
type goneEntry struct {
	f         *os.File // to close, nil if none
	dropPages bool     // drop f's pages from the page cache first
	unlink    string   // stored file to delete, "" if none
	key       string   // the key, for OnEvict
	evicted   bool     // report to OnEvict (key, or the file's header when key is "")
}

// Open builds a store; with Dir it creates the folder or reads back the
// disk tier a previous run left there.
func Open(cfg Config) (*Store, error) {
	cfg.withDefaults()
	s := &Store{cfg: cfg, seed: maphash.MakeSeed(), hot: make(map[uint64]*entry)}
	if cfg.MemoryBytes > 0 {
		c, err := cache.New(cache.Config[*entry]{
			Policy: cfg.Policy, Capacity: cfg.MemoryBytes, MaxObject: Footprint(cfg.MaxObject, MaxMeta),
			OnEvict: s.memEvicted,
			Cost:    cfg.Cost, CachedElsewhere: cfg.CachedElsewhere, PeerCost: cfg.PeerCost,
			Admission: !cfg.NoAdmission,
		})
		if err != nil {
			return nil, fmt.Errorf("store: memory tier: %w", err)
		}
		s.mem = c
		if cfg.InlineMax > 0 {
			if s.arena, err = newArena(cfg.InlineBytes); err != nil {
				return nil, fmt.Errorf("store: %w", err)
			}
		}
	}
	if cfg.Dir != "" {
		ix, err := newIndex()
		if err != nil {
			return nil, err
		}
		s.ix = ix
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Config returns the configuration in use, defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// hash is the key's 64-bit hash (seeded per store): the index knows an
// entry at rest by it alone. Two keys of one hash (about one
// pair in 10^7 among a million keys) count as one key: storing either
// replaces the other, and Get reads the key back from the file, so it
// never answers one key with the other's body.
func (s *Store) hash(key string) uint64 {
	return maphash.String(s.seed, key)
}

// groupHash is the hash of key's group, its text before the first NUL
// byte (all of it when there is none): a cache key's Vary variants share
// their URL's group, so Walk finds them without reading other entries.
func (s *Store) groupHash(key string, hash uint64) uint32 {
	if i := strings.IndexByte(key, 0); i >= 0 {
		return uint32(s.hash(key[:i]))
	}
	return uint32(hash)
}

// hotEntry is key's entry if it has an object. s.mu is held.
func (s *Store) hotEntry(key string, hash uint64) *entry {
	if e := s.hot[hash]; e != nil && e.key == key {
		return e
	}
	return nil
}

// coldRec is the record of the stored entry at rest of hash, or 0. s.mu
// is held.
func (s *Store) coldRec(hash uint64) offheap.Ref {
	if s.ix == nil || s.hot[hash] != nil {
		return 0
	}
	return s.ix.find(hash)
}

// Get returns a handle on key's entry, or false. A hit on an entry outside
// the memory tier offers it to the memory tier (the policy decides). The
// handle must be released. A hit on the memory tier allocates nothing.
func (s *Store) Get(key string) (Handle, bool) {
	hash := s.hash(key)
	s.mu.Lock()
	e := s.hotEntry(key, hash)
	if e == nil {
		if r := s.coldRec(hash); r != 0 {
			id := s.ix.at(r).id
			s.mu.Unlock()
			if e = s.warm(key, hash, id); e == nil { // with s.mu held when not nil
				s.mu.Lock()
			}
		}
		if e == nil {
			s.st.Misses++
			if s.mem != nil {
				s.mem.Get(key) // the policy's miss count
			}
			s.mu.Unlock()
			return Handle{}, false
		}
	}
	s.st.Hits++
	s.st.HitBytes += e.size
	if e.inMem {
		s.st.MemoryHits++
		s.st.MemoryHitBytes += e.size
		s.mem.Get(key)
	} else {
		s.st.DiskHits++
		s.admit(e)
	}
	if e.rec != 0 {
		s.ix.touch(e.rec)
	}
	return s.handle(e, true)
}

// handle takes a handle on e, hot and live, whose lock (s.mu) the caller
// holds and handle releases; fill reads an inline body the memory tier
// just admitted into the arena.
func (s *Store) handle(e *entry, fill bool) (Handle, bool) {
	load := fill && e.first >= 0 && !e.ready && !e.loading
	e.loading = e.loading || load
	var err error
	if e.f == nil && !e.ready {
		err = s.openStored(e)
	}
	e.refs++
	h := Handle{s: s, e: e, meta: e.meta, mem: e.inMem, inline: e.ready}
	s.unlock()
	if err != nil {
		s.cfg.Logger.Warn("store: open stored body", "key", e.key, "err", err)
		h.Release()
		s.Remove(e.key)
		return Handle{}, false
	}
	if h.meta == nil && e.kind == kindStored {
		h.meta = s.loadMeta(e)
	}
	if load {
		h.inline = s.fill(e)
	}
	return h, true
}

// warm gives the stored entry at rest of key, file id, its object: it
// opens the file and reads its header, outside the lock (it may be a disk
// read), and checks that the header holds key and that the index still
// names that file. It returns the entry, hot, with s.mu held, or nil
// (without the lock) when key is not what the file holds.
func (s *Store) warm(key string, hash, id uint64) *entry {
	f, err := os.Open(s.path(id))
	if err != nil {
		return nil // removed or replaced meanwhile
	}
	s.metaMu.Lock()
	fh, err := readHeader(f)
	s.metaMu.Unlock()
	if err != nil || fh.key != key {
		f.Close()
		return nil
	}
	s.mu.Lock()
	if e := s.hotEntry(key, hash); e != nil {
		f.Close() // another Get was first
		return e
	}
	r := s.coldRec(hash)
	if s.closed || r == 0 || s.ix.at(r).id != id {
		s.mu.Unlock()
		f.Close()
		return nil
	}
	e := &entry{key: fh.key, hash: hash, kind: kindStored, size: fh.body, meta: fh.meta, f: f, fd: int(f.Fd()),
		off: fh.bodyOff, id: id, rec: r, metaLen: len(fh.meta), metaCap: fh.room, first: -1}
	s.hot[hash] = e
	return e
}

// hold takes a handle on key without counting a hit or moving the entry
// in either tier (SetMeta's, PeekMeta's); its body is readable with
// ReadAt.
func (s *Store) hold(key string) (Handle, error) {
	hash := s.hash(key)
	s.mu.Lock()
	e := s.hotEntry(key, hash)
	if e == nil {
		r := s.coldRec(hash)
		var id uint64
		if r != 0 {
			id = s.ix.at(r).id
		}
		s.mu.Unlock()
		if r != 0 {
			e = s.warm(key, hash, id)
		}
		if e == nil {
			return Handle{}, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
	}
	h, ok := s.handle(e, false)
	if !ok {
		return Handle{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return h, nil
}

// Peek reports whether key is in the store, and in its memory tier,
// without counting or moving anything.
func (s *Store) Peek(key string) (stored, inMemory bool) {
	hash := s.hash(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.hotEntry(key, hash); e != nil {
		return true, e.inMem
	}
	return s.coldRec(hash) != 0, false
}

// Remove drops key from the store (its stored file is deleted once no
// handle reads it) and reports whether it was there. OnEvict is not called.
func (s *Store) Remove(key string) bool {
	hash := s.hash(key)
	s.mu.Lock()
	found := true
	if e := s.hotEntry(key, hash); e != nil {
		s.drop(e, false)
	} else if r := s.coldRec(hash); r != 0 {
		s.dropRec(r, false)
	} else {
		found = false
	}
	s.unlock()
	return found
}

// Walk calls f with the key and body size of every entry whose key starts
// with prefix ("" for all), in no particular order, until f returns
// false. The keys of entries at rest are read from their files' headers,
// so a walk costs a read per stored entry, except when prefix reaches into
// a group (it has a NUL byte): only that group's entries are read then.
// The entries are collected first, so f may call the store; an entry
// added during the walk may be missed.
func (s *Store) Walk(prefix string, f func(key string, size int64) bool) {
	s.walk(prefix, false, func(key string, size int64, _ []byte) bool { return f(key, size) })
}

// WalkMeta is Walk with each entry's metadata, as PeekMeta reads it
// (without counting a hit or moving the entry), in the same read of an
// entry at rest: a purge or a directory that reads every entry's
// metadata reads each file once.
func (s *Store) WalkMeta(prefix string, f func(key string, size int64, meta []byte) bool) {
	s.walk(prefix, true, f)
}

func (s *Store) walk(prefix string, withMeta bool, f func(key string, size int64, meta []byte) bool) {
	type kv struct {
		k string
		n int64
	}
	var hot []kv
	var cold []uint64
	s.mu.Lock()
	for _, e := range s.hot {
		if strings.HasPrefix(e.key, prefix) {
			hot = append(hot, kv{e.key, e.size})
		}
	}
	if s.ix != nil {
		grouped, g := false, uint32(0)
		if i := strings.IndexByte(prefix, 0); i >= 0 {
			grouped, g = true, uint32(s.hash(prefix[:i]))
		}
		s.ix.each(func(hash uint64, p *rec) bool {
			if (!grouped || p.group == g) && s.hot[hash] == nil {
				cold = append(cold, p.id)
			}
			return true
		})
	}
	s.mu.Unlock()
	for _, x := range hot {
		var meta []byte
		if withMeta {
			var ok bool
			if meta, ok = s.PeekMeta(x.k); !ok {
				continue // gone meanwhile
			}
		}
		if !f(x.k, x.n, meta) {
			return
		}
	}
	for _, id := range cold {
		fh, ok := s.peekFile(id)
		if ok && strings.HasPrefix(fh.key, prefix) && !f(fh.key, fh.body, fh.meta) {
			return
		}
	}
}

// MemoryKeys calls f with the key of every entry in the memory tier,
// under the store's lock: f must not call the store. The node's cache
// digest (Summary Cache, internal/cluster/peer) is built from it.
func (s *Store) MemoryKeys(f func(key string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.hot {
		if e.inMem {
			f(e.key)
		}
	}
}

// Stats returns the counters and the tiers' contents.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	if s.mem != nil {
		st.MemoryObjects, st.MemoryBytes, st.MemoryCapacity = s.mem.Len(), s.mem.Bytes(), s.mem.Capacity()
		st.Evictions = s.mem.Stats().Evictions
	}
	if s.arena != nil {
		st.InlineBytes = int64(s.arena.used) * blockSize
	}
	if s.ix != nil {
		st.DiskObjects, st.DiskBytes, st.DiskCapacity = s.ix.len(), s.ix.blocks*blockSize, s.cfg.DiskBytes
	}
	return st
}

// Close releases the store's open files, arena and index once no handle
// holds them; stored files stay on disk for the next Open. Using the
// store after Close fails with ErrClosed (Get misses).
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, e := range s.hot {
		e.inMem = false
		s.release(e, false)
	}
	clear(s.hot)
	s.mem = nil
	if s.ix != nil {
		s.ix.close()
		s.ix = nil
	}
	s.unlock()
	return nil
}

// Resident reports how many bytes of the memory tier's bodies are in
// memory now: the arena's and, by mincore(2), the page cache's, up to
// limit entries (0: all). It is a check of the steering, for status pages
// and tests, and costs a mapping per file.
func (s *Store) Resident(limit int) (int64, error) {
	var hs []Handle
	s.mu.Lock()
	for _, e := range s.hot {
		if limit > 0 && len(hs) >= limit {
			break
		}
		if e.inMem && (e.ready || e.f != nil) {
			e.refs++
			hs = append(hs, Handle{s: s, e: e, inline: e.ready})
		}
	}
	s.mu.Unlock()
	var total int64
	var err error
	for i := range hs {
		h := &hs[i]
		if h.inline {
			total += h.e.size
		} else if n, rerr := resident(h.e.f, h.e.off, h.e.size); rerr == nil {
			total += min(n, h.e.size)
		} else {
			err = rerr
		}
		h.Release()
	}
	return total, err
}
