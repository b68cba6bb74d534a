package node

import (
	"bufio"
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/peerwire"
	"shoal/internal/cluster/peer"
	"shoal/internal/testutil"
)

var peerKey = []byte("node-test-cluster-key-0123456789")

// peerSite writes a site with a 90 KB file (small in Weblins' sense, more
// than one 64 KiB peer frame) and returns the root and the file's bytes.
func peerSite(t *testing.T) (string, []byte) {
	t.Helper()
	root := t.TempDir()
	b := []byte(bigBody()[:90<<10])
	if err := os.WriteFile(filepath.Join(root, "small.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte(helloBody), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, b
}

// startPeers starts n nodes over root that know each other as peers (node
// i is index i) and trust loopback as their front.
func startPeers(t *testing.T, root string, n int, mod func(i int, c *Config)) []*testServer {
	t.Helper()
	var lns []net.Listener
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	var out []*testServer
	for i := range n {
		cfg := Config{Root: root, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxObject: 500 << 10,
			TrustedFronts: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
			Peer:          peer.Config{Self: i, Peers: addrs, Key: peerKey, DigestPeriod: -1}}
		if mod != nil {
			mod(i, &cfg)
		}
		srv, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ts := &testServer{srv: srv, addr: addrs[i], done: make(chan error, 1)}
		go func() { ts.done <- srv.Serve(lns[i]) }()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		})
		out = append(out, ts)
	}
	return out
}

// TestPeerFetchRelay: node 0 asked for a small file with the front's
// "Shoal-Fetch: 1" gets it from node 1's memory: three requests, node 1
// reads its disk once and serves the rest from memory, node 0 never reads
// its disk or keeps a copy, and the client's bytes match the file.
// Without the header, node 0 reads its own disk.
func TestPeerFetchRelay(t *testing.T) {
	root, want := peerSite(t)
	ns := startPeers(t, root, 2, nil)
	c := ns[0].dial(t)
	for range 3 {
		c.send(get("/small.bin", "Shoal-Fetch: 1\r\n"))
		r := c.read(false)
		if r.status != 200 || sha256.Sum256([]byte(r.body)) != sha256.Sum256(want) {
			t.Fatalf("status %d, %d bytes, SHA-256 differs", r.status, len(r.body))
		}
	}
	// A streamed fetch is counted once its answer has ended, on both
	// nodes, which may be just after the client read its last byte.
	a, b := ns[0].srv.PeerStats(), ns[1].srv.PeerStats()
	for deadline := time.Now().Add(5 * time.Second); (a.Fetches < 3 || b.Served < 3) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		a, b = ns[0].srv.PeerStats(), ns[1].srv.PeerStats()
	}
	if a.Fetches != 3 || a.FetchBytes != 3*uint64(len(want)) || a.Failures != 0 {
		t.Errorf("node 0: %+v", a)
	}
	if b.Served != 3 || b.ServedDisk != 1 {
		t.Errorf("node 1 served %d (from disk %d), want 3 (1)", b.Served, b.ServedDisk)
	}
	if st := ns[0].srv.Status(); st.Peer == nil || st.Peer.Fetches != 3 {
		t.Errorf("status report's peer section: %+v", st.Peer)
	}
	if n := ns[0].srv.objs.Stats().MemoryObjects; n != 0 {
		t.Errorf("node 0 caches %d objects after fetching, want 0 (the owner holds the copy)", n)
	}
	c.send(get("/small.bin"))
	if r := c.read(false); r.body != string(want) || ns[0].srv.PeerStats().Fetches != 3 || ns[0].srv.objs.Stats().MemoryObjects != 1 {
		t.Errorf("without the header: fetches %d, cache %d", ns[0].srv.PeerStats().Fetches, ns[0].srv.objs.Stats().MemoryObjects)
	}
}

// TestPeerFetchHintNeedsFront: the header from a client that is not a
// trusted front is ignored (the node reads its disk); so is a hint naming
// the node itself or no node.
func TestPeerFetchHintNeedsFront(t *testing.T) {
	root, want := peerSite(t)
	ns := startPeers(t, root, 2, func(i int, c *Config) {
		if i == 0 {
			c.TrustedFronts = nil
		}
	})
	c := ns[0].dial(t)
	c.send(get("/small.bin", "Shoal-Fetch: 1\r\n"))
	if r := c.read(false); r.body != string(want) {
		t.Fatal("wrong body")
	}
	c1 := ns[1].dial(t)
	for _, h := range []string{"Shoal-Fetch: 1\r\n", "Shoal-Fetch: 9\r\n", "Shoal-Fetch: x\r\n"} {
		c1.send(get("/hello.txt", h))
		if r := c1.read(false); r.body != helloBody {
			t.Fatal("wrong body")
		}
	}
	if a, b := ns[0].srv.PeerStats(), ns[1].srv.PeerStats(); a.Fetches+b.Fetches != 0 || a.Served+b.Served != 0 {
		t.Errorf("a hint from an untrusted client or naming no peer was followed: %+v %+v", a, b)
	}
}

// TestPeerFetchRangeAndHead: a fetched object answers a range and a HEAD
// through the ordinary path (no streaming), with the file's bytes.
func TestPeerFetchRangeAndHead(t *testing.T) {
	root, want := peerSite(t)
	ns := startPeers(t, root, 2, nil)
	c := ns[0].dial(t)
	c.send(get("/small.bin", "Shoal-Fetch: 1\r\n", "Range: bytes=100-199\r\n"))
	if r := c.read(false); r.status != 206 || r.body != string(want[100:200]) {
		t.Errorf("range: %d %q", r.status, r.body)
	}
	c.send("HEAD /small.bin HTTP/1.1\r\nHost: x\r\nShoal-Fetch: 1\r\n\r\n")
	if r := c.read(true); r.status != 200 || r.h.Get("Content-Length") != "92160" {
		t.Errorf("head: %d %v", r.status, r.h)
	}
	if a := ns[0].srv.PeerStats(); a.Fetches != 2 {
		t.Errorf("fetches %d, want 2", a.Fetches)
	}
}

// hintHanded is a handed-off connection whose handoff message named a
// node to fetch from (handoff.FDConn.FetchHint).
type hintHanded struct {
	fakeHanded
	hint int
}

func (h *hintHanded) FetchHint() int { return h.hint }

// TestPeerFetchPassfd: the decision comes in the handoff message: node 0
// serves the handed connection's first request from node 1's memory (node
// 1 reads its disk once), and later requests on the connection, which the
// front did not decide, from its own disk.
func TestPeerFetchPassfd(t *testing.T) {
	root, want := peerSite(t)
	ns := startPeers(t, root, 2, nil)
	for round := range 2 {
		client, server := testutil.TCPPair(t)
		f := &hintHanded{fakeHanded: fakeHanded{Conn: server, pre: []byte(get("/small.bin")), back: make(chan []byte, 1), ended: make(chan struct{})}, hint: 1}
		one := &oneConnListener{c: f, done: make(chan struct{})}
		go ns[0].srv.Serve(one)
		client.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(client)
		if got := readBody(t, br); sha256.Sum256([]byte(got)) != sha256.Sum256(want) {
			t.Fatalf("round %d: handed request: SHA-256 differs (%d bytes)", round, len(got))
		}
		if round == 1 {
			client.Write([]byte(get("/small.bin")))
			if got := readBody(t, br); got != string(want) {
				t.Fatal("second request: wrong body")
			}
		}
		client.Close()
		close(one.done)
		// The client can have every byte before the fetch is over and
		// counted; a next round started earlier would join it.
		for end := time.Now().Add(5 * time.Second); ns[0].srv.PeerStats().Fetches < uint64(round+1) && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
	}
	a, b := ns[0].srv.PeerStats(), ns[1].srv.PeerStats()
	if a.Fetches != 2 || b.Served != 2 || b.ServedDisk != 1 || ns[0].srv.objs.Stats().MemoryObjects != 1 {
		t.Errorf("node 0 %+v (cache %d), node 1 %+v", a, ns[0].srv.objs.Stats().MemoryObjects, b)
	}
}

// TestPeerFetchFallback: when the named peer is down the node serves from
// its own disk and counts a failure.
func TestPeerFetchFallback(t *testing.T) {
	root, want := peerSite(t)
	ns := startPeers(t, root, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ns[1].srv.Shutdown(ctx)
	c := ns[0].dial(t)
	c.send(get("/small.bin", "Shoal-Fetch: 1\r\n"))
	if r := c.read(false); r.status != 200 || r.body != string(want) {
		t.Fatalf("status %d", r.status)
	}
	if a := ns[0].srv.PeerStats(); a.Failures != 1 || a.Fetches != 0 {
		t.Errorf("stats %+v", a)
	}
}

// TestPeerPortRefusesForgedPeer: on a node's own port, a peer connection
// without the cluster key is refused in the handshake and counted; no
// object byte is sent.
func TestPeerPortRefusesForgedPeer(t *testing.T) {
	root, want := peerSite(t)
	ns := startPeers(t, root, 2, nil)
	nc, err := net.Dial("tcp", ns[1].addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(nc, "GET /.shoal/peer HTTP/1.1\r\nHost: x\r\nUpgrade: shoal-peer\r\nConnection: Upgrade\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(&byteReader{nc}), nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	cfg := peerwire.DefaultConfig(1, []byte("a-forger-without-the-cluster-key"))
	if _, err := peerwire.Client(nc, &cfg); err == nil {
		t.Fatal("handshake with a wrong key succeeded")
	}
	rest, _ := io.ReadAll(nc)
	if strings.Contains(string(rest), string(want[:64])) {
		t.Fatal("object bytes sent to a forger")
	}
	for end := time.Now().Add(5 * time.Second); ns[1].srv.PeerStats().Refused == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if r := ns[1].srv.PeerStats().Refused; r != 1 {
		t.Errorf("refused %d, want 1", r)
	}
}

// byteReader reads one byte at a time, so http.ReadResponse leaves the
// bytes after the 101 head on the connection.
type byteReader struct{ c net.Conn }

func (b *byteReader) Read(p []byte) (int, error) { return b.c.Read(p[:min(len(p), 1)]) }

// TestClusterGDSFLiveEvictsDuplicate: two cgdsf nodes. Node 1 caches
// "/dup" and sends its digest; node 0 then caches "/one", "/two" and
// "/dup" (each 10 KB, three fit its 40 KB budget) and a fourth file
// arrives: cgdsf evicts "/dup", whose other copy node 1's digest shows
// (cost C/10, so the newcomer, asked for as often, is worth more). The
// same run without the digest turns "/new" away: every candidate victim
// is worth as much as it (one request each, the same size and cost), and
// the store's admission keeps what is cached on a tie.
func TestClusterGDSFLiveEvictsDuplicate(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"one", "two", "dup", "new"} {
		os.WriteFile(filepath.Join(root, n), []byte(strings.Repeat(n[:1], 10<<10)), 0o644)
	}
	for _, tc := range []struct {
		digest bool
		victim string
	}{{true, "/dup"}, {false, "/new"}} {
		ns := startPeers(t, root, 2, func(i int, c *Config) { c.CachePolicy = "cgdsf"; c.CacheBytes = 40 << 10 })
		c1 := ns[1].dial(t)
		c1.send(get("/dup"))
		c1.read(false)
		if tc.digest {
			ns[1].srv.peer.DigestRound()
			if !ns[0].srv.peer.CachedElsewhere("/dup") {
				t.Fatal("node 0 did not learn node 1's digest")
			}
		}
		c0 := ns[0].dial(t)
		for _, p := range []string{"/one", "/two", "/dup", "/new"} {
			c0.send(get(p))
			c0.read(false)
		}
		var kept []string
		ns[0].srv.CacheKeys(func(k string) { kept = append(kept, k) })
		if len(kept) != 3 || strings.Contains(strings.Join(kept, " "), tc.victim) {
			t.Errorf("digest %v: node 0 keeps %v, want all but %s", tc.digest, kept, tc.victim)
		}
	}
}

// TestHandleCachedNoAllocWithPeers: with peer fetch on, cgdsf asking the
// peers' digests on every hit, and a fetch hint in the request (ignored on
// a hit), a cached GET still allocates nothing.
func TestHandleCachedNoAllocWithPeers(t *testing.T) {
	root, _ := peerSite(t)
	ns := startPeers(t, root, 2, func(i int, c *Config) { c.CachePolicy = "cgdsf" })
	c1 := ns[1].dial(t)
	c1.send(get("/hello.txt"))
	c1.read(false)
	ns[1].srv.peer.DigestRound()
	srv := ns[0].srv
	c := newConn(srv, discardConn{})
	c.front = true
	now := time.Now()
	req := "GET /hello.txt HTTP/1.1\r\nHost: x\r\nShoal-Fetch: 1\r\n\r\n"
	run := func() {
		c.r, c.w = 0, copy(c.buf, req)
		c.process(now)
	}
	c.r, c.w = 0, copy(c.buf, get("/hello.txt")) // cached here from the disk
	c.process(now)
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Errorf("%v allocations per cached request", n)
	}
	if !srv.peer.CachedElsewhere("/hello.txt") {
		t.Error("the digest was not consulted")
	}
}

// movedHint is a connection rebuilt by the repair path whose handoff
// state named a node to fetch from (handoff's movedConn.FetchHint): not a
// Handed connection, just a net.Conn with the hint.
type movedHint struct {
	net.Conn
	hint int
}

func (m *movedHint) FetchHint() int { return m.hint }

// TestPeerFetchRepair: a repair-moved connection's first request comes
// from the named peer's memory; the client gets the file's bytes.
func TestPeerFetchRepair(t *testing.T) {
	root, want := peerSite(t)
	ns := startPeers(t, root, 2, nil)
	client, server := testutil.TCPPair(t)
	one := &oneConnListener{c: &movedHint{Conn: server, hint: 1}, done: make(chan struct{})}
	defer close(one.done)
	go ns[0].srv.Serve(one)
	client.SetDeadline(time.Now().Add(10 * time.Second))
	client.Write([]byte(get("/small.bin")))
	if got := readBody(t, bufio.NewReader(client)); sha256.Sum256([]byte(got)) != sha256.Sum256(want) {
		t.Fatalf("SHA-256 differs (%d bytes)", len(got))
	}
	// The fetch is counted after its last byte reached the client.
	for end := time.Now().Add(5 * time.Second); ns[0].srv.PeerStats().Fetches == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if a, b := ns[0].srv.PeerStats(), ns[1].srv.PeerStats(); a.Fetches != 1 || b.ServedDisk != 1 {
		t.Errorf("node 0 %+v, node 1 %+v", a, b)
	}
}
