package store

import (
	"fmt"
	"os"
	"slices"

	"shoal/internal/base/offheap"
)

// Entry kinds.
const (
	kindLinked = 1 // body in a file the store does not own (Link)
	kindStored = 2 // body in a file of the disk tier (Create, Put)
)

// entry is the object of one key with a body in use: in the memory tier,
// linked or held, or read through a handle (a stored entry at rest is only
// its record in the index). Every field is guarded by Store.mu, except
// that what a handle reads (f, fd, off, first while ready, size, val)
// does not change while the entry's refs are above zero.
type entry struct {
	key  string
	hash uint64 // Store.hash(key)
	kind uint8
	size int64  // body bytes
	meta []byte // metadata; nil when not read yet (loadMeta)
	val  any    // Link's value

	f   *os.File // the open body file, nil when closed
	fd  int      // f's descriptor
	off int64    // where the body starts in f

	// Stored entries: the file's number, its record in the index (0 once
	// out of it) and its header's metadata region.
	id      uint64
	rec     offheap.Ref
	metaLen int
	metaCap int

	first   int32 // first arena block of an inline body, -1 none
	bodyAt  int32 // where the body starts in the blocks: after the metadata, when it is there
	inline  bool  // the body is (to be) held in the arena
	ready   bool  // the arena holds the whole body
	loading bool  // a Get is copying the body into the arena
	inMem   bool  // in the memory tier
	dead    bool  // out of the store (replaced, removed, evicted)
	refs    int32 // handles
}

// footprintExtra is what an entry of the memory tier costs beside its
// body and metadata: its Go objects (the store's entry and key, the
// policy's node and heap slot, two map slots: about 450 bytes, measured),
// doubled by the collector's headroom at the default GOGC of 100 (the
// heap grows to twice what is live between collections). Charged
// honestly, a budget of small objects is what the process grows by.
const footprintExtra = 1024

// Footprint is what an entry of a body of size bytes with meta bytes of
// metadata costs the memory tier: the body in whole 4 KiB pages (the page
// cache's unit, and the arena's block), the metadata and the entry's own
// structures. The simulator charges its nodes' caches the same way.
func Footprint(size int64, meta int) int64 {
	return (max(size, 0)+blockSize-1)/blockSize*blockSize + int64(meta) + footprintExtra
}

// Admissible reports whether the memory tier of a store built with cfg
// (defaults applied by Open) admits a body of size bytes with meta bytes of
// metadata: what the policy is offered is refused above MaxObject and
// above the budget. The simulator asks the same question.
func Admissible(cfg Config, size int64, meta int) bool {
	cfg.withDefaults()
	return cfg.MemoryBytes > 0 && size <= cfg.MaxObject && Footprint(size, meta) <= cfg.MemoryBytes
}

// metaSize is the metadata length the memory tier charges for e.
func (e *entry) metaSize() int {
	if e.meta != nil {
		return len(e.meta)
	}
	return e.metaLen
}

// admit offers e to the memory tier; the policy may evict others (their
// resources go to s.gone). An admitted body small enough to be inline gets
// arena blocks, filled by the caller (fill) unless already ready.
func (s *Store) admit(e *entry) {
	if s.mem == nil || s.closed || e.inMem || e.dead {
		return
	}
	if e.size > s.cfg.MaxObject || !s.mem.Add(e.key, e, Footprint(e.size, e.metaSize())) {
		return
	}
	e.inMem = true
	if s.arena == nil || e.size > s.cfg.InlineMax || e.inline {
		return
	}
	if e.size == 0 {
		e.inline, e.ready = true, true
		return
	}
	if first, ok := s.arena.alloc(blocksFor(e.size)); ok {
		e.first, e.inline = first, true
		s.metaInline(e)
	}
}

// metaInline moves e's metadata into its blocks, ahead of the body, when
// it fits in the last block's slack: it then costs no memory beyond the
// body's pages, and none in the Go heap (a small response's metadata is
// several times its body). The entry's Go slice then points into the
// arena, valid while the blocks are: handles and the entry keep them.
func (s *Store) metaInline(e *entry) {
	m := len(e.meta)
	if m == 0 || e.size == 0 || blocksFor(e.size+int64(m)) != blocksFor(e.size) {
		return
	}
	b := s.arena.block(e.first)
	copy(b, e.meta)
	e.meta, e.bodyAt = b[:m:m], int32(m)
}

// memEvicted is the memory tier's OnEvict: e leaves it to make room. A
// linked entry leaves the store with it; a stored one goes to rest.
func (s *Store) memEvicted(_ string, e *entry, _ int64) {
	e.inMem = false
	report := false
	if e.kind == kindLinked {
		if s.hot[e.hash] == e {
			delete(s.hot, e.hash)
		}
		e.dead, report = true, true
	}
	s.release(e, report)
}

// drop takes e out of the store: the hot entries, the memory tier and the
// index (Remove, replacement, eviction from the disk tier).
func (s *Store) drop(e *entry, report bool) {
	if s.hot[e.hash] == e {
		delete(s.hot, e.hash)
	}
	e.dead = true
	if e.inMem {
		s.mem.Remove(e.key)
		e.inMem = false
	}
	if e.rec != 0 {
		s.ix.remove(e.rec)
		e.rec = 0
	}
	s.release(e, report)
}

// dropRec takes the stored entry at rest r out of the index and deletes
// its file; report asks for OnEvict, which reads the key from the file.
func (s *Store) dropRec(r offheap.Ref, report bool) {
	id := s.ix.at(r).id
	s.ix.remove(r)
	s.gone = append(s.gone, goneEntry{unlink: s.path(id), evicted: report})
}

// displace drops whatever entry holds hash, for a new entry of the same
// key (or, rarely, of another key of the same hash).
func (s *Store) displace(hash uint64) {
	if e := s.hot[hash]; e != nil {
		s.drop(e, false)
	} else if r := s.coldRec(hash); r != 0 {
		s.dropRec(r, false)
	}
}

// record puts the new stored entry e, of a file of blocks 4 KiB blocks, in
// the index, first evicting the least recently used entries the disk
// tier's budget has no room for; false when it cannot hold it.
func (s *Store) record(e *entry, blocks int64) bool {
	if s.ix == nil || blocks*blockSize > s.cfg.DiskBytes || blocks >= 1<<32 {
		return false
	}
	for (s.ix.blocks+blocks)*blockSize > s.cfg.DiskBytes && s.ix.tail != 0 {
		r := s.ix.tail
		if o := s.hot[s.ix.hashOf(r)]; o != nil && o.rec == r {
			s.drop(o, true)
		} else {
			s.dropRec(r, true)
		}
		s.st.DiskEvictions++
	}
	r, err := s.ix.insert(e.hash, e.id, uint32(blocks), s.groupHash(e.key, e.hash))
	if err != nil {
		s.cfg.Logger.Warn("store: index", "key", e.key, "err", err)
		return false
	}
	e.rec = r
	return true
}

// release records what e no longer needs: outside the memory tier and
// without handles, its arena blocks are freed and its file dropped from
// the page cache and closed, and a stored entry goes to rest (its object
// leaves the hot entries); a dead stored entry's file is deleted. report
// asks for OnEvict. s.mu is held.
func (s *Store) release(e *entry, report bool) {
	g := goneEntry{key: e.key, evicted: report}
	if e.refs == 0 && !e.inMem {
		if e.first >= 0 {
			if e.bodyAt > 0 {
				e.meta = nil // it was in the blocks
			}
			s.arena.free(e.first)
			e.first, e.bodyAt = -1, 0
		}
		e.inline, e.ready = false, false
		if e.kind == kindStored && !e.dead {
			e.meta = nil // on disk; read again when wanted
			if s.hot[e.hash] == e {
				delete(s.hot, e.hash)
			}
		}
		if e.f != nil {
			// Without a memory tier the kernel keeps what it likes of
			// linked files.
			g.f, g.dropPages = e.f, s.cfg.MemoryBytes > 0 || e.kind == kindStored
			e.f, e.fd = nil, -1
		}
	}
	if e.dead && e.kind == kindStored && e.id != 0 {
		g.unlink, e.id = s.path(e.id), 0
	}
	if g.f != nil || g.unlink != "" || g.evicted {
		s.gone = append(s.gone, g)
	}
}

// unlock releases s.mu and then deals with what the operation displaced:
// page-cache drops, closes, deletes and OnEvict calls, none of which
// should hold up other requests.
func (s *Store) unlock() {
	if len(s.gone) == 0 { // a hit's Release: nothing displaced
		s.mu.Unlock()
		return
	}
	// The usual few go through a copy on the stack, so that s.gone keeps
	// its array and an operation that displaces something allocates
	// nothing for it.
	var buf [4]goneEntry
	g := s.gone
	if len(g) <= len(buf) {
		g = buf[:copy(buf[:], g)]
		clear(s.gone)
		s.gone = s.gone[:0]
	} else {
		s.gone = nil
	}
	s.mu.Unlock()
	for _, x := range g {
		if x.f != nil {
			if x.dropPages {
				dropCache(x.f, 0, 0)
			}
			x.f.Close()
		}
		if x.evicted && x.key == "" && x.unlink != "" && s.cfg.OnEvict != nil {
			x.key = s.keyOf(x.unlink) // an entry at rest: its key is in its file
		}
		if x.unlink != "" {
			if err := os.Remove(x.unlink); err != nil && !os.IsNotExist(err) {
				s.cfg.Logger.Warn("store: delete evicted body", "file", x.unlink, "err", err)
			}
		}
		if x.evicted && x.key != "" && s.cfg.OnEvict != nil {
			s.cfg.OnEvict(x.key)
		}
	}
}

// fill copies e's body from its file into its arena blocks, on behalf of
// the Get or Link that set e.loading (and holds a handle), then drops the
// file's pages: the arena is now the memory copy. It reports whether the
// body is ready.
func (s *Store) fill(e *entry) bool {
	err := s.arena.readFrom(e.first, int64(e.bodyAt), e.size, e.f, e.off)
	s.mu.Lock()
	e.loading = false
	e.ready = err == nil
	s.mu.Unlock()
	if err != nil {
		s.cfg.Logger.Warn("store: read body into memory", "key", e.key, "err", err)
		return false
	}
	dropCache(e.f, e.off, e.size)
	return true
}

// Link makes key's entry a body of size bytes read from f, a file the
// store does not own (the store takes f and closes it when the entry is
// gone), with metadata meta and an in-memory value val (not kept across
// restarts). It replaces any entry for key. The memory tier's policy
// decides whether the entry stays: if not, the returned handle still reads
// f, and f's pages are dropped from the page cache when it is released. A
// linked entry exists only while it is in the memory tier.
func (s *Store) Link(key string, f *os.File, size int64, meta []byte, val any) (Handle, error) {
	if len(key) == 0 || len(key) > MaxKey {
		f.Close()
		return Handle{}, fmt.Errorf("%w: %d bytes", ErrKey, len(key))
	}
	e := &entry{key: key, hash: s.hash(key), kind: kindLinked, size: size, meta: meta, val: val, f: f, fd: int(f.Fd()), first: -1}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f.Close()
		return Handle{}, ErrClosed
	}
	s.displace(e.hash)
	s.st.MissBytes += size
	s.admit(e)
	if e.inMem {
		s.hot[e.hash] = e
	} else {
		e.dead = true
	}
	load := e.first >= 0
	e.loading = load
	e.refs = 1
	h := Handle{s: s, e: e, meta: e.meta, mem: e.inMem, inline: e.ready}
	s.unlock()
	if load {
		h.inline = s.fill(e)
	}
	return h, nil
}

// Keys returns every key in the store, sorted (for tests and tools; it
// reads the key of each entry at rest from its file).
func (s *Store) Keys() []string {
	var ks []string
	s.Walk("", func(k string, _ int64) bool {
		ks = append(ks, k)
		return true
	})
	slices.Sort(ks)
	return ks
}

// Hold makes key's entry a body the caller has in memory (a body fetched
// from a peer, of a file this node does not store), with metadata meta and
// value val, if the memory tier's policy admits it; it reports whether it
// did. The store copies body: into the arena when it is small, else into
// an anonymous memory file (memfd) that sendfile reads like any other.
// Like a linked entry, a held one exists only in the memory tier.
func (s *Store) Hold(key string, body, meta []byte, val any) bool {
	size := int64(len(body))
	if len(key) == 0 || len(key) > MaxKey || s.mem == nil || size > s.cfg.MaxObject {
		return false
	}
	if s.arena == nil || size > s.cfg.InlineMax {
		f, err := memFile(key, body)
		if err != nil {
			s.cfg.Logger.Warn("store: hold a body in memory", "key", key, "err", err)
			return false
		}
		h, err := s.Link(key, f, size, meta, val)
		kept := err == nil && h.InMemory()
		h.Release()
		return kept
	}
	e := &entry{key: key, hash: s.hash(key), kind: kindLinked, size: size, meta: meta, val: val, fd: -1, first: -1}
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return false
	}
	s.displace(e.hash)
	s.st.MissBytes += size
	s.admit(e)
	if e.first >= 0 {
		s.arena.copyIn(e.first, int64(e.bodyAt), body)
		e.ready = true
	}
	if !e.ready {
		s.drop(e, false)
		return false
	}
	s.hot[e.hash] = e
	return true
}
