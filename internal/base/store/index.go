package store

import (
	"shoal/internal/base/offheap"
)

// The disk tier's index: what the store keeps in memory of each stored
// entry that nobody is using. A cache's disk holds far more entries than
// its memory tier (a million small responses in a few GiB), and an index
// of Go objects (an entry, its key string, map and list nodes: about 500
// bytes each, doubled by the collector's headroom) grew the process by
// more than the memory tier it served. So an entry at rest is a 32-byte
// record of an off-heap map (internal/base/offheap) keyed by its key's
// 64-bit hash: no pointers for the collector to scan, no heap growth to
// pace it by, about 40 bytes of resident memory per entry with the map's
// table, and at most DiskBytes/4 KiB entries (each file takes a block at
// least). The key itself is only in the file's header (disk.go), read
// when the entry is used; an entry in use (in the memory tier, or read
// through a handle) has its Go object, with the key, in Store.hot.

// rec is one stored entry in the index, beside its key hash.
type rec struct {
	id     uint64 // the file's number (Store.path)
	blocks uint32 // the file's size in 4 KiB blocks
	group  uint32 // the hash of the key's group (groupHash), Walk's filter
	// The disk tier's LRU list: prev is the next more recently used
	// entry, next the next less recently used.
	prev, next offheap.Ref
}

// index is the disk tier's records and their LRU list. Not safe for
// concurrent use (Store.mu guards it).
type index struct {
	m      *offheap.Map[rec]
	head   offheap.Ref // most recently used
	tail   offheap.Ref // least recently used
	blocks int64       // the records' blocks
}

func newIndex() (*index, error) {
	m, err := offheap.New[rec]()
	if err != nil {
		return nil, err
	}
	return &index{m: m}, nil
}

// close returns the memory; the index is unusable afterwards.
func (x *index) close() { x.m.Close() }

// len is the number of records.
func (x *index) len() int { return x.m.Len() }

// find returns the record of hash, or 0.
func (x *index) find(hash uint64) offheap.Ref { return x.m.Find(hash) }

// at is record r; valid until the next insert.
func (x *index) at(r offheap.Ref) *rec { return x.m.At(r) }

// hashOf is record r's key hash.
func (x *index) hashOf(r offheap.Ref) uint64 { return x.m.Key(r) }

// insert adds a record for hash (which must not be in the index) as the
// most recently used, and returns it.
func (x *index) insert(hash, id uint64, blocks, group uint32) (offheap.Ref, error) {
	r, err := x.m.Insert(hash, rec{id: id, blocks: blocks, group: group})
	if err != nil {
		return 0, err
	}
	x.blocks += int64(blocks)
	x.pushFront(r)
	return r, nil
}

// remove drops record r.
func (x *index) remove(r offheap.Ref) {
	x.unlink(r)
	x.blocks -= int64(x.at(r).blocks)
	x.m.Delete(r)
}

// touch makes r the most recently used.
func (x *index) touch(r offheap.Ref) {
	if x.head != r {
		x.unlink(r)
		x.pushFront(r)
	}
}

func (x *index) pushFront(r offheap.Ref) {
	p := x.at(r)
	p.prev, p.next = 0, x.head
	if x.head != 0 {
		x.at(x.head).prev = r
	}
	x.head = r
	if x.tail == 0 {
		x.tail = r
	}
}

func (x *index) unlink(r offheap.Ref) {
	p := x.at(r)
	if p.prev != 0 {
		x.at(p.prev).next = p.next
	} else {
		x.head = p.next
	}
	if p.next != 0 {
		x.at(p.next).prev = p.prev
	} else {
		x.tail = p.prev
	}
	p.prev, p.next = 0, 0
}

// each calls f with every record and its key hash, in no particular
// order, until f returns false.
func (x *index) each(f func(hash uint64, p *rec) bool) {
	x.m.All(func(_ offheap.Ref, hash uint64, p *rec) bool { return f(hash, p) })
}
