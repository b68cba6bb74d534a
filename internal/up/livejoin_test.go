package up

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/cluster/node"
	"shoal/internal/cluster/peer"
	"shoal/internal/cluster/publish"
	"shoal/internal/testutil"
)

// TestPartitionedLiveJoin: `shoal up --nodes 4 --replicas 2`, then a fifth
// node (started on the served version, with the cluster key, the admin
// token and the shared publish folder, as `shoal node` would be) joins
// live through the admin API's POST /nodes, and later node 1 leaves live
// through DELETE /nodes/1. The join moves at most 1.25× the newcomer's
// share and gives it exactly its share on its own disk; afterwards every
// file has two copies, every node (the newcomer too) serves every file
// with the right bytes, and the old nodes fetch from the newcomer. The
// leave copies node 1's files from the survivors; nothing is lost once it
// is stopped, and a client GETting through the front all along sees no
// error.
func TestPartitionedLiveJoin(t *testing.T) {
	dir, sums, c := startPartitioned(t, "127.0.0.1:0")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var total int64
	for u := range sums {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(u[1:])))
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}

	// A client GETs every file through the front, round after round,
	// until the end of the test.
	client := &http.Client{Timeout: 10 * time.Second}
	var stop atomic.Bool
	var gets, bad atomic.Int64
	var wg sync.WaitGroup
	urls := make([]string, 0, len(sums))
	for u := range sums {
		urls = append(urls, u)
	}
	slices.Sort(urls)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; !stop.Load(); k++ {
			u := urls[k%len(urls)]
			resp, err := client.Get(strings.TrimSuffix(c.URL, "/") + u)
			gets.Add(1)
			if err != nil {
				bad.Add(1)
				t.Errorf("background GET %s: %v", u, err)
				continue
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || sha256.Sum256(b) != sums[u] {
				bad.Add(1)
				t.Errorf("background GET %s: status %d, %d bytes (%v)", u, resp.StatusCode, len(b), err)
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()

	// The newcomer, as an operator starts it: on the version served now
	// (a full copy), accepting publishes from the shared folder with the
	// admin token, with the cluster key and no peer list (it learns the
	// members from its first partitioned version).
	key, err := peer.LoadKey(clusterKeyFile(&c.Config))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nn, err := node.New(node.Config{Root: filepath.Join(c.pubdir, publish.CurrentLink), CacheBytes: 1 << 20, CachePolicy: "gdsf",
		SharedProcess: true, Logger: quiet, TrustedFronts: loopbackFronts, PublishToken: c.AdminToken, PublishDir: c.pubdir,
		Peer: peer.Config{Self: -1, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	go nn.Serve(ln)
	defer nn.Shutdown(context.Background())
	newURL := "http://" + ln.Addr().String()

	type answer struct {
		Index     int             `json:"index"`
		Rebalance *publish.Result `json:"rebalance"`
	}

	// Join.
	code, body := testutil.AdminCall(t, "POST", c.AdminURL+"/nodes", c.AdminToken, `{"url": "`+newURL+`"}`)
	var join answer
	json.Unmarshal(body, &join)
	if code != http.StatusCreated || join.Index != 4 {
		t.Fatalf("POST /nodes = %d %s, want 201 and index 4", code, body)
	}
	roots := func(nodes []int) []string {
		var rs []string
		for _, i := range nodes {
			if i == 4 {
				rs = append(rs, nn.Store().Root())
			} else {
				rs = append(rs, c.nodes[i].Store().Root())
			}
		}
		return rs
	}
	copies := storedIn(t, roots([]int{0, 1, 2, 3, 4}), sums)
	var share int64
	for u, n := range copies {
		if n != 2 {
			t.Fatalf("after join: %s stored on %d of the 5 nodes, want 2", u, n)
		}
	}
	for u := range storedIn(t, roots([]int{4}), sums) {
		share += int64(len(mustGet(t, client, newURL, u)))
	}
	if share == 0 {
		t.Fatal("after join: the newcomer stores nothing")
	}
	p := join.Rebalance.Partition
	if join.Rebalance == nil || p == nil {
		t.Fatalf("POST /nodes answered %s: no rebalance", body)
	}
	ideal := float64(2*total) / 5
	t.Logf("join: moved %d bytes in %d copies; newcomer stores %d bytes (ideal share 2/5 of %d = %.0f); moved/share = %.3f, moved/ideal = %.3f",
		p.Moved, p.MovedFiles, share, total, ideal, float64(p.Moved)/float64(share), float64(p.Moved)/ideal)
	if float64(p.Moved) > 1.25*float64(share) || p.Written != 0 {
		t.Errorf("join moved %d bytes and wrote %d, want at most 1.25 × the newcomer's share %d and none written", p.Moved, p.Written, share)
	}
	for i, u := range append(slices.Clone(c.NodeURLs), newURL) {
		before := nn.PeerStats().Served
		if bad := fetchAll(t, client, u, sums); bad > 0 {
			t.Fatalf("after join, node %d: %d of %d files wrong", i, bad, len(sums))
		}
		if served := nn.PeerStats().Served; i < 4 && served == before {
			t.Errorf("after join, node %d fetched nothing from the newcomer", i)
		}
	}
	if bad := fetchAll(t, client, c.URL, sums); bad > 0 {
		t.Fatalf("after join, front: %d of %d files wrong", bad, len(sums))
	}

	// Leave: node 1 goes out through the admin API, then stops.
	code, body = testutil.AdminCall(t, "DELETE", c.AdminURL+"/nodes/1", c.AdminToken, "")
	var leave answer
	json.Unmarshal(body, &leave)
	if code != http.StatusOK || leave.Rebalance == nil || leave.Rebalance.Partition == nil {
		t.Fatalf("DELETE /nodes/1 = %d %s, want 200 and the rebalance", code, body)
	}
	lp := leave.Rebalance.Partition
	t.Logf("leave: moved %d bytes in %d copies, written %d", lp.Moved, lp.MovedFiles, lp.Written)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.nodes[1].Shutdown(ctx)
	for u, n := range storedIn(t, roots([]int{0, 2, 3, 4}), sums) {
		if n != 2 {
			t.Fatalf("after leave: %s on %d of the 4 survivors, want 2", u, n)
		}
	}
	for _, u := range []string{c.NodeURLs[0], c.NodeURLs[2], c.NodeURLs[3], newURL, c.URL} {
		if bad := fetchAll(t, client, u, sums); bad > 0 {
			t.Fatalf("after leave, %s: %d of %d files wrong", u, bad, len(sums))
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("background GETs through the front: %d, failed %d", gets.Load(), bad.Load())
}

// storedIn counts, for each file, the trees among roots holding it as a
// regular file (a node's own disk copy).
func storedIn(t *testing.T, roots []string, sums map[string][32]byte) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, root := range roots {
		for u := range sums {
			if fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(u[1:]))); err == nil && fi.Mode().IsRegular() {
				n[u]++
			}
		}
	}
	return n
}

// mustGet returns the body of base+u.
func mustGet(t *testing.T, client *http.Client, base, u string) []byte {
	t.Helper()
	resp, err := client.Get(base + u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s%s: %d %v", base, u, resp.StatusCode, err)
	}
	return b
}
