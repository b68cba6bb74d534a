package store

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// BenchmarkGetMemoryHit is a memory hit on a small inline body, copied
// into a response buffer: the node's hit path (0 allocations).
func BenchmarkGetMemoryHit(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir(), MemoryBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 1000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("http\x00example.com/obj/%d", i)
		if err := s.Put(keys[i], make([]byte, 300), 1024, bytes.NewReader(body(1024, byte(i)))); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, ok := s.Get(keys[i%n])
		if !ok {
			b.Fatal("miss")
		}
		dst, _ = h.AppendBody(dst[:0], 0, h.Size())
		h.Release()
	}
}

// BenchmarkGetDiskHit is a hit on an entry outside the memory tier: the
// body is read from its file (the page cache).
func BenchmarkGetDiskHit(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir(), MemoryBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 1000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("http\x00example.com/obj/%d", i)
		if err := s.Put(keys[i], make([]byte, 300), 1024, bytes.NewReader(body(1024, byte(i)))); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, ok := s.Get(keys[i%n])
		if !ok {
			b.Fatal("miss")
		}
		if _, err := h.ReadAt(buf, 0); err != nil && err != io.EOF {
			b.Fatal(err)
		}
		h.Release()
	}
}

// BenchmarkPut stores small responses under distinct keys.
func BenchmarkPut(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir(), MemoryBytes: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	meta := make([]byte, 300)
	data := body(50, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Put(fmt.Sprintf("http\x00example.com/obj/%d", i), meta, 50, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
