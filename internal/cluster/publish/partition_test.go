package publish

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"shoal/internal/base/content"
	"shoal/internal/cluster/peer"
	"shoal/internal/cluster/placement"
	"shoal/internal/tools/site"
)

// partCluster is a coordinator over fakes whose membership the test
// changes; node i's placement ID is "node-<i>", weight weights[i].
type partCluster struct {
	co      *Coordinator
	members []*fake
	weights map[string]float64
}

func newPartCluster(t *testing.T, r, n int) *partCluster {
	t.Helper()
	pc := &partCluster{weights: map[string]float64{}}
	for i := range n {
		pc.add(t, fmt.Sprintf("node-%d", i), 1)
	}
	var err error
	pc.co, err = New(Config{Versions: filepath.Join(t.TempDir(), "versions"), Replicas: r,
		Nodes: func() []Participant {
			ps := make([]Participant, len(pc.members))
			for i, m := range pc.members {
				ps[i] = m
			}
			return ps
		},
		Place: func(ps []Participant) []placement.Node {
			ns := make([]placement.Node, len(ps))
			for i, p := range ps {
				ns[i] = placement.Node{ID: p.Name(), Weight: pc.weights[p.Name()]}
			}
			return ns
		}})
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

func (pc *partCluster) add(t *testing.T, id string, w float64) {
	empty := t.TempDir()
	st, err := content.Open(empty)
	if err != nil {
		t.Fatal(err)
	}
	pc.members = append(pc.members, &fake{name: id, store: st})
	pc.weights[id] = w
}

// genSite writes the generated sample site (a few hundred files, sizes
// from the site package's lognormal-Pareto mix).
func genSite(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "site")
	if _, err := site.Generate(dir, site.Config{Files: 400, MaxTotal: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkCopies asserts that every file of the version is stored as a
// regular file in exactly r of the members' trees — the ones the manifest
// names — and that every member's table lists every file.
func checkCopies(t *testing.T, pc *partCluster, res Result, r int) {
	t.Helper()
	full, err := content.Open(res.Root)
	if err != nil {
		t.Fatal(err)
	}
	if res.Partition == nil {
		t.Fatal("publish wrote no partition")
	}
	for _, e := range full.Snapshot().Entries() {
		if e.IsDir {
			continue
		}
		var holders []string
		for i, m := range pc.members {
			fi, err := os.Lstat(filepath.Join(res.Partition.Roots[i], filepath.FromSlash(e.URL[1:])))
			if err == nil && fi.Mode().IsRegular() {
				holders = append(holders, m.name)
			}
			got := m.store.Snapshot().Exact(e.URL)
			if got == nil || got.ETag != e.ETag {
				t.Fatalf("%s: node %s lists %+v, want ETag %s", e.URL, m.name, got, e.ETag)
			}
			if got.Remote == slices.Contains(holders, m.name) {
				t.Fatalf("%s: node %s Remote=%v but stores it: %v", e.URL, m.name, got.Remote, holders)
			}
		}
		if len(holders) != r {
			t.Fatalf("%s stored on %d nodes %v, want %d", e.URL, len(holders), holders, r)
		}
		man := pc.members[0].store.Snapshot().Exact(e.URL).Holders
		if !slices.Equal(slices.Sorted(slices.Values(man)), holders) {
			t.Fatalf("%s: manifest holders %v, stored on %v", e.URL, man, holders)
		}
	}
}

// TestPartitionEachFileOnRNodes: with R = 2 of 4 nodes, a publish writes
// each file to exactly 2 node trees (the manifest's holders), every node's
// table lists the whole site, and the nodes' bytes follow their weights.
func TestPartitionEachFileOnRNodes(t *testing.T) {
	pc := newPartCluster(t, 2, 4)
	res, err := pc.co.Publish(context.Background(), genSite(t))
	if err != nil {
		t.Fatal(err)
	}
	checkCopies(t, pc, res, 2)
	p := res.Partition
	var total int64
	for _, b := range p.NodeBytes {
		total += b
	}
	if p.Kept+p.Moved != 0 || p.Written != total {
		t.Errorf("first publish: kept %d moved %d written %d of %d", p.Kept, p.Moved, p.Written, total)
	}
	t.Logf("node bytes %v", p.NodeBytes)
}

// TestPartitionJoinLeave: for R = 1, 2, 3 over 4 nodes, a fifth node
// (weight 2) joins (Rebalance): the bytes moved are at most 1.25× its ideal
// share (the bytes it should hold) and nothing comes from the publisher;
// then a node leaves: its copies are made again from the survivors (R ≥ 2;
// with R = 1 they come from the publisher's snapshot), every file has R
// copies.
func TestPartitionJoinLeave(t *testing.T) {
	ctx := context.Background()
	dir := genSite(t)
	for r := 1; r <= 3; r++ {
		pc := newPartCluster(t, r, 4)
		if _, err := pc.co.Publish(ctx, dir); err != nil {
			t.Fatal(err)
		}
		pc.add(t, "node-4", 2)
		res, err := pc.co.Rebalance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkCopies(t, pc, res, r)
		p := res.Partition
		ideal := p.NodeBytes[4]
		ratio := float64(p.Moved) / float64(ideal)
		t.Logf("R=%d join: moved %d bytes (%d files), ideal %d, ratio %.3f; written %d", r, p.Moved, p.MovedFiles, ideal, ratio, p.Written)
		if ideal == 0 || ratio > 1.25 || p.Written != 0 {
			t.Errorf("R=%d join moved %d bytes for an ideal share of %d (ratio %.3f, want ≤ 1.25), %d from the publisher", r, p.Moved, ideal, ratio, p.Written)
		}

		// node-1 leaves (or dies: it is not asked for anything).
		gone := pc.members[1]
		pc.members = slices.Delete(pc.members, 1, 2)
		lostShare := p.NodeBytes[1]
		res, err = pc.co.Rebalance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkCopies(t, pc, res, r)
		p = res.Partition
		t.Logf("R=%d leave of %s: moved %d bytes, written %d, its share was %d", r, gone.name, p.Moved, p.Written, lostShare)
		moved, written := lostShare, int64(0)
		if r == 1 {
			moved, written = 0, lostShare // no other copy: the snapshot sends it again
		}
		if p.Moved != moved || p.Written != written {
			t.Errorf("R=%d leave: moved %d written %d, want %d and %d", r, p.Moved, p.Written, moved, written)
		}
	}
}

// TestPartitionOffByDefault: without Replicas every node serves the whole
// version, as before partitioned storage.
func TestPartitionOffByDefault(t *testing.T) {
	pc := newPartCluster(t, 0, 3)
	res, err := pc.co.Publish(context.Background(), genSite(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Partition != nil {
		t.Fatalf("partition %+v without replicas", res.Partition)
	}
	for _, m := range pc.members {
		if m.store.Root() != res.Root || m.store.Snapshot().Remote() != 0 {
			t.Errorf("%s serves %s (%d remote), want the whole version %s", m.name, m.store.Root(), m.store.Snapshot().Remote(), res.Root)
		}
	}
	if _, err := os.Stat(res.Root + nodesSuffix); err == nil {
		t.Error("per-node trees written for full copies")
	}
}

// TestPartitionMembers: with Config.Members set, each node's tree of a
// partitioned version carries the membership (peer.MembersName) read at
// the publish, naming that node's own index; a rebalance after a join
// names the newcomer, after a leave the blanked slot; without Members no
// tree has the file.
func TestPartitionMembers(t *testing.T) {
	ctx := context.Background()
	pc := newPartCluster(t, 2, 3)
	members := []string{"node-0", "node-1", "node-2"}
	pc.co.cfg.Members = func() []string { return members }
	if _, err := pc.co.Publish(ctx, genSite(t)); err != nil {
		t.Fatal(err)
	}
	pc.add(t, "node-3", 1)
	members = append(members, "node-3")
	steps := []struct {
		name  string
		apply func()
		want  []string
	}{
		{"join", func() {}, []string{"node-0", "node-1", "node-2", "node-3"}},
		{"leave", func() { pc.members = slices.Delete(pc.members, 1, 2); members[1] = "" }, []string{"node-0", "", "node-2", "node-3"}},
	}
	for _, s := range steps {
		s.apply()
		res, err := pc.co.Rebalance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k, root := range res.Partition.Roots {
			f, err := os.Open(filepath.Join(root, peer.MembersName))
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			self, peers, err := peer.ReadMembers(f)
			f.Close()
			if err != nil || !slices.Equal(peers, s.want) || self < 0 || peers[self] != res.Partition.Nodes[k] {
				t.Errorf("%s: tree %d (%s) names self %d of %q (%v), want its own index in %q", s.name, k, res.Partition.Nodes[k], self, peers, err, s.want)
			}
		}
	}
	pc.co.cfg.Members = nil
	res, err := pc.co.Rebalance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(res.Partition.Roots[0], peer.MembersName)); err == nil {
		t.Error("a membership file without Config.Members")
	}
}
