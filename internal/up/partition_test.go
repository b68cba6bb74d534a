package up

import (
	"context"
	"crypto/sha256"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/policy"
	"shoal/internal/tools/site"
)

// genSums writes the generated sample site (small pages to files of
// megabytes) and returns it with each file's SHA-256.
func genSums(t *testing.T) (string, map[string][32]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "site")
	if _, err := site.Generate(dir, site.Config{Files: 150, MaxTotal: 6 << 20}); err != nil {
		t.Fatal(err)
	}
	sums := map[string][32]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		sums["/"+filepath.ToSlash(rel)] = sha256.Sum256(b)
		return nil
	})
	return dir, sums
}

// storedOn counts, for each file, the nodes whose own tree (the root its
// table was scanned from) holds it as a regular file.
func storedOn(t *testing.T, c *Cluster, sums map[string][32]byte, nodes []int) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, i := range nodes {
		root := c.nodes[i].Store().Root()
		for u := range sums {
			if fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(u[1:]))); err == nil && fi.Mode().IsRegular() {
				n[u]++
			}
		}
	}
	return n
}

// fetchAll GETs every file from base and checks its bytes; it returns the
// number of answers that were not a 200 with the right bytes.
func fetchAll(t *testing.T, client *http.Client, base string, sums map[string][32]byte) (bad int) {
	t.Helper()
	for u, want := range sums {
		resp, err := client.Get(strings.TrimSuffix(base, "/") + u)
		if err != nil {
			t.Errorf("GET %s%s: %v", base, u, err)
			bad++
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || sha256.Sum256(b) != want {
			t.Errorf("GET %s%s: status %d, %d bytes, SHA-256 differs (%v)", base, u, resp.StatusCode, len(b), err)
			bad++
		}
	}
	return bad
}

// startPartitioned generates a site (genSums) and starts `shoal up --nodes 4
// --replicas 2` on it, closed when the test ends; admin is Config.Admin.
func startPartitioned(t *testing.T, admin string) (dir string, sums map[string][32]byte, c *Cluster) {
	t.Helper()
	dir, sums = genSums(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := Start(Config{Listen: "127.0.0.1:0", Admin: admin, DataDir: t.TempDir(), Nodes: 4, Site: dir, Replicas: 2,
		CacheMB: 1, Policy: "wrr", HealthInterval: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return dir, sums, c
}

// TestPartitionedUp: `shoal up --nodes 4 --replicas 2`. Each file is on
// exactly two nodes' disks; every node answers every file with the right
// bytes (fetching the others from a holder); with one node killed the
// front's clients see no error and lose no file; when it is taken out
// (Leave) its files are copied from the survivors, so every file has two
// copies again, moving exactly its share.
func TestPartitionedUp(t *testing.T) {
	dir, sums, c := startPartitioned(t, "off")
	for u, n := range storedOn(t, c, sums, []int{0, 1, 2, 3}) {
		if n != 2 {
			t.Fatalf("%s stored on %d nodes, want 2", u, n)
		}
	}
	if len(storedOn(t, c, sums, []int{0, 1, 2, 3})) != len(sums) {
		t.Fatal("some files are stored nowhere")
	}
	c.Control.WithPolicy(func(_ policy.Policy, v *policy.Cluster) {
		if v.Storage == nil || v.Storage.Replicas != 2 || len(v.Storage.Nodes) != 4 {
			t.Errorf("the policy's view has storage %+v, want R = 2 over 4 nodes", v.Storage)
		}
	})
	client := &http.Client{Timeout: 10 * time.Second}
	for i, u := range c.NodeURLs {
		if bad := fetchAll(t, client, u, sums); bad > 0 {
			t.Fatalf("node %d: %d of %d files wrong", i, bad, len(sums))
		}
	}
	if bad := fetchAll(t, client, c.URL, sums); bad > 0 {
		t.Fatalf("front: %d of %d files wrong", bad, len(sums))
	}

	// Node 3 dies (no rebalance yet): nothing is lost, and the front's
	// retry and health checks hide it from clients.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.nodes[3].Shutdown(ctx)
	for round := range 2 {
		if bad := fetchAll(t, client, c.URL, sums); bad > 0 {
			t.Fatalf("node 3 dead, round %d: %d of %d requests failed", round, bad, len(sums))
		}
	}

	// Taken out: its copies are made again from the survivors.
	res, err := c.Leave(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Partition
	if p == nil || p.Written != 0 || p.Moved == 0 {
		t.Fatalf("leave: %+v", p)
	}
	t.Logf("leave: moved %d bytes in %d copies, kept %d", p.Moved, p.MovedFiles, p.Kept)
	for u, n := range storedOn(t, c, sums, []int{0, 1, 2}) {
		if n != 2 {
			t.Fatalf("after leave: %s on %d of the 3 survivors, want 2", u, n)
		}
	}
	if bad := fetchAll(t, client, c.URL, sums); bad > 0 {
		t.Fatalf("after leave: %d of %d files wrong", bad, len(sums))
	}

	// `shoal publish` of a changed site writes each file to exactly 2 of
	// the 3 nodes, new and changed files too, and every node serves them.
	b := []byte("a new page\n")
	os.WriteFile(filepath.Join(dir, "new.html"), b, 0o644)
	sums["/new.html"] = sha256.Sum256(b)
	for u := range sums {
		if u != "/new.html" {
			b := []byte("changed " + u)
			os.WriteFile(filepath.Join(dir, filepath.FromSlash(u[1:])), b, 0o644)
			sums[u] = sha256.Sum256(b)
			break
		}
	}
	if _, err := c.Publisher.Publish(ctx, dir); err != nil {
		t.Fatal(err)
	}
	for u, n := range storedOn(t, c, sums, []int{0, 1, 2}) {
		if n != 2 {
			t.Fatalf("after publish: %s on %d nodes, want 2", u, n)
		}
	}
	for i, u := range c.NodeURLs[:3] {
		if bad := fetchAll(t, client, u, sums); bad > 0 {
			t.Fatalf("after publish, node %d: %d of %d files wrong", i, bad, len(sums))
		}
	}
}
