package up

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/testutil"
)

// peerSite writes 240 small files (4 KB, distinct bytes) and returns the
// folder and each file's SHA-256. More files than weblins' popular set
// (100): once its 5 s period has passed, popular files are served without a
// fetch, and a slow run (the race detector) must still see fetches.
func peerSite(t *testing.T) (string, map[string][32]byte) {
	t.Helper()
	site := filepath.Join(t.TempDir(), "site")
	os.MkdirAll(site, 0o755)
	sums := map[string][32]byte{}
	for i := range 240 {
		b := bytes.Repeat([]byte(fmt.Sprintf("file %03d", i)), 512)
		name := fmt.Sprintf("f%03d.txt", i)
		if err := os.WriteFile(filepath.Join(site, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		sums["/"+name] = sha256.Sum256(b)
	}
	return site, sums
}

// getAll requests every file rounds times on fresh connections (so
// weblins' layer-4 choice places each on a first member) and checks the
// bytes. Each round asks in its own shuffled order (a fixed seed): with
// equal files, weblins' round-robin first members and least-loaded owners
// advance in step through the first round, so a round in the same order
// again, or in a rotation of it by a multiple of the node count (a map's
// range order often is), sends every request to its owner and no fetch
// happens.
func getAll(t *testing.T, base string, sums map[string][32]byte, rounds int) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	urls := slices.Sorted(maps.Keys(sums))
	rng := rand.New(rand.NewPCG(1, 2))
	for range rounds {
		rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
		for _, u := range urls {
			resp, err := client.Get(base + u[1:])
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || sha256.Sum256(b) != sums[u] {
				t.Fatalf("%s: status %d, %d bytes, SHA-256 differs (%v)", u, resp.StatusCode, len(b), err)
			}
		}
	}
}

// sumPeer adds the nodes' peer counters from their status reports, waiting
// (bounded) until they show at least min fetches, each also counted as
// served.
func sumPeer(t *testing.T, c *Cluster, min uint64) control.PeerStatus {
	t.Helper()
	var sum control.PeerStatus
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		sum = control.PeerStatus{}
		for _, n := range nodeInfos(t, c) {
			if st := n.Status; st != nil && st.Peer != nil {
				sum.Fetches += st.Peer.Fetches
				sum.Failures += st.Peer.Failures
				sum.Served += st.Peer.Served
				sum.ServedDisk += st.Peer.ServedDisk
				sum.Refused += st.Peer.Refused
			}
		}
		// Reports come from each node at its own moment: wait for a set in
		// which every fetch is also counted by the owner that served it.
		if sum.Fetches >= min && sum.Served == sum.Fetches {
			break
		}
	}
	return sum
}

// TestWeblinsFetchesFromPeers: `shoal up --policy weblins` really fetches
// small files from the owner's memory, on relay (one process) and on passfd
// (node processes): the nodes report peer fetches with no failure, every
// fetch was served by an owner (served = fetches), an owner read each file
// from its disk at most once (served_disk ≤ files), and the client gets
// the files' bytes.
func TestWeblinsFetchesFromPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters; the passfd one builds the shoal binary")
	}
	site, sums := peerSite(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	check := func(t *testing.T, c *Cluster) {
		getAll(t, c.URL, sums, 3)
		p := sumPeer(t, c, 40)
		t.Logf("peer counters: %+v", p)
		if p.Fetches < 40 || p.Failures != 0 || p.Served != p.Fetches || p.ServedDisk > uint64(len(sums)) || p.Refused != 0 {
			t.Errorf("peer counters %+v: want ≥ 40 fetches, no failure, served = fetches, served_disk ≤ %d", p, len(sums))
			for _, n := range nodeInfos(t, c) {
				if st := n.Status; st != nil {
					t.Logf("node %d: up %v, %d requests sent by the front, %d served, peer %+v", n.Index, n.Up, n.Requests, st.Requests, st.Peer)
				}
			}
		}
	}
	t.Run("relay", func(t *testing.T) {
		c, err := Start(Config{Listen: "127.0.0.1:0", Admin: "off", DataDir: t.TempDir(), Nodes: 4, Site: site, Policy: "weblins",
			HealthInterval: 100 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		check(t, c)
	})
	t.Run("passfd", func(t *testing.T) {
		logs, _ := os.CreateTemp(t.TempDir(), "nodes.log")
		defer logs.Close()
		var flog testutil.SyncBuf
		p, err := StartProcs(Config{Listen: "127.0.0.1:0", Admin: "off", DataDir: t.TempDir(), Nodes: 4, Site: site, Policy: "weblins",
			HealthInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&flog, nil))}, ProcsConfig{Path: "passfd", Exe: shoalBinary(t), Stderr: logs})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			ready := 0
			for _, b := range p.Control.Backends() {
				if st := b.LastStatus(); st != nil && st.HandoffSocket != "" {
					ready++
				}
			}
			if ready == 4 {
				break
			}
			if time.Now().After(end) {
				t.Fatal("the front did not learn the handoff sockets")
			}
		}
		check(t, p.Cluster)
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("node logs:\n%s", b)
			t.Logf("front log:\n%s", flog.String())
		}
		if st := p.Front.Stats(); st.Handoff.Passed == 0 {
			t.Errorf("no connection was handed off: %+v", st.Handoff)
		}
	})
	t.Run("repair", func(t *testing.T) {
		needLab(t)
		logs, _ := os.CreateTemp(t.TempDir(), "cluster.log")
		defer logs.Close()
		r, err := StartRepair(Config{Nodes: 4, Site: site, Policy: "weblins", DataDir: t.TempDir(),
			HealthInterval: 100 * time.Millisecond, Logger: quiet}, RepairConfig{Exe: shoalBinary(t), Stderr: logs})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		check(t, r.Cluster)
	})
}

// TestCGDSFDigestsLive: in `shoal up` with cgdsf nodes, the digests each
// node sends hold the keys it caches (240 files, each cached once, in all),
// and every node holds a current digest from each of its three peers,
// sized for its cache (at least MinBits), with an expected false-positive
// rate under 1 %.
func TestCGDSFDigestsLive(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for digest rounds")
	}
	site, sums := peerSite(t)
	c, err := Start(Config{Listen: "127.0.0.1:0", Admin: "off", DataDir: t.TempDir(), Nodes: 4, Site: site, Cache: "cgdsf",
		Policy: "wrr", HealthInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	getAll(t, c.URL, sums, 1)
	// The 240 files are cached once each (wrr spreads them); the next
	// round's digests carry them all.
	keys := 0
	for end := time.Now().Add(15 * time.Second); keys != len(sums) && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		keys = 0
		for _, n := range c.nodes {
			keys += n.PeerStats().DigestKeys
		}
	}
	if keys != len(sums) {
		t.Errorf("the nodes' digests hold %d keys, want %d", keys, len(sums))
	}
	for _, n := range c.nodes {
		st := n.PeerStats()
		t.Logf("digest: %d keys in %d bits (%d bytes), expected FPR %.2g; %d peer digests", st.DigestKeys, st.DigestBits, st.DigestBits/8, st.DigestFPR, st.PeerDigests)
		if st.PeerDigests != 3 || st.DigestBits < 1024 || st.DigestFPR > 0.01 {
			t.Errorf("node peer stats %+v: want 3 peer digests, ≥ 1024 bits, FPR < 1 %%", st)
		}
	}
}
