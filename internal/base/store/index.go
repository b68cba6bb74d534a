package store

import (
	"fmt"
	"unsafe"
)

// The disk tier's index: what the store keeps in memory of each stored
// entry that nobody is using. A cache's disk holds far more entries than
// its memory tier (a million small responses in a few GiB), and an index
// of Go objects (an entry, its key string, map and list nodes: about 500
// bytes each, doubled by the collector's headroom) grew the process by
// more than the memory tier it served. So an entry at rest is a 32-byte
// record, found by its key's 64-bit hash through an open-addressing table
// of 4-byte slots, both in anonymous memory outside the Go heap: no
// pointers for the collector to scan, no heap growth to pace it by, about
// 40 bytes of resident memory per entry, and at most DiskBytes/4 KiB
// entries (each file takes a block at least). The key itself is only in
// the file's header (disk.go), read when the entry is used; an entry in
// use (in the memory tier, or read through a handle) has its Go object,
// with the key, in Store.hot. Written by hand as ATS's cache directory and
// nginx's keys zone are: the Go maps and the off-heap libraries around
// either hold Go pointers or keep the keys.

// rec is one stored entry in the index. Record numbers are 1-based; 0 is
// "none".
type rec struct {
	hash   uint64 // the key's hash (Store.hash); 0 marks a free record
	id     uint64 // the file's number (Store.path)
	blocks uint32 // the file's size in 4 KiB blocks
	group  uint32 // the hash of the key's group (groupHash), Walk's filter
	prev   uint32 // the disk tier's LRU list: the next more recently used
	next   uint32 // the next less recently used; also the free list
}

const recSize = int(unsafe.Sizeof(rec{}))

// index is the disk tier's records, their hash table and their LRU list.
// Not safe for concurrent use (Store.mu guards it).
type index struct {
	recs    []rec    // the records' mapping: recs[r-1] is record r
	recMem  []byte   // the mapping itself
	top     uint32   // records above top were never used
	free    uint32   // freed records, chained by next
	slots   []uint32 // open addressing, linear probing: record numbers
	slotMem []byte
	mask    uint64
	n       int    // records in use
	head    uint32 // most recently used
	tail    uint32 // least recently used
	blocks  int64  // the records' blocks
}

// Initial sizes; both grow by doubling.
const (
	indexRecs  = 1024
	indexSlots = 2048
)

func newIndex() (*index, error) {
	x := &index{}
	if err := x.growRecs(indexRecs); err != nil {
		return nil, err
	}
	if err := x.growSlots(indexSlots); err != nil {
		x.close()
		return nil, err
	}
	return x, nil
}

// growRecs moves the records to a mapping of n records.
func (x *index) growRecs(n int) error {
	mem, err := mapAnon(n * recSize)
	if err != nil {
		return fmt.Errorf("store: index of %d records: %w", n, err)
	}
	recs := unsafe.Slice((*rec)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	copy(recs, x.recs)
	if x.recMem != nil {
		unmapAnon(x.recMem)
	}
	x.recs, x.recMem = recs, mem
	return nil
}

// growSlots rebuilds the hash table with n slots (a power of two).
func (x *index) growSlots(n int) error {
	mem, err := mapAnon(n * 4)
	if err != nil {
		return fmt.Errorf("store: index table of %d slots: %w", n, err)
	}
	old, oldMem := x.slots, x.slotMem
	x.slots = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	x.slotMem, x.mask = mem, uint64(n-1)
	for _, r := range old {
		if r != 0 {
			i := x.recs[r-1].hash & x.mask
			for x.slots[i] != 0 {
				i = (i + 1) & x.mask
			}
			x.slots[i] = r
		}
	}
	if oldMem != nil {
		unmapAnon(oldMem)
	}
	return nil
}

// close returns the mappings; the index is unusable afterwards.
func (x *index) close() {
	if x.recMem != nil {
		unmapAnon(x.recMem)
	}
	if x.slotMem != nil {
		unmapAnon(x.slotMem)
	}
	*x = index{}
}

// at is record r.
func (x *index) at(r uint32) *rec { return &x.recs[r-1] }

// find returns the record of hash, or 0.
func (x *index) find(hash uint64) uint32 {
	for i := hash & x.mask; ; i = (i + 1) & x.mask {
		r := x.slots[i]
		if r == 0 || x.recs[r-1].hash == hash {
			return r
		}
	}
}

// insert adds a record for hash (which must not be in the index) at the
// most recent end of the LRU list and returns it.
func (x *index) insert(hash, id uint64, blocks, group uint32) (uint32, error) {
	if (x.n+1)*4 > len(x.slots)*3 {
		if err := x.growSlots(len(x.slots) * 2); err != nil {
			return 0, err
		}
	}
	r := x.free
	if r != 0 {
		x.free = x.recs[r-1].next
	} else {
		if int(x.top) == len(x.recs) {
			if err := x.growRecs(len(x.recs) * 2); err != nil {
				return 0, err
			}
		}
		x.top++
		r = x.top
	}
	x.recs[r-1] = rec{hash: hash, id: id, blocks: blocks, group: group}
	i := hash & x.mask
	for x.slots[i] != 0 {
		i = (i + 1) & x.mask
	}
	x.slots[i] = r
	x.n++
	x.blocks += int64(blocks)
	x.pushFront(r)
	return r, nil
}

// remove takes record r out of the table and the list and frees it.
func (x *index) remove(r uint32) {
	p := &x.recs[r-1]
	i := p.hash & x.mask
	for x.slots[i] != r {
		i = (i + 1) & x.mask
	}
	// Backward-shift deletion: move later members of the cluster that may
	// live at i into the hole, so that lookups need no tombstones.
	for j := i; ; {
		j = (j + 1) & x.mask
		s := x.slots[j]
		if s == 0 {
			break
		}
		k := x.recs[s-1].hash & x.mask
		if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue // s's home is between the hole and s: it stays
		}
		x.slots[i] = s
		i = j
	}
	x.slots[i] = 0
	x.unlink(r)
	x.n--
	x.blocks -= int64(p.blocks)
	*p = rec{next: x.free}
	x.free = r
}

// touch makes r the most recently used.
func (x *index) touch(r uint32) {
	if x.head != r {
		x.unlink(r)
		x.pushFront(r)
	}
}

func (x *index) pushFront(r uint32) {
	p := &x.recs[r-1]
	p.prev, p.next = 0, x.head
	if x.head != 0 {
		x.recs[x.head-1].prev = r
	}
	x.head = r
	if x.tail == 0 {
		x.tail = r
	}
}

func (x *index) unlink(r uint32) {
	p := &x.recs[r-1]
	if p.prev != 0 {
		x.recs[p.prev-1].next = p.next
	} else {
		x.head = p.next
	}
	if p.next != 0 {
		x.recs[p.next-1].prev = p.prev
	} else {
		x.tail = p.prev
	}
	p.prev, p.next = 0, 0
}

// each calls f with every record in use, in no particular order, until f
// returns false.
func (x *index) each(f func(r uint32, p *rec) bool) {
	for i := range x.top {
		if p := &x.recs[i]; p.hash != 0 && !f(i+1, p) {
			return
		}
	}
}
