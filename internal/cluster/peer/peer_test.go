package peer

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/base/peerwire"
)

// fakeLocal serves objects from a map, and files (too large for its
// memory) of the given sizes with body's pattern from PeerFile, each file
// ending short by cut bytes; gate, when set, holds every PeerObject until
// it is closed.
type fakeLocal struct {
	objs  map[string][]byte
	files map[string]int64
	cut   int64
	disk  map[string]bool // objects the owner reads from disk (not in memory)
	gate  chan struct{}
	calls atomic.Int64
	keys  []string
}

func (f *fakeLocal) PeerObject(r Request) ([]byte, bool, error) {
	f.calls.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	b, ok := f.objs[r.URL]
	if !ok {
		return nil, false, ErrNotFound
	}
	return b, !f.disk[r.URL], nil
}

func (f *fakeLocal) PeerFile(r Request) (io.ReadCloser, int64, error) {
	n, ok := f.files[r.URL]
	if !ok {
		return nil, 0, nil
	}
	return io.NopCloser(&patReader{n: n - f.cut}), n, nil
}

// patReader yields n bytes of body's pattern without holding them.
type patReader struct{ off, n int64 }

func (p *patReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.n-p.off)]
	for i := range b {
		o := p.off + int64(i)
		b[i] = byte(o*7 + o/251)
	}
	p.off += int64(len(b))
	return len(b), nil
}

func (f *fakeLocal) CacheKeys(add func(string)) {
	for _, k := range f.keys {
		add(k)
	}
}

var testKey = []byte("0123456789abcdef-cluster-key")

// serveUpgrades accepts on ln like a node's port: reads the request head,
// answers 101 when it asks for Path, and hands the connection to h.
func serveUpgrades(t *testing.T, ln net.Listener, h *Host) {
	t.Helper()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				br := bufio.NewReader(oneByte{nc})
				line, err := br.ReadString('\n')
				if err != nil {
					nc.Close()
					return
				}
				for {
					l, err := br.ReadString('\n')
					if err != nil {
						nc.Close()
						return
					}
					if l == "\r\n" {
						break
					}
				}
				if !strings.HasPrefix(line, "GET "+Path+" ") {
					nc.Write([]byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))
					nc.Close()
					return
				}
				nc.Write([]byte(UpgradeResponse))
				h.ServeConn(nc)
			}()
		}
	}()
}

// pair starts an owner host (index 1) serving local and returns a client
// host (index 0) whose peer 1 is it.
func pair(t *testing.T, local *fakeLocal, ownerKey, clientKey []byte) (cli, owner *Host) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers := []string{"127.0.0.1:1", ln.Addr().String()}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	owner, err = New(Config{Self: 1, Peers: peers, Key: ownerKey, DigestPeriod: -1, Logger: quiet}, local)
	if err != nil {
		t.Fatal(err)
	}
	serveUpgrades(t, ln, owner)
	cli, err = New(Config{Self: 0, Peers: peers, Key: clientKey, DigestPeriod: -1, Logger: quiet}, &fakeLocal{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); cli.Close(); owner.Close() })
	return cli, owner
}

func body(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// TestFetchStreamsChunks: a 200 KB object arrives in order, chunk by chunk
// (four frames of at most Chunk bytes), equal to the owner's bytes, and
// the pooled connection is reused for the next fetch.
func TestFetchStreamsChunks(t *testing.T) {
	want := body(200 << 10)
	local := &fakeLocal{objs: map[string][]byte{"/a": want}}
	cli, owner := pair(t, local, testKey, testKey)
	r := Request{URL: "/a", ETag: `"x"`, Size: int64(len(want)), Key: "/a"}
	var got bytes.Buffer
	chunks := 0
	b, _, collapsed, err := cli.Fetch(1, r, func(p []byte) { chunks++; got.Write(p) })
	if err != nil || collapsed {
		t.Fatalf("fetch: %v collapsed=%v", err, collapsed)
	}
	if sha256.Sum256(b) != sha256.Sum256(want) || sha256.Sum256(got.Bytes()) != sha256.Sum256(want) {
		t.Fatal("fetched bytes differ")
	}
	if chunks != 4 { // 200 KiB = 3 × 64 KiB + 8 KiB
		t.Errorf("sink saw %d chunks, want 4", chunks)
	}
	if _, _, _, err := cli.Fetch(1, r, nil); err != nil {
		t.Fatal(err)
	}
	st, ost := cli.Stats(), owner.Stats()
	if st.Fetches != 2 || st.FetchBytes != 2*uint64(len(want)) || st.Failures != 0 || ost.Served != 2 {
		t.Errorf("stats %+v, owner %+v", st, ost)
	}
	if n := len(cli.m.Load().pools[1].idle); n != 1 {
		t.Errorf("%d idle connections after two sequential fetches, want 1 (reused)", n)
	}
}

// TestFetchReportsMemory: Fetch's mem says whether the owner answered from
// its memory (status stOK) or read its disk first (stOKDisk), for small
// and multi-chunk objects; the bytes are the owner's either way, and
// served_disk counts the disk ones.
func TestFetchReportsMemory(t *testing.T) {
	objs := map[string][]byte{"/m": body(100), "/d": body(100), "/big-d": body(150 << 10), "/big-m": body(150 << 10)}
	local := &fakeLocal{objs: objs, disk: map[string]bool{"/d": true, "/big-d": true}}
	cli, owner := pair(t, local, testKey, testKey)
	for _, tc := range []struct {
		url string
		mem bool
	}{{"/m", true}, {"/d", false}, {"/big-d", false}, {"/big-m", true}} {
		want := objs[tc.url]
		b, mem, _, err := cli.Fetch(1, Request{URL: tc.url, Size: int64(len(want)), Key: tc.url}, nil)
		if err != nil || !bytes.Equal(b, want) || mem != tc.mem {
			t.Errorf("%s: err %v, bytes equal %v, mem %v; want mem %v", tc.url, err, bytes.Equal(b, want), mem, tc.mem)
		}
	}
	if d := owner.Stats().ServedDisk; d != 2 {
		t.Errorf("owner served_disk %d, want 2", d)
	}
}

// TestFetchFailures: a missing file, a size that disagrees with the
// asker's table, an unknown peer index and this node's own index all fail
// (the caller reads its disk) and count as failures.
func TestFetchFailures(t *testing.T) {
	local := &fakeLocal{objs: map[string][]byte{"/a": body(10)}}
	cli, _ := pair(t, local, testKey, testKey)
	for _, tc := range []struct {
		peer int
		r    Request
		want error
	}{
		{1, Request{URL: "/missing", Size: 10, Key: "/missing"}, ErrNotFound},
		{1, Request{URL: "/a", Size: 11, Key: "/a"}, ErrProtocol},
		{7, Request{URL: "/a", Size: 10, Key: "/a"}, ErrPeer},
		{0, Request{URL: "/a", Size: 10, Key: "/a"}, ErrPeer},
	} {
		if _, _, _, err := cli.Fetch(tc.peer, tc.r, nil); !errors.Is(err, tc.want) {
			t.Errorf("peer %d %+v: err %v, want %v", tc.peer, tc.r, err, tc.want)
		}
	}
	if f := cli.Stats().Failures; f != 4 {
		t.Errorf("failures %d, want 4", f)
	}
}

// TestConcurrentFetchesCollapse: 100 concurrent fetches of one object make
// one network fetch; the owner is asked once and the 99 others wait for its
// bytes.
func TestConcurrentFetchesCollapse(t *testing.T) {
	want := body(30 << 10)
	local := &fakeLocal{objs: map[string][]byte{"/a": want}, gate: make(chan struct{})}
	cli, owner := pair(t, local, testKey, testKey)
	r := Request{URL: "/a", ETag: `"x"`, Size: int64(len(want)), Key: "/a"}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _, _, err := cli.Fetch(1, r, nil)
			if err != nil || !bytes.Equal(b, want) {
				bad.Add(1)
			}
		}()
	}
	// Release the owner once every fetch is waiting in the group.
	for cli.waiting.Load() < 100 || local.calls.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	close(local.gate)
	wg.Wait()
	st := cli.Stats()
	if bad.Load() != 0 || local.calls.Load() != 1 || st.Fetches != 1 || st.Collapsed != 99 || owner.Stats().Served != 1 {
		t.Errorf("bad %d, owner asked %d times, stats %+v", bad.Load(), local.calls.Load(), st)
	}
}

// TestForgedPeerRefused: a node without the cluster key is refused in the
// handshake: the owner never looks the object up, and counts the refusal;
// a raw frame sent without any handshake gets no object byte either.
func TestForgedPeerRefused(t *testing.T) {
	secret := []byte("SECRET-OBJECT-BYTES")
	local := &fakeLocal{objs: map[string][]byte{"/a": secret}}
	cli, owner := pair(t, local, testKey, []byte("fedcba9876543210-wrong-key!!"))
	_, _, _, err := cli.Fetch(1, Request{URL: "/a", Size: int64(len(secret)), Key: "/a"}, nil)
	if err == nil {
		t.Fatal("a peer without the cluster key fetched the object")
	}
	if local.calls.Load() != 0 {
		t.Errorf("owner looked the object up %d times for a forged peer", local.calls.Load())
	}
	for end := time.Now().Add(5 * time.Second); owner.Stats().Refused == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond) // the owner counts after the client saw the refusal
	}
	if r := owner.Stats().Refused; r != 1 {
		t.Errorf("owner refused %d handshakes, want 1", r)
	}

	// Raw: upgrade, then a plausible hello and a plaintext GET frame.
	nc, err := net.Dial("tcp", owner.cfg.Peers[1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := upgrade(nc, "x", time.Second); err != nil {
		t.Fatal(err)
	}
	hello := append([]byte{peerwire.Version}, make([]byte, 8+32)...)
	req := appendRequest([]byte{opGet}, &Request{URL: "/a", Size: int64(len(secret)), Key: "/a"})
	nc.Write(hello)
	nc.Write(req)
	nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	got, _ := io.ReadAll(nc)
	if bytes.Contains(got, secret) || local.calls.Load() != 0 {
		t.Errorf("raw forged request answered with the object (%d lookups)", local.calls.Load())
	}
}

// TestReflectedPeerRefused: a client without the key upgrades, names the
// owner's own ID in its hello and echoes the owner's proof back. The
// handshake must be refused (counted) and no frame of the client's ever
// decoded as a request: with one key for both directions the echo would
// open and the link be accepted with the full frame cap.
func TestReflectedPeerRefused(t *testing.T) {
	local := &fakeLocal{objs: map[string][]byte{"/a": []byte("x")}}
	_, owner := pair(t, local, testKey, testKey)
	nc, err := net.Dial("tcp", owner.cfg.Peers[1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := upgrade(nc, "x", time.Second); err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	hello := []byte{peerwire.Version}
	hello = binary.BigEndian.AppendUint64(hello, 2) // the owner's own ID (index 1)
	nc.Write(append(hello, make([]byte, 32)...))
	if _, err := io.ReadFull(nc, make([]byte, len(hello)+32)); err == nil {
		h := make([]byte, 13)
		if _, err := io.ReadFull(nc, h); err == nil {
			b := make([]byte, binary.BigEndian.Uint32(h))
			io.ReadFull(nc, b)
			f := append(h, b...)
			nc.Write(f)
			nc.Write(f)
		}
	}
	io.Copy(io.Discard, nc) // until the owner closes
	for end := time.Now().Add(5 * time.Second); owner.Stats().Refused == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if r := owner.Stats().Refused; r != 1 {
		t.Errorf("owner refused %d reflected handshakes, want 1 (accepted: %d)", r, owner.wst.Accepted.Load())
	}
}

// TestDigestExchange: after a round each side's CachedElsewhere answers
// from the other's digest; keys the peer does not cache are (with this
// many keys, certainly) absent; a digest not renewed for three rounds is
// forgotten.
func TestDigestExchange(t *testing.T) {
	local := &fakeLocal{keys: []string{"/a", "/b", "gzip:/c"}}
	cli, owner := pair(t, local, testKey, testKey)
	// The owner sends its digest to peer 0, which is the unreachable
	// 127.0.0.1:1; so exchange the other way: cli's peer 1 is the owner.
	cli.local = &fakeLocal{keys: []string{"/x", "/y"}}
	cli.DigestRound()
	if !owner.CachedElsewhere("/x") || !owner.CachedElsewhere("/y") || owner.CachedElsewhere("/a") {
		t.Errorf("owner's view of peer 0: /x %v /y %v /a %v", owner.CachedElsewhere("/x"), owner.CachedElsewhere("/y"), owner.CachedElsewhere("/a"))
	}
	if st := owner.Stats(); st.DigestsReceived != 1 || st.PeerDigests != 1 {
		t.Errorf("owner stats %+v", st)
	}
	if st := cli.Stats(); st.DigestsSent != 1 || st.DigestBits != MinBits || st.DigestKeys != 2 {
		t.Errorf("sender stats %+v", st)
	}
	for range 4 {
		owner.DigestRound() // cannot reach peer 0; ages its digest
	}
	if owner.CachedElsewhere("/x") {
		t.Error("a digest not renewed for four rounds is still believed")
	}
}

// TestInboundConnsBounded: a node serves at most maxConns peer connections;
// one more is closed at once and counted as refused, while the held ones
// are strangers stalling in the handshake.
func TestInboundConnsBounded(t *testing.T) {
	_, owner := pair(t, &fakeLocal{objs: map[string][]byte{}}, testKey, testKey)
	owner.mu.Lock()
	owner.maxConns = 2
	owner.mu.Unlock()
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", owner.cfg.Peers[1])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		if err := upgrade(nc, "x", time.Second); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	dial()
	dial()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		owner.mu.Lock()
		n := len(owner.conns)
		owner.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d connections tracked, want 2", n)
		}
	}
	third := dial()
	third.SetReadDeadline(time.Now().Add(time.Second)) // under the 2 s handshake deadline
	if _, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("third connection over the bound: read %v, want EOF at once", err)
	}
	if r := owner.Stats().Refused; r != 1 {
		t.Errorf("refused %d, want 1", r)
	}
}

// TestSetPeers: a host started without peers (a node joining a running
// cluster) can fetch nothing; once SetPeers names the owner it fetches
// from it; a later membership that keeps the owner at its index keeps its
// pooled connection, and one that blanks its slot (the owner left) makes
// it unusable and closes the pool.
func TestSetPeers(t *testing.T) {
	want := body(1000)
	local := &fakeLocal{objs: map[string][]byte{"/a": want}}
	_, owner := pair(t, local, testKey, testKey)
	_, peers := owner.Peers()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := New(Config{Self: -1, Key: testKey, DigestPeriod: -1, Logger: quiet}, &fakeLocal{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r := Request{URL: "/a", ETag: `"x"`, Size: int64(len(want)), Key: "/a"}
	if _, _, _, err := h.Fetch(1, r, nil); !errors.Is(err, ErrPeer) {
		t.Fatalf("fetch before SetPeers: %v, want ErrPeer", err)
	}
	steps := []struct {
		name   string
		self   int
		peers  []string
		usable bool // peer 1, the owner
		idle   int  // pooled connections to it after the step's fetch
	}{
		{"joined as node 2", 2, []string{peers[0], peers[1], "127.0.0.1:2"}, true, 1},
		{"a fourth node joins", 2, []string{peers[0], peers[1], "127.0.0.1:2", "127.0.0.1:3"}, true, 1},
		{"the owner leaves", 2, []string{peers[0], "", "127.0.0.1:2", "127.0.0.1:3"}, false, 0},
	}
	for _, s := range steps {
		old := h.m.Load()
		h.SetPeers(s.self, s.peers)
		if got := h.Usable(1); got != s.usable {
			t.Fatalf("%s: Usable(1) = %v, want %v", s.name, got, s.usable)
		}
		if i, ok := h.Index(peers[1]); ok != s.usable || ok && i != 1 {
			t.Errorf("%s: Index(owner) = %d, %v", s.name, i, ok)
		}
		if self, _ := h.Peers(); self != s.self || h.Self() != s.self {
			t.Errorf("%s: self %d, want %d", s.name, self, s.self)
		}
		_, _, _, err := h.Fetch(1, r, nil)
		if s.usable != (err == nil) {
			t.Fatalf("%s: fetch from the owner: %v", s.name, err)
		}
		m := h.m.Load()
		if n := len(m.pools[1].idle); n != s.idle {
			t.Errorf("%s: %d idle connections to the owner, want %d", s.name, n, s.idle)
		}
		if len(old.pools) > 1 && old.pools[1] != m.pools[1] && len(old.pools[1].idle) != 0 {
			t.Errorf("%s: the replaced pool still holds connections", s.name)
		}
	}
}

// TestMembersFile: what WriteMembers writes ReadMembers reads back, a
// blank slot included; malformed files are refused.
func TestMembersFile(t *testing.T) {
	var b bytes.Buffer
	peers := []string{"10.0.0.1:80", "", "node-3.example:8081"}
	if err := WriteMembers(&b, 2, peers); err != nil {
		t.Fatal(err)
	}
	if want := "shoal-peers 1\nself 2\n10.0.0.1:80\n-\nnode-3.example:8081\n"; b.String() != want {
		t.Errorf("file %q, want %q", b.String(), want)
	}
	self, got, err := ReadMembers(&b)
	if err != nil || self != 2 || strings.Join(got, ",") != strings.Join(peers, ",") {
		t.Errorf("read back self %d peers %q (%v)", self, got, err)
	}
	for _, bad := range []string{"", "shoal-peers 2\nself 0\na:1\n", "shoal-peers 1\nself x\n", "shoal-peers 1\nself 1\na:1\n",
		"shoal-peers 1\nself 1\na:1\n-\n", "shoal-peers 1\nself 0\na b:1\n", "shoal-peers 1\nself -2\n"} {
		if _, _, err := ReadMembers(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadMembers(%q) accepted", bad)
		}
	}
	if err := WriteMembers(io.Discard, 0, []string{"a b"}); err == nil {
		t.Error("WriteMembers accepted an address with a space")
	}
}

// TestStreamBoundedMemory: a 64 MiB file the owner lends from PeerFile
// reaches Stream's sink whole and in order (SHA-256), while both hosts —
// in this process, so TotalAlloc's growth is their sum — allocate far less
// than the file: the owner reads it chunk by chunk into one buffer and the
// asker keeps no body. Stream is not collapsed and counts as a fetch.
func TestStreamBoundedMemory(t *testing.T) {
	const size = 64 << 20
	local := &fakeLocal{files: map[string]int64{"/big": size}}
	cli, owner := pair(t, local, testKey, testKey)
	want := sha256.New()
	io.Copy(want, &patReader{n: size})
	r := Request{URL: "/big", ETag: `"x"`, Size: size, Key: "/big"}
	h := sha256.New()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	n, err := cli.Stream(1, r, func(p []byte) error { h.Write(p); return nil })
	runtime.ReadMemStats(&m1)
	if err != nil || n != size || !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
		t.Fatalf("stream: %d bytes, err %v, SHA-256 match %v", n, err, bytes.Equal(h.Sum(nil), want.Sum(nil)))
	}
	grew := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("allocated %d KiB over a %d MiB stream", grew>>10, size>>20)
	if grew > 8<<20 {
		t.Errorf("allocated %d MiB for a %d MiB object, want < 8 MiB", grew>>20, size>>20)
	}
	st, ost := cli.Stats(), owner.Stats()
	if st.Fetches != 1 || st.FetchBytes != size || st.Collapsed != 0 || ost.Served != 1 || ost.ServedBytes != size || ost.ServedDisk != 1 {
		t.Errorf("stats %+v, owner %+v", st, ost)
	}
}

// TestStreamFailures: a file that shrank on the owner's disk ends the
// answer mid-way (an error after the bytes it had, never a short success);
// a sink error stops the fetch with that error; a missing object is
// ErrNotFound before any byte.
func TestStreamFailures(t *testing.T) {
	const size = 300 << 10
	local := &fakeLocal{files: map[string]int64{"/f": size}, cut: 1000}
	cli, _ := pair(t, local, testKey, testKey)
	r := Request{URL: "/f", Size: size, Key: "/f"}
	n, err := cli.Stream(1, r, func([]byte) error { return nil })
	if err == nil || n >= size {
		t.Errorf("shrunk file: %d bytes, err %v; want an error short of %d", n, err, size)
	}
	local.cut = 0
	stop := errors.New("client gone")
	calls := 0
	n, err = cli.Stream(1, r, func([]byte) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 || n != Chunk {
		t.Errorf("sink error: %d bytes, %d calls, err %v", n, calls, err)
	}
	if _, err := cli.Stream(1, Request{URL: "/missing", Size: 1, Key: "/missing"}, func([]byte) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: err %v", err)
	}
	// The connection is still usable after all that.
	if n, err := cli.Stream(1, r, func([]byte) error { return nil }); err != nil || n != size {
		t.Errorf("after failures: %d bytes, err %v", n, err)
	}
}
