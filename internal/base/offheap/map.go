// Package offheap holds tables that live outside the Go heap: a map from
// 64-bit keys to small fixed-size values, in anonymous memory.
//
// A cache indexes far more entries than it holds in memory: a million
// responses on a disk, a PoP's record of every copy it holds. As Go maps
// and objects, such an index costs the map's own overhead and, worse, the
// collector's: the heap grows to twice what is live before a collection,
// and every entry is marked at each. The same records in anonymous memory
// cost their bytes and nothing more, and the collector never sees them.
// Written by hand, as ATS's cache directory and nginx's keys zone are: the
// off-heap map libraries around hold Go pointers (so the collector must
// scan them), copy values through interfaces, or need cgo.
//
// Values must hold no pointers (Go pointers outside the heap would be
// invisible to the collector); New checks it.
package offheap

import (
	"fmt"
	"reflect"
	"unsafe"
)

// Ref names one entry of a Map, stable while the entry lives; 0 is none.
// Callers may keep Refs in their values (a list threaded through the
// entries, say), but not across Delete of that entry.
type Ref uint32

// Map maps uint64 keys to values of type V. Entries live in one mapping
// (12 + size of V bytes each, rounded to V's alignment), found through an
// open-addressing table of 4-byte slots with linear probing, kept at most
// three quarters full; both double when full. Keys are expected to be
// hashes already (their low bits pick the slot). Not safe for concurrent
// use.
type Map[V any] struct {
	ents    []ent[V] // ents[r-1] is entry r
	entMem  []byte
	top     uint32   // entries above top were never used
	free    []uint32 // deleted entries, for reuse
	live    []uint64 // a bit per entry: in use
	slots   []uint32 // entry numbers
	slotMem []byte
	mask    uint64
	n       int
}

type ent[V any] struct {
	key uint64
	v   V
}

// Initial sizes; both double when full.
const (
	initEnts  = 1024
	initSlots = 2048
)

// New returns an empty map; it fails when V holds pointers, or when the
// memory cannot be mapped.
func New[V any]() (*Map[V], error) {
	if t := reflect.TypeFor[V](); hasPointers(t) {
		return nil, fmt.Errorf("offheap: %v holds pointers", t)
	}
	m := &Map[V]{}
	if err := m.growEnts(initEnts); err != nil {
		return nil, err
	}
	if err := m.growSlots(initSlots); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// hasPointers reports whether values of t hold anything the collector
// would have to see.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}

func (m *Map[V]) growEnts(n int) error {
	size := int(unsafe.Sizeof(ent[V]{}))
	mem, err := mapAnon(n * size)
	if err != nil {
		return fmt.Errorf("offheap: %d entries: %w", n, err)
	}
	ents := unsafe.Slice((*ent[V])(unsafe.Pointer(unsafe.SliceData(mem))), n)
	copy(ents, m.ents)
	if m.entMem != nil {
		unmapAnon(m.entMem)
	}
	m.ents, m.entMem = ents, mem
	live := make([]uint64, (n+63)/64)
	copy(live, m.live)
	m.live = live
	return nil
}

// growSlots rebuilds the table with n slots (a power of two).
func (m *Map[V]) growSlots(n int) error {
	mem, err := mapAnon(n * 4)
	if err != nil {
		return fmt.Errorf("offheap: table of %d slots: %w", n, err)
	}
	old, oldMem := m.slots, m.slotMem
	m.slots = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	m.slotMem, m.mask = mem, uint64(n-1)
	for _, r := range old {
		if r != 0 {
			i := m.ents[r-1].key & m.mask
			for m.slots[i] != 0 {
				i = (i + 1) & m.mask
			}
			m.slots[i] = r
		}
	}
	if oldMem != nil {
		unmapAnon(oldMem)
	}
	return nil
}

// Close returns the memory; the map is empty and unusable afterwards.
func (m *Map[V]) Close() {
	if m.entMem != nil {
		unmapAnon(m.entMem)
	}
	if m.slotMem != nil {
		unmapAnon(m.slotMem)
	}
	*m = Map[V]{}
}

// Len is the number of entries.
func (m *Map[V]) Len() int { return m.n }

// Find returns key's entry, or 0.
func (m *Map[V]) Find(key uint64) Ref {
	if m.slots == nil {
		return 0
	}
	for i := key & m.mask; ; i = (i + 1) & m.mask {
		r := m.slots[i]
		if r == 0 || m.ents[r-1].key == key {
			return Ref(r)
		}
	}
}

// Get returns key's value.
func (m *Map[V]) Get(key uint64) (V, bool) {
	if r := m.Find(key); r != 0 {
		return m.ents[r-1].v, true
	}
	var zero V
	return zero, false
}

// Put sets key's value, adding the entry if it is new, and returns it.
func (m *Map[V]) Put(key uint64, v V) (Ref, error) {
	if r := m.Find(key); r != 0 {
		m.ents[r-1].v = v
		return r, nil
	}
	return m.Insert(key, v)
}

// Insert adds an entry for key, which must not be in the map (Find it
// first: the map would hold it twice).
func (m *Map[V]) Insert(key uint64, v V) (Ref, error) {
	if m.slots == nil {
		return 0, fmt.Errorf("offheap: map closed")
	}
	if (m.n+1)*4 > len(m.slots)*3 {
		if err := m.growSlots(len(m.slots) * 2); err != nil {
			return 0, err
		}
	}
	var r uint32
	if k := len(m.free); k > 0 {
		r, m.free = m.free[k-1], m.free[:k-1]
	} else {
		if int(m.top) == len(m.ents) {
			if err := m.growEnts(len(m.ents) * 2); err != nil {
				return 0, err
			}
		}
		m.top++
		r = m.top
	}
	m.ents[r-1] = ent[V]{key: key, v: v}
	m.live[(r-1)/64] |= 1 << ((r - 1) % 64)
	i := key & m.mask
	for m.slots[i] != 0 {
		i = (i + 1) & m.mask
	}
	m.slots[i] = r
	m.n++
	return Ref(r), nil
}

// At is entry r's value, to read or change in place; valid until the
// next Insert or Put (which may move the entries).
func (m *Map[V]) At(r Ref) *V { return &m.ents[r-1].v }

// Key is entry r's key.
func (m *Map[V]) Key(r Ref) uint64 { return m.ents[r-1].key }

// Delete removes entry r.
func (m *Map[V]) Delete(r Ref) {
	key := m.ents[r-1].key
	i := key & m.mask
	for m.slots[i] != uint32(r) {
		i = (i + 1) & m.mask
	}
	// Backward-shift deletion: later members of the probe run that may
	// live at the hole move into it, so lookups need no tombstones.
	for j := i; ; {
		j = (j + 1) & m.mask
		s := m.slots[j]
		if s == 0 {
			break
		}
		k := m.ents[s-1].key & m.mask
		if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue // s's home lies between the hole and s: it stays
		}
		m.slots[i] = s
		i = j
	}
	m.slots[i] = 0
	m.ents[r-1] = ent[V]{}
	m.live[(r-1)/64] &^= 1 << ((r - 1) % 64)
	m.free = append(m.free, uint32(r))
	m.n--
}

// DeleteKey removes key's entry and reports whether there was one.
func (m *Map[V]) DeleteKey(key uint64) bool {
	r := m.Find(key)
	if r != 0 {
		m.Delete(r)
	}
	return r != 0
}

// All calls f with every entry, in no particular order, until f returns
// false. f may change the value in place and delete the entry it is given,
// but must not insert.
func (m *Map[V]) All(f func(r Ref, key uint64, v *V) bool) {
	for i := range m.top {
		if m.live[i/64]&(1<<(i%64)) != 0 && !f(Ref(i+1), m.ents[i].key, &m.ents[i].v) {
			return
		}
	}
}
