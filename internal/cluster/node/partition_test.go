package node

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/cluster/peer"
)

// partSite writes, for n nodes, a tree per node holding the files the
// layout gives it plus the manifest listing all of them with their holders
// (node i's placement ID is its address, as `shoal up` makes it). It
// returns the roots and the files' bytes.
func partSite(t *testing.T, n int, layout map[string][]int, sizes map[string]int) ([]string, map[string][]byte) {
	t.Helper()
	roots := make([]string, n)
	for i := range roots {
		roots[i] = t.TempDir()
	}
	mt := time.Unix(1700000000, 0)
	bodies := map[string][]byte{}
	big := bigBody()
	for url, holders := range layout {
		b := []byte(big)
		for len(b) < sizes[url] {
			b = append(b, big...)
		}
		b = b[:sizes[url]]
		copy(b, url) // distinct bytes per file
		bodies[url] = b
		for _, i := range holders {
			p := filepath.Join(roots[i], url)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(p, mt, mt)
		}
	}
	return roots, bodies
}

// startPartitioned starts n peered nodes (startPeers), node i on the i-th
// tree of partSite(layout, sizes) with the manifest naming the nodes'
// addresses as holders; mod, if not nil, then edits node i's Config. It
// returns the nodes, their roots, their peer addresses and the files' bytes.
func startPartitioned(t *testing.T, n int, layout map[string][]int, sizes map[string]int,
	mod func(i int, c *Config)) (ns []*testServer, roots, addrs []string, bodies map[string][]byte) {
	t.Helper()
	roots, bodies = partSite(t, n, layout, sizes)
	ns = startPeers(t, roots[0], n, func(i int, c *Config) {
		c.Root = roots[i]
		addrs = c.Peer.Peers
		if i == 0 {
			writeManifests(t, roots, addrs, layout, bodies)
		}
		if mod != nil {
			mod(i, c)
		}
	})
	return ns, roots, addrs, bodies
}

func writeManifests(t *testing.T, roots, addrs []string, layout map[string][]int, bodies map[string][]byte) {
	t.Helper()
	mt := time.Unix(1700000000, 0)
	var files []content.ManifestFile
	for url, holders := range layout {
		var ids []string
		for _, i := range holders {
			ids = append(ids, addrs[i])
		}
		files = append(files, content.ManifestFile{URL: url, Size: int64(len(bodies[url])), ModTime: mt, Holders: ids})
	}
	for _, r := range roots {
		os.MkdirAll(filepath.Join(r, "d"), 0o755) // every folder in every tree
		f, err := os.Create(filepath.Join(r, content.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		if err := content.WriteManifest(f, files); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// TestPartitionedFetchFromHolders: with each file on two of three nodes,
// every node answers every file with the right bytes (SHA-256), small
// (cached after the fetch), large (above MaxObject: streamed, not
// kept), as a HEAD and as a range; with a holder down, the next one
// answers; with both down, 502.
func TestPartitionedFetchFromHolders(t *testing.T) {
	layout := map[string][]int{"/a.txt": {0, 1}, "/d/b.bin": {1, 2}, "/big.bin": {2, 0}, "/c.txt": {1, 2}}
	sizes := map[string]int{"/a.txt": 1000, "/d/b.bin": 90 << 10, "/big.bin": 700 << 10, "/c.txt": 10}
	ns, _, _, bodies := startPartitioned(t, 3, layout, sizes, nil)
	for i, s := range ns {
		c := s.dial(t)
		for url, want := range bodies {
			c.send(get(url))
			r := c.read(false)
			if r.status != 200 || sha256.Sum256([]byte(r.body)) != sha256.Sum256(want) {
				t.Fatalf("node %d %s: status %d, %d bytes (want %d), SHA-256 differs", i, url, r.status, len(r.body), len(want))
			}
		}
		c.send("HEAD /d/b.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read(true); r.status != 200 || r.h.Get("Content-Length") != fmt.Sprint(90<<10) {
			t.Errorf("node %d HEAD: %d %v", i, r.status, r.h)
		}
		c.send(get("/big.bin", "Range: bytes=600000-600009\r\n"))
		if r := c.read(false); r.status != 206 || r.body != string(bodies["/big.bin"][600000:600010]) {
			t.Errorf("node %d range: %d %q", i, r.status, r.body)
		}
	}
	// Node 0 fetched b.bin and c.txt (2 files, cached) and big.bin is its own.
	if st := ns[0].srv.PeerStats(); st.Fetches != 2 || st.Failures != 0 {
		t.Errorf("node 0 peer counters %+v, want 2 fetches (b.bin, c.txt; the HEAD and the range hit the cache or the own disk)", st)
	}
	// The second GET of a fetched small file is a cache hit: no new fetch.
	before := ns[0].srv.PeerStats().Fetches
	c := ns[0].dial(t)
	c.send(get("/c.txt"))
	if r := c.read(false); r.body != string(bodies["/c.txt"]) || ns[0].srv.PeerStats().Fetches != before {
		t.Errorf("cached remote file fetched again")
	}
	// Node 1 down: node 0 gets /d/b.bin (holders 1, 2) from node 2.
	shut(ns[1].srv)
	ns[0].srv.objs.Remove("/d/b.bin")
	c = ns[0].dial(t)
	c.send(get("/d/b.bin"))
	if r := c.read(false); r.status != 200 || r.body != string(bodies["/d/b.bin"]) {
		t.Fatalf("holder 1 down: status %d, %d bytes", r.status, len(r.body))
	}
	// Both holders of c.txt down: 502.
	shut(ns[2].srv)
	ns[0].srv.objs.Remove("/c.txt")
	c.send(get("/c.txt"))
	if r := c.read(false); r.status != 502 {
		t.Errorf("no holder up: status %d, want 502", r.status)
	}
}

func shut(s *Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Shutdown(ctx)
}

// TestPartitionedHintWins: the policy's hint names a peer that does not
// store the file but has it in memory: the node takes it from there, not
// from the holder. A hint naming a peer with neither a copy on disk nor in
// memory is skipped for the holder.
func TestPartitionedHintWins(t *testing.T) {
	layout := map[string][]int{"/h.txt": {2}, "/g.txt": {2}}
	sizes := map[string]int{"/h.txt": 3000, "/g.txt": 2000}
	ns, _, _, bodies := startPartitioned(t, 3, layout, sizes, nil)
	// Node 1 fetches /h.txt from node 2 and keeps it in memory.
	c1 := ns[1].dial(t)
	c1.send(get("/h.txt"))
	if r := c1.read(false); r.body != string(bodies["/h.txt"]) {
		t.Fatal("node 1: wrong body")
	}
	// The body streams to the client before node 1 keeps its copy: wait
	// for the copy, or the hint below may find it not there yet.
	for end := time.Now().Add(5 * time.Second); ns[1].srv.objs.Stats().MemoryObjects == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("node 1 never kept /h.txt")
		}
	}
	served2 := ns[2].srv.PeerStats().Served
	c0 := ns[0].dial(t)
	c0.send(get("/h.txt", "Shoal-Fetch: 1\r\n"))
	if r := c0.read(false); r.status != 200 || r.body != string(bodies["/h.txt"]) {
		t.Fatalf("hinted: status %d", r.status)
	}
	if s1, s2 := ns[1].srv.PeerStats().Served, ns[2].srv.PeerStats().Served; s1 != 1 || s2 != served2 {
		t.Errorf("served by node 1: %d (want 1), by the holder: %d more (want 0)", s1, s2-served2)
	}
	// /g.txt is nowhere but on node 2's disk: the hint to node 1 fails
	// (not found, no fetch on another's behalf) and node 2 answers.
	c0.send(get("/g.txt", "Shoal-Fetch: 1\r\n"))
	if r := c0.read(false); r.status != 200 || r.body != string(bodies["/g.txt"]) {
		t.Fatalf("hint without a copy: status %d", r.status)
	}
	if s2 := ns[2].srv.PeerStats().Served; s2 != served2+1 {
		t.Errorf("holder served %d more, want 1", s2-served2)
	}
	if st := ns[1].srv.PeerStats(); st.Fetches != 1 {
		t.Errorf("node 1 fetched %d times, want 1 (its own request only: peers never fetch for others)", st.Fetches)
	}
}

// TestPublishAdoptsPeers: a node started with the cluster key and no
// peers (joining a running cluster) cannot fetch the files it does not
// store (502); once it commits a version whose tree names the members
// (peer.MembersName) it fetches them from their holder. A prepare whose
// members file is malformed fails and changes nothing.
func TestPublishAdoptsPeers(t *testing.T) {
	layout := map[string][]int{"/a.txt": {1}, "/c.txt": {0}}
	sizes := map[string]int{"/a.txt": 1000, "/c.txt": 10}
	ns, roots, addrs, bodies := startPartitioned(t, 2, layout, sizes, func(i int, c *Config) {
		if i == 0 {
			c.Peer.Self, c.Peer.Peers = -1, nil // the newcomer knows no peer yet
		}
	})
	c := ns[0].dial(t)
	c.send(get("/a.txt"))
	if r := c.read(false); r.status != 502 {
		t.Fatalf("before the members are known: status %d, want 502", r.status)
	}
	writeMembers := func(root, body string) {
		os.WriteFile(filepath.Join(root, peer.MembersName), []byte(body), 0o644)
	}
	writeMembers(roots[0], "shoal-peers 1\nself 7\n")
	if err := ns[0].srv.PreparePublish(2, roots[0]); err == nil {
		t.Fatal("prepare with a malformed members file accepted")
	}
	writeMembers(roots[0], "shoal-peers 1\nself 0\n"+addrs[0]+"\n"+addrs[1]+"\n")
	if err := ns[0].srv.PreparePublish(3, roots[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := ns[0].srv.CommitPublish(3); err != nil {
		t.Fatal(err)
	}
	if self, peers := ns[0].srv.peer.Peers(); self != 0 || len(peers) != 2 || peers[1] != addrs[1] {
		t.Fatalf("after the commit: self %d peers %q", self, peers)
	}
	c = ns[0].dial(t)
	c.send(get("/a.txt"))
	if r := c.read(false); r.status != 200 || r.body != string(bodies["/a.txt"]) {
		t.Fatalf("after the commit: status %d, %d bytes", r.status, len(r.body))
	}
}
