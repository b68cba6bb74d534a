package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"shoal/internal/base/cache"
)

func body(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func open(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func readAll(t *testing.T, h *Handle) []byte {
	t.Helper()
	b := make([]byte, h.Size())
	if n, err := h.ReadAt(b, 0); (err != nil && err != io.EOF) || int64(n) != h.Size() {
		t.Fatalf("ReadAt %s: %d, %v", h.Key(), n, err)
	}
	return b
}

// TestPutGet stores bodies of each size, with the arena and without one
// (InlineBytes negative, a plan's NoInline): then nothing is inline and
// every body is served from its file.
func TestPutGet(t *testing.T) {
	for _, inlineBytes := range []int64{0, NoInline} {
		t.Run(fmt.Sprintf("inline-bytes=%d", inlineBytes), func(t *testing.T) { testPutGet(t, inlineBytes) })
	}
}

func testPutGet(t *testing.T, inlineBytes int64) {
	s := open(t, Config{Dir: t.TempDir(), MemoryBytes: 1 << 20, InlineBytes: inlineBytes})
	arena := inlineBytes >= 0
	cases := []struct {
		key    string
		size   int
		known  bool
		inline bool
	}{
		{"/empty", 0, true, true},
		{"/small", 1000, true, true},
		{"/unknown-small", 5000, false, true},
		{"/mid", 40 << 10, true, false},
		{"/unknown-mid", 70 << 10, false, false},
	}
	for i, c := range cases {
		want := body(c.size, byte(i))
		size := int64(c.size)
		if !c.known {
			size = -1
		}
		if err := s.Put(c.key, []byte("meta "+c.key), size, bytes.NewReader(want)); err != nil {
			t.Fatalf("Put %s: %v", c.key, err)
		}
		h, ok := s.Get(c.key)
		if !ok {
			t.Fatalf("Get %s: miss", c.key)
		}
		if got := readAll(t, &h); !bytes.Equal(got, want) {
			t.Errorf("%s: body differs", c.key)
		}
		if string(h.Meta()) != "meta "+c.key || !h.InMemory() || h.Inline() != (c.inline && arena) {
			t.Errorf("%s: meta %q, in memory %v, inline %v; want inline %v", c.key, h.Meta(), h.InMemory(), h.Inline(), c.inline && arena)
		}
		if c.size > 0 {
			var buf bytes.Buffer
			if n, err := NewSender(&buf).Send(&h, 1, int64(c.size-1)); err != nil || !bytes.Equal(buf.Bytes(), want[1:]) {
				t.Errorf("%s: Send from 1: %d, %v", c.key, n, err)
			}
		}
		h.Release()
		h.Release() // harmless
	}
	st := s.Stats()
	if st.Hits != 5 || st.MemoryHits != 5 || st.DiskObjects != 5 || st.MemoryObjects != 5 || (st.InlineBytes > 0) != arena {
		t.Errorf("stats %+v", st)
	}
	if _, ok := s.Get("/none"); ok || s.Stats().Misses != 1 {
		t.Error("a missing key is a hit")
	}
}

func TestShortAndLong(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir(), DiskBytes: 1 << 20})
	if err := s.Put("/a", nil, 10, bytes.NewReader(body(5, 0))); !errors.Is(err, ErrShort) {
		t.Errorf("short body: %v", err)
	}
	if err := s.Put("/a", nil, 3, bytes.NewReader(body(5, 0))); !errors.Is(err, ErrShort) {
		t.Errorf("long body: %v", err)
	}
	if err := s.Put("/big", nil, -1, bytes.NewReader(body(2<<20, 0))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("body over the disk tier: %v", err)
	}
	if _, err := s.Create("/big", nil, 2<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("announced body over the disk tier: %v", err)
	}
	if ks := s.Keys(); len(ks) != 0 {
		t.Errorf("failed puts left %v", ks)
	}
	if left, _ := filepath.Glob(filepath.Join(s.cfg.Dir, "tmp", "*")); len(left) != 0 {
		t.Errorf("failed puts left files %v", left)
	}
	if _, err := open(t, Config{}).Create("/x", nil, 1); !errors.Is(err, ErrNoDisk) {
		t.Errorf("no Dir: %v", err)
	}
}

// A stored entry is evicted from the disk tier least recently used first,
// reported to OnEvict, and its file deleted.
func TestDiskEviction(t *testing.T) {
	var evicted []string
	var mu sync.Mutex
	dir := t.TempDir()
	s := open(t, Config{Dir: dir, DiskBytes: 3 * 8192, MemoryBytes: -1, OnEvict: func(k string) {
		mu.Lock()
		evicted = append(evicted, k)
		mu.Unlock()
	}})
	for _, k := range []string{"/a", "/b", "/c"} {
		if err := s.Put(k, nil, 5000, bytes.NewReader(body(5000, 1))); err != nil {
			t.Fatal(err)
		}
	}
	h, _ := s.Get("/a") // /a is now the most recent; /b goes first
	h.Release()
	if err := s.Put("/d", nil, 5000, bytes.NewReader(body(5000, 2))); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(evicted, []string{"/b"}) || !slices.Equal(s.Keys(), []string{"/a", "/c", "/d"}) {
		t.Errorf("evicted %v, left %v; want /b evicted", evicted, s.Keys())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "o", "*", "*"))
	if len(files) != 3 {
		t.Errorf("%d files left, want 3", len(files))
	}
	if st := s.Stats(); st.DiskEvictions != 1 || st.DiskHits != 1 || st.MemoryHits != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Linked entries live only in the memory tier: the policy (LRU here)
// evicts them, OnEvict hears of it, and a handle taken before reads on.
func TestLinkEviction(t *testing.T) {
	dir := t.TempDir()
	var evicted []string
	s := open(t, Config{MemoryBytes: 3 * Footprint(20000, 0), MaxObject: 1 << 20, Policy: cache.LRU, OnEvict: func(k string) { evicted = append(evicted, k) }})
	link := func(k string, n int) Handle {
		p := filepath.Join(dir, strings.TrimPrefix(k, "/"))
		if err := os.WriteFile(p, body(n, byte(n)), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.Link(k, f, int64(n), nil, k+" value")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ha := link("/a", 20000)
	for _, k := range []string{"/b", "/c", "/d"} {
		h := link(k, 20000)
		h.Release()
	}
	if !slices.Equal(evicted, []string{"/a"}) || !slices.Equal(s.Keys(), []string{"/b", "/c", "/d"}) {
		t.Errorf("evicted %v, left %v", evicted, s.Keys())
	}
	if got := readAll(t, &ha); !bytes.Equal(got, body(20000, byte(20000%256))) || ha.Value() != "/a value" {
		t.Error("a handle of an evicted entry reads something else")
	}
	ha.Release()
	// Too large for the memory tier: served once, never kept.
	h := link("/huge", 2<<20)
	if h.InMemory() || !slices.Equal(s.Keys(), []string{"/b", "/c", "/d"}) {
		t.Errorf("an object over the budget was admitted: %v", s.Keys())
	}
	var buf bytes.Buffer
	if _, err := h.WriteTo(&buf); err != nil || buf.Len() != 2<<20 {
		t.Errorf("WriteTo: %d bytes, %v", buf.Len(), err)
	}
	h.Release()
	hi := link("/tiny", 100)
	if !hi.Inline() || !hi.InMemory() {
		t.Error("a small linked body is not inline")
	}
	if b, ok := hi.AppendBody([]byte("x"), 10, 5); !ok || !bytes.Equal(b, append([]byte("x"), body(100, 100)[10:15]...)) {
		t.Errorf("AppendBody: %q %v", b, ok)
	}
	hi.Release()
}

// The disk tier survives a restart: keys, metadata and bodies; files
// that do not check are dropped.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"/a", "/b", "/c"} {
		if err := s.Put(k, []byte("m"+k), -1, bytes.NewReader(body(3000*(i+1), byte(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put("/a", []byte("new"), -1, bytes.NewReader(body(10, 9))); err != nil { // replaces
		t.Fatal(err)
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "o", "*", "*"))
	if len(files) != 3 {
		t.Fatalf("%d files, want 3", len(files))
	}
	// Damage /c's file: it must go.
	for _, p := range files {
		f, _ := os.Open(p)
		fh, _ := readHeader(f)
		f.Close()
		if fh.key == "/c" {
			os.Truncate(p, 100)
		}
	}
	s = open(t, Config{Dir: dir})
	if ks := s.Keys(); !slices.Equal(ks, []string{"/a", "/b"}) {
		t.Fatalf("after reopening: %v", ks)
	}
	h, ok := s.Get("/a")
	if !ok || string(h.Meta()) != "new" || !bytes.Equal(readAll(t, &h), body(10, 9)) {
		t.Errorf("/a after reopening: %q", h.Meta())
	}
	h.Release()
	h, _ = s.Get("/b")
	if string(h.Meta()) != "m/b" || !bytes.Equal(readAll(t, &h), body(6000, 1)) {
		t.Errorf("/b after reopening: %q", h.Meta())
	}
	h.Release()
}

func TestSetMetaRemoveWalk(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir()})
	for _, k := range []string{"/x/1", "/x/2", "/y/1"} {
		if err := s.Put(k, []byte("short"), 50000, bytes.NewReader(body(50000, 3))); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := s.Get("/x/1")
	if err := s.SetMeta("/x/1", []byte("in place")); err != nil {
		t.Fatal(err)
	}
	long := bytes.Repeat([]byte("L"), 3000)
	if err := s.SetMeta("/x/2", long); err != nil { // outgrows the region: rewritten
		t.Fatal(err)
	}
	if string(old.Meta()) != "short" {
		t.Error("an older handle's metadata changed")
	}
	old.Release()
	for k, want := range map[string]string{"/x/1": "in place", "/x/2": string(long)} {
		h, _ := s.Get(k)
		if string(h.Meta()) != want || !bytes.Equal(readAll(t, &h), body(50000, 3)) {
			t.Errorf("%s after SetMeta: %q", k, h.Meta())
		}
		h.Release()
	}
	if err := s.SetMeta("/none", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetMeta of a missing key: %v", err)
	}
	var walked []string
	s.Walk("/x/", func(k string, n int64) bool {
		walked = append(walked, k)
		return n == 50000
	})
	slices.Sort(walked)
	if !slices.Equal(walked, []string{"/x/1", "/x/2"}) {
		t.Errorf("walk /x/: %v", walked)
	}
	h, _ := s.Get("/y/1")
	if !s.Remove("/y/1") || s.Remove("/y/1") {
		t.Error("Remove")
	}
	if !bytes.Equal(readAll(t, &h), body(50000, 3)) {
		t.Error("a removed entry's handle reads something else")
	}
	h.Release()
	// Reopened, the new metadata is there.
	s.Close()
	s2 := open(t, Config{Dir: s.cfg.Dir})
	h, _ = s2.Get("/x/1")
	if string(h.Meta()) != "in place" {
		t.Errorf("after reopening: %q", h.Meta())
	}
	h.Release()
	if !slices.Equal(s2.Keys(), []string{"/x/1", "/x/2"}) {
		t.Errorf("after reopening: %v", s2.Keys())
	}
}

// Bodies go to a TCP connection by sendfile, or from the arena.
func TestSenderTCP(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir()})
	big, small := body(3<<20+5, 1), body(3000, 2)
	s.Put("/big", nil, int64(len(big)), bytes.NewReader(big))
	s.Put("/small", nil, int64(len(small)), bytes.NewReader(small))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	snd := NewSender(c)
	if snd.rc == nil {
		t.Fatal("no sendfile on a TCP connection")
	}
	calls := 0
	snd.Progress = func() { calls++ }
	for _, k := range []string{"/big", "/small"} {
		h, _ := s.Get(k)
		if n, err := snd.Send(&h, 2, h.Size()-2); err != nil || n != h.Size()-2 {
			t.Errorf("Send %s: %d, %v", k, n, err)
		}
		h.Release()
	}
	c.Close()
	want := append(slices.Clone(big[2:]), small[2:]...)
	if b := <-got; !bytes.Equal(b, want) {
		t.Errorf("received %d bytes, want %d", len(b), len(want))
	}
	if calls < 4 {
		t.Errorf("Progress called %d times for a 3 MiB body in 1 MiB steps", calls)
	}
}

// A memory hit allocates nothing.
func TestHitAllocs(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir()})
	s.Put("/a", []byte("m"), 3000, bytes.NewReader(body(3000, 1)))
	s.Put("/b", []byte("m"), 100000, bytes.NewReader(body(100000, 1)))
	dst := make([]byte, 0, 4096)
	snd := NewSender(io.Discard)
	allocs := testing.AllocsPerRun(200, func() {
		h, _ := s.Get("/a")
		dst, _ = h.AppendBody(dst[:0], 0, h.Size())
		h.Release()
		h, _ = s.Get("/b")
		snd.Send(&h, 0, 10)
		h.Release()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per pair of hits", allocs)
	}
}

// Concurrent puts, gets, removes and evictions keep every body intact
// (run with -race).
func TestConcurrent(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir(), MemoryBytes: 200 << 10, DiskBytes: 2 << 20})
	keys := []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h"}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				k := keys[(i*(g+1))%len(keys)]
				n := 1000 + int(k[1]-'a')*9000
				switch i % 5 {
				case 0:
					if err := s.Put(k, []byte(k), int64(n), bytes.NewReader(body(n, k[1]))); err != nil {
						t.Error(err)
					}
				case 4:
					if g == 0 {
						s.Remove(k)
					}
				default:
					if h, ok := s.Get(k); ok {
						if !bytes.Equal(readAll(t, &h), body(n, k[1])) || string(h.Meta()) != k {
							t.Errorf("%s: wrong body or meta", k)
						}
						h.Release()
					}
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.MemoryBytes > 200<<10 || st.DiskBytes > 2<<20 {
		t.Errorf("over budget: %+v", st)
	}
}

// pattern is an endless reader of a repeating pattern, so the test holds
// no body of its own.
type pattern struct{ n, limit int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.n >= p.limit {
		return 0, io.EOF
	}
	m := min(int64(len(b)), p.limit-p.n)
	for i := range b[:m] {
		b[i] = byte(p.n + int64(i))
	}
	p.n += m
	return int(m), nil
}

// A large body of unknown length streams to the disk tier through a
// bounded buffer: what the Go heap allocates does not grow with it.
func TestStreamLarge(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir(), MemoryBytes: 8 << 20})
	const size = 96 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := s.Put("/large", []byte("m"), -1, &pattern{limit: size}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 2<<20 {
		t.Errorf("storing %d bytes allocated %d bytes", size, d)
	}
	h, ok := s.Get("/large")
	if !ok || h.Size() != size || h.InMemory() {
		t.Fatalf("large entry: ok %v size %d in memory %v (over MaxObject, it must not be)", ok, h.Size(), h.InMemory())
	}
	b := make([]byte, 10)
	if _, err := h.ReadAt(b, size-10); err != nil || b[9] != byte((size-1)%256) {
		t.Errorf("tail: %v %v", b, err)
	}
	h.Release()
}

// The index of the disk tier lives off the Go heap: storing many small
// responses grows the live heap by a few bytes per entry, not by the
// hundreds an entry object and its key would take.
func TestHeapPerEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 10,000 entries")
	}
	s := open(t, Config{Dir: t.TempDir(), MemoryBytes: 1 << 20})
	meta, data := make([]byte, 300), body(50, 1)
	const n = 10000
	put := func(from, to int) {
		for i := from; i < to; i++ {
			key := fmt.Sprintf("http\x00example.com/some/path/of/an/object/%d?query=%d", i, i)
			if err := s.Put(key, meta, int64(len(data)), bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0, 1000) // the memory tier fills
	before := heapInUse()
	put(1000, n)
	per := (heapInUse() - before) / (n - 1000)
	if st := s.Stats(); st.DiskObjects != n {
		t.Fatalf("%d entries stored, want %d", st.DiskObjects, n)
	}
	t.Logf("live heap per stored entry: %d bytes", per)
	if per > 48 {
		t.Errorf("live heap grew %d bytes per stored entry, want at most 48", per)
	}
	runtime.KeepAlive(s)
}

// Walk finds entries at rest by the keys in their files; a prefix that
// reaches into a group (past a NUL) walks that group only.
func TestWalkGroups(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir(), MemoryBytes: -1})
	keys := []string{"u1", "u1\x00a", "u1\x00b", "u10\x00a", "u2\x00a"}
	for _, k := range keys {
		if err := s.Put(k, []byte("m"), 10, bytes.NewReader(body(10, 1))); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(prefix string) []string {
		var got []string
		s.Walk(prefix, func(k string, n int64) bool {
			if n != 10 {
				t.Errorf("%q: size %d", k, n)
			}
			got = append(got, k)
			return true
		})
		slices.Sort(got)
		return got
	}
	if got := walk("u1\x00"); !slices.Equal(got, []string{"u1\x00a", "u1\x00b"}) {
		t.Errorf("group walk: %q", got)
	}
	if got := walk("u1"); !slices.Equal(got, []string{"u1", "u1\x00a", "u1\x00b", "u10\x00a"}) {
		t.Errorf("prefix walk: %q", got)
	}
	if got := s.Keys(); !slices.Equal(got, []string{"u1", "u1\x00a", "u1\x00b", "u10\x00a", "u2\x00a"}) {
		t.Errorf("keys: %q", got)
	}
	n := 0
	s.WalkMeta("u1\x00", func(k string, size int64, meta []byte) bool {
		n++
		if string(meta) != "m" || size != 10 {
			t.Errorf("WalkMeta %q: %d bytes, metadata %q", k, size, meta)
		}
		return true
	})
	if n != 2 {
		t.Errorf("WalkMeta visited %d entries, want 2", n)
	}
	// A handle makes an entry hot; the walk sees it once.
	h, ok := s.Get("u1\x00a")
	if !ok {
		t.Fatal("Get of an entry at rest missed")
	}
	if got := walk("u1\x00"); !slices.Equal(got, []string{"u1\x00a", "u1\x00b"}) {
		t.Errorf("group walk with a handle: %q", got)
	}
	h.Release()
	if stored, inMem := s.Peek("u1\x00a"); !stored || inMem {
		t.Errorf("Peek after release: %v %v", stored, inMem)
	}
}

// A small body's metadata lives in its arena block, ahead of the body,
// when it fits in the slack: the memory tier's entries then keep no
// metadata in the Go heap. Bodies read right around it, and a handle's
// metadata stays as it was after SetMeta.
func TestMetaInline(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir(), MemoryBytes: 64 << 20})
	meta := bytes.Repeat([]byte("m"), 300)
	for _, n := range []int{1, 50, 3796, 3797, 9000} { // 3796 + 300 fills one block exactly
		key := fmt.Sprintf("/%d", n)
		if err := s.Put(key, meta, int64(n), bytes.NewReader(body(n, byte(n)))); err != nil {
			t.Fatal(err)
		}
		h, ok := s.Get(key)
		if !ok || !h.Inline() {
			t.Fatalf("%s: not inline", key)
		}
		inArena := h.e.bodyAt > 0
		if want := blocksFor(int64(n)+300) == blocksFor(int64(n)); inArena != want {
			t.Errorf("%s: metadata in the arena %v, want %v", key, inArena, want)
		}
		b, _ := h.AppendBody(nil, 0, h.Size())
		if !bytes.Equal(b, body(n, byte(n))) || !bytes.Equal(readAll(t, &h), b) || !bytes.Equal(h.Meta(), meta) {
			t.Errorf("%s: body or metadata wrong", key)
		}
		var w bytes.Buffer
		if _, err := NewSender(&w).Send(&h, 1, int64(n-1)); err != nil || !bytes.Equal(w.Bytes(), b[1:]) {
			t.Errorf("%s: sent %d bytes, %v", key, w.Len(), err)
		}
		if err := s.SetMeta(key, []byte("new")); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(h.Meta(), meta) {
			t.Errorf("%s: a handle's metadata changed with SetMeta", key)
		}
		h.Release()
		h, _ = s.Get(key)
		b, _ = h.AppendBody(nil, 0, h.Size())
		if string(h.Meta()) != "new" || !bytes.Equal(b, body(n, byte(n))) {
			t.Errorf("%s after SetMeta: %q", key, h.Meta())
		}
		h.Release()
	}
}
