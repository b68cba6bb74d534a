package replica

import (
	"cmp"
	"fmt"

	"shoal/internal/base/offheap"
)

// copies is where a Table keeps its held copies. A live PoP may hold
// millions, keyed by 64-bit hashes: those live in an off-heap map
// (internal/base/offheap), 24 bytes a copy that the collector neither
// scans nor doubles. The simulator's URL keys live in a Go map.
type copies[K cmp.Ordered] interface {
	get(k K) (held, bool)
	put(k K, h held)
	del(k K)
	len() int
	// all calls f with every copy until f returns false; f may put
	// (change) the copy it is given, and nothing else.
	all(f func(k K, h held) bool)
	close()
}

// newCopies picks the store for K.
func newCopies[K cmp.Ordered]() (copies[K], error) {
	var zero K
	if _, ok := any(zero).(uint64); ok {
		m, err := offheap.New[held]()
		if err != nil {
			return nil, fmt.Errorf("cdn: copies: %w", err)
		}
		return any(offCopies{m}).(copies[K]), nil
	}
	return goCopies[K]{}, nil
}

// goCopies is a Go map of copies.
type goCopies[K cmp.Ordered] map[K]held

func (c goCopies[K]) get(k K) (held, bool) { h, ok := c[k]; return h, ok }
func (c goCopies[K]) put(k K, h held)      { c[k] = h }
func (c goCopies[K]) del(k K)              { delete(c, k) }
func (c goCopies[K]) len() int             { return len(c) }
func (c goCopies[K]) close()               {}
func (c goCopies[K]) all(f func(k K, h held) bool) {
	for k, h := range c {
		if !f(k, h) {
			return
		}
	}
}

// offCopies is an off-heap map of copies keyed by uint64.
type offCopies struct{ m *offheap.Map[held] }

func (c offCopies) get(k uint64) (held, bool) { return c.m.Get(k) }
func (c offCopies) del(k uint64)              { c.m.DeleteKey(k) }
func (c offCopies) len() int                  { return c.m.Len() }
func (c offCopies) close()                    { c.m.Close() }

// put keeps the copy; should the memory for a new one not be mapped, the
// copy is not held (its next request finds no copy, and fetches one).
func (c offCopies) put(k uint64, h held) { _, _ = c.m.Put(k, h) }

func (c offCopies) all(f func(k uint64, h held) bool) {
	c.m.All(func(_ offheap.Ref, k uint64, h *held) bool { return f(k, *h) })
}
