package node

import (
	"bytes"
	"container/list"
	"errors"
	"io"
	"strings"
	"sync"
)

// edgeStore is what cache mode needs of the node's object store: entries
// named by cache key, each an opaque metadata blob (the encoded
// httpcache.Stored, or a Vary marker) and a body streamed in and committed
// whole, read back through ref-counted handles.
type edgeStore interface {
	Get(key string) (edgeHandle, bool)
	// Create starts an entry of size bytes (-1: unknown) that becomes
	// visible at Commit, replacing any entry of that key.
	Create(key string, meta []byte, size int64) (edgeWriter, error)
	// SetMeta replaces an entry's metadata, keeping its body.
	SetMeta(key string, meta []byte) error
	Remove(key string) bool
	// Walk calls f for each key with the prefix until f returns false.
	Walk(prefix string, f func(key string, size int64) bool)
}

// edgeHandle reads one stored entry; it stays valid until Release even if
// the entry is replaced or removed meanwhile.
type edgeHandle interface {
	Meta() []byte
	Size() int64
	// WriteRange writes n body bytes from off to w.
	WriteRange(w io.Writer, off, n int64) (int64, error)
	Release()
}

// edgeWriter streams a body into the store.
type edgeWriter interface {
	io.Writer
	Commit() error
	Abort()
}

// errTooLarge refuses a body that cannot fit the store.
var errTooLarge = errors.New("edge store: object larger than the budget")

// memStore is a byte-budgeted in-memory edgeStore with LRU replacement,
// for nodes without a data directory.
type memStore struct {
	budget int64

	mu    sync.Mutex
	bytes int64
	items map[string]*list.Element // of *memEntry
	lru   list.List                // front: most recent
}

type memEntry struct {
	key  string
	meta []byte
	body []byte
}

func (e *memEntry) cost() int64 { return int64(len(e.key) + len(e.meta) + len(e.body) + 128) }

func newMemStore(budget int64) *memStore {
	return &memStore{budget: budget, items: map[string]*list.Element{}}
}

type memHandle struct{ e *memEntry }

func (h memHandle) Meta() []byte { return h.e.meta }
func (h memHandle) Size() int64  { return int64(len(h.e.body)) }
func (h memHandle) Release()     {}
func (h memHandle) WriteRange(w io.Writer, off, n int64) (int64, error) {
	m, err := w.Write(h.e.body[off : off+n])
	return int64(m), err
}

func (s *memStore) Get(key string) (edgeHandle, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.items[key]
	if !ok {
		return nil, false
	}
	s.lru.MoveToFront(el)
	return memHandle{el.Value.(*memEntry)}, true
}

type memWriter struct {
	s    *memStore
	key  string
	meta []byte
	buf  bytes.Buffer
	done bool
}

func (w *memWriter) Write(p []byte) (int, error) {
	if int64(w.buf.Len()+len(p)) > w.s.budget/8 {
		return 0, errTooLarge
	}
	return w.buf.Write(p)
}

func (w *memWriter) Abort() { w.done = true }

func (w *memWriter) Commit() error {
	if w.done {
		return errors.New("edge store: writer already closed")
	}
	w.done = true
	w.s.put(&memEntry{key: w.key, meta: w.meta, body: bytes.Clone(w.buf.Bytes())})
	return nil
}

func (s *memStore) Create(key string, meta []byte, size int64) (edgeWriter, error) {
	if size > s.budget/8 {
		return nil, errTooLarge
	}
	return &memWriter{s: s, key: key, meta: bytes.Clone(meta)}, nil
}

func (s *memStore) put(e *memEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(e.key)
	s.items[e.key] = s.lru.PushFront(e)
	s.bytes += e.cost()
	for s.bytes > s.budget && s.lru.Len() > 1 {
		s.removeLocked(s.lru.Back().Value.(*memEntry).key)
	}
}

func (s *memStore) SetMeta(key string, meta []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.items[key]
	if !ok {
		return errors.New("edge store: no such entry")
	}
	old := el.Value.(*memEntry)
	e := &memEntry{key: key, meta: bytes.Clone(meta), body: old.body}
	s.bytes += e.cost() - old.cost()
	el.Value = e
	return nil
}

func (s *memStore) Remove(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(key)
}

func (s *memStore) removeLocked(key string) bool {
	el, ok := s.items[key]
	if !ok {
		return false
	}
	s.bytes -= el.Value.(*memEntry).cost()
	s.lru.Remove(el)
	delete(s.items, key)
	return true
}

func (s *memStore) Walk(prefix string, f func(key string, size int64) bool) {
	s.mu.Lock()
	var keys []string
	var sizes []int64
	for k, el := range s.items {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
			sizes = append(sizes, int64(len(el.Value.(*memEntry).body)))
		}
	}
	s.mu.Unlock()
	for i, k := range keys {
		if !f(k, sizes[i]) {
			return
		}
	}
}
