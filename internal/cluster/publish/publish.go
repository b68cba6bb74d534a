// Package publish pushes a new version of a site to every node of a cluster
// and switches them together (docs/publish.md).
//
// A publish has three steps, run by one Coordinator (the front, or `shoal
// up`, which own the list of nodes):
//
//  1. Snapshot: the operator's folder is copied into an immutable version
//     folder VERSIONS/vNNNNNN, unchanged files hard-linked from the previous
//     version (snapshot.go), so that editing the folder afterwards cannot
//     change what is served, and a file's ETag (mtime and size) changes
//     exactly when its bytes do.
//  2. Prepare, on every node at once: the node scans the version's tree and
//     holds the table ready without serving it. Any failure (a node down, a
//     tree it cannot read) aborts the publish on every node: nothing
//     switches, the old version goes on being served everywhere.
//  3. Commit, on every node at once: each node swaps its table pointer
//     (content.Store.Commit) and drops changed objects from its cache. A
//     commit cannot fail for a reason the prepare did not already check, so
//     after a successful prepare the nodes switch within the time it takes
//     to send them one small message each: the switch window, measured and
//     returned in Result.Switch.
//
// The guarantee (the "version switch"): every response comes wholly from one
// version, each node moves from the old version to the new one exactly once
// and never back, no node serves the new version before every node has it
// prepared, and when Publish returns every node serves it. Within the switch
// window two nodes may answer from different versions.
package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/cluster/placement"
)

// Participant is one node as the coordinator sees it.
type Participant interface {
	// Name identifies the node in errors and logs (its URL).
	Name() string
	// Prepare makes the node scan root, the tree of version v, without
	// serving it.
	Prepare(ctx context.Context, v uint64, root string) error
	// Commit switches the node to the prepared version v.
	Commit(ctx context.Context, v uint64) (content.Diff, error)
	// Abort drops the prepared version v.
	Abort(ctx context.Context, v uint64) error
}

// Config configures a Coordinator. Zero fields take the defaults shown.
type Config struct {
	// Versions is the folder of version trees (VERSIONS/v000001, …); nodes
	// must see it at the same path (one host, or a shared filesystem).
	// Required.
	Versions string
	// Current is the tree the nodes serve before the first publish: the
	// previous version unchanged files are linked from. Optional.
	Current string
	// Keep is how many version trees stay on disk, the served one
	// included; older ones are removed after a publish. Default 3: the
	// served version, the one before it (connections still sending its
	// files) and one more to go back to by hand.
	Keep int
	// Timeout bounds each phase on each node. Default 30 s for prepare
	// (a scan of a large tree), and the same for commit.
	Timeout time.Duration
	// SnapshotTimeout bounds the copy of the site into its version folder
	// (it holds the publish lock, so a stuck or endless tree must not hold
	// it for ever). Default 10 minutes: a few GB of changed files.
	SnapshotTimeout time.Duration
	// Nodes returns the participants of a publish, read at its start.
	Nodes func() []Participant
	// OnCommit, when set, is told the new version's tree and what changed
	// once every node switched (the front's own tables, such as the file
	// sizes the hybrid path reads).
	OnCommit func(v uint64, root string, d content.Diff)
	// Logger receives one line per publish. Default slog.Default().
	Logger *slog.Logger
	// Replicas is how many nodes store each file (partition.go): 0, or
	// at least the number of nodes, gives every node the whole site (the
	// behaviour before partitioned storage). Below that, Place must be
	// set.
	Replicas int
	// Place returns the placement identity (ID and disk weight) of each
	// participant of a publish, in the same order. The IDs are what the
	// nodes know their peers by (their addresses).
	Place func(nodes []Participant) []placement.Node
	// Members, when set, returns the cluster's node addresses in the
	// front's order ("" for a slot whose node left), read at the start of
	// each partitioned publish and written into every node's tree
	// (peer.MembersName) with that node's index, so a running node learns
	// who joined or left from the version that moves the files
	// (partition.go). Each participant's placement ID should be one of
	// them. Default nil: the nodes keep the peers they started with.
	Members func() []string
}

// Result describes a publish.
type Result struct {
	// Version is the new site version; Root its tree.
	Version uint64 `json:"version"`
	Root    string `json:"root"`
	// Nodes is how many nodes switched.
	Nodes int `json:"nodes"`
	// Files in the version; Linked of them unchanged (hard links), Copied
	// new or changed; Bumped had their time moved on (see snapshot).
	Files  int `json:"files"`
	Linked int `json:"linked"`
	Copied int `json:"copied"`
	Bumped int `json:"bumped"`
	// Added, Changed and Removed list the URLs that changed (from the
	// first node's diff; every node has the same tree).
	Added   []string `json:"added"`
	Changed []string `json:"changed"`
	Removed []string `json:"removed"`
	// Snapshot, Prepare and Switch time the three steps; Switch is the
	// window in which nodes may answer from different versions.
	Snapshot time.Duration `json:"snapshot_ns"`
	Prepare  time.Duration `json:"prepare_ns"`
	Switch   time.Duration `json:"switch_ns"`
	// Partition says where the files went when the site is partitioned
	// (Config.Replicas below the node count); nil for full copies.
	Partition *Partition `json:"partition,omitempty"`
}

// Coordinator runs publishes one at a time.
type Coordinator struct {
	cfg     Config
	mu      sync.Mutex
	version uint64
	current string
	ours    bool // current is one of our version trees (may be hard-linked from)
	// trees maps each node's placement ID to the tree it serves now (its
	// partition, or the whole version), the source of the next
	// partitioned publish's kept and moved copies.
	trees map[string]string
}

// CurrentLink is the symlink in the versions folder that names the version
// last published: start a node with --root VERSIONS/current and it comes
// back after a restart serving the site as last published.
const CurrentLink = "current"

// New checks cfg, creates the versions folder and continues numbering after
// the highest version already in it.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Versions == "" {
		return nil, errors.New("publish: no versions folder")
	}
	if cfg.Nodes == nil {
		return nil, errors.New("publish: no nodes")
	}
	if cfg.Replicas > 0 && cfg.Place == nil {
		return nil, errors.New("publish: replicas without a placement of the nodes")
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 3
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.SnapshotTimeout <= 0 {
		cfg.SnapshotTimeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	abs, err := filepath.Abs(cfg.Versions)
	if err != nil {
		return nil, fmt.Errorf("publish: versions folder: %w", err)
	}
	cfg.Versions = abs
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("publish: versions folder: %w", err)
	}
	c := &Coordinator{cfg: cfg, current: cfg.Current}
	for _, v := range c.versions() {
		c.version = max(c.version, v)
	}
	if t, err := filepath.EvalSymlinks(filepath.Join(abs, CurrentLink)); err == nil && c.current == "" {
		c.current, c.ours = t, true
	}
	return c, nil
}

// Version is the last version published (0 before the first).
func (c *Coordinator) Version() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

func versionDir(v uint64) string { return fmt.Sprintf("v%06d", v) }

// versions lists the version numbers with a folder.
func (c *Coordinator) versions() []uint64 {
	ents, _ := os.ReadDir(c.cfg.Versions)
	var out []uint64
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || len(name) < 2 || name[0] != 'v' || strings.HasSuffix(name, ".tmp") {
			continue
		}
		if v, err := strconv.ParseUint(name[1:], 10, 64); err == nil {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// ErrNoNodes is returned when there is no node to publish to.
var ErrNoNodes = errors.New("publish: the cluster has no nodes")

// Publish snapshots the site at dir as the next version, prepares it on
// every node, and commits it on every node (see the package doc). On error
// no node has switched, unless the error says which nodes failed to commit
// (a node that went away between the two phases).
func (c *Coordinator) Publish(ctx context.Context, dir string) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.publish(ctx, dir)
}

// Rebalance publishes the served version again to the current
// participants: after a node joined or left (or died), each file is copied
// from a surviving holder to the nodes placement now gives it, so there
// are again Replicas copies and the newcomer holds exactly its share. The
// content does not change (same ETags; no cache is invalidated).
func (c *Coordinator) Rebalance(ctx context.Context) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == "" {
		return Result{}, errors.New("publish: rebalance: no version served yet")
	}
	return c.publish(ctx, c.current)
}

// Seed writes the first version of the site at dir for nodes that are not
// running yet (`shoal up` with partitioned storage starts each node on its
// own tree): the snapshot and, when partitioned, the per-node trees, whose
// roots it returns in nodes' order (every node the snapshot for full
// copies). No node is prepared or switched.
func (c *Coordinator) Seed(dir string, nodes []placement.Node) ([]string, Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.version + 1
	res := Result{Version: v, Root: filepath.Join(c.cfg.Versions, versionDir(v)), Nodes: len(nodes)}
	sctx, cancel := context.WithTimeout(context.Background(), c.cfg.SnapshotTimeout)
	st, err := snapshot(sctx, dir, res.Root, c.current, c.ours)
	cancel()
	if err != nil {
		return nil, Result{}, fmt.Errorf("publish: %w", err)
	}
	res.Files, res.Linked, res.Copied, res.Bumped = st.Files, st.Linked, st.Copied, st.Bumped
	roots, err := c.place(&res, nodes)
	if err != nil {
		os.RemoveAll(res.Root)
		return nil, Result{}, err
	}
	c.version, c.current, c.ours = v, res.Root, true
	c.pointCurrent(v)
	return roots, res, nil
}

// place partitions res's version over nodes when Replicas asks for it,
// recording the trees, and returns each node's root.
func (c *Coordinator) place(res *Result, nodes []placement.Node) ([]string, error) {
	roots := make([]string, len(nodes))
	trees := make(map[string]string, len(nodes))
	if partitioned(c.cfg.Replicas, nodes) {
		var members []string
		if c.cfg.Members != nil {
			members = c.cfg.Members()
		}
		p, err := partition(res.Root, nodes, c.cfg.Replicas, c.trees, members)
		if err != nil {
			return nil, fmt.Errorf("publish version %d: %w", res.Version, err)
		}
		res.Partition = &p
		copy(roots, p.Roots)
	} else {
		for i := range roots {
			roots[i] = res.Root
		}
	}
	for i, n := range nodes {
		trees[n.ID] = roots[i]
	}
	c.trees = trees
	return roots, nil
}

func (c *Coordinator) publish(ctx context.Context, dir string) (Result, error) {
	nodes := c.cfg.Nodes()
	if len(nodes) == 0 {
		return Result{}, ErrNoNodes
	}
	v := c.version + 1
	res := Result{Version: v, Root: filepath.Join(c.cfg.Versions, versionDir(v)), Nodes: len(nodes)}
	t0 := time.Now()
	// Hard links only into our own version trees: the tree the nodes
	// started with may be the operator's working folder, where a file
	// truncated and rewritten in place would change a linked version.
	prev := c.current
	sctx, cancel := context.WithTimeout(ctx, c.cfg.SnapshotTimeout)
	st, err := snapshot(sctx, dir, res.Root, prev, c.ours)
	cancel()
	if err != nil {
		return Result{}, fmt.Errorf("publish: %w", err)
	}
	res.Files, res.Linked, res.Copied, res.Bumped = st.Files, st.Linked, st.Copied, st.Bumped
	roots := make([]string, len(nodes))
	for i := range roots {
		roots[i] = res.Root
	}
	prevTrees := c.trees
	if c.cfg.Place != nil {
		if roots, err = c.place(&res, c.cfg.Place(nodes)); err != nil {
			os.RemoveAll(res.Root)
			return Result{}, err
		}
	}
	res.Snapshot = time.Since(t0)

	t1 := time.Now()
	errs := each(ctx, nodes, c.cfg.Timeout, func(ctx context.Context, i int, p Participant) error {
		return p.Prepare(ctx, v, roots[i])
	})
	if err := errors.Join(errs...); err != nil {
		each(context.WithoutCancel(ctx), nodes, c.cfg.Timeout, func(ctx context.Context, _ int, p Participant) error {
			return p.Abort(ctx, v)
		})
		c.trees = prevTrees
		os.RemoveAll(res.Root)
		os.RemoveAll(res.Root + nodesSuffix)
		return Result{}, fmt.Errorf("publish version %d: prepare failed, no node switched: %w", v, err)
	}
	res.Prepare = time.Since(t1)

	t2 := time.Now()
	diffs := make([]content.Diff, len(nodes))
	errs = each(context.WithoutCancel(ctx), nodes, c.cfg.Timeout, func(ctx context.Context, i int, p Participant) error {
		var err error
		diffs[i], err = p.Commit(ctx, v)
		return err
	})
	res.Switch = time.Since(t2)
	// The version is served by (at least some) nodes now: it is current.
	c.version, c.current, c.ours = v, res.Root, true
	c.pointCurrent(v)
	d := diffs[0]
	res.Added, res.Changed, res.Removed = d.Added, d.Changed, d.Removed
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("publish version %d: commit failed on some nodes (they serve the previous version until restarted or published again): %w", v, err)
	}
	if c.cfg.OnCommit != nil {
		c.cfg.OnCommit(v, res.Root, d)
	}
	c.prune()
	c.cfg.Logger.Info("site published", "version", v, "root", res.Root, "nodes", len(nodes),
		"files", res.Files, "copied", res.Copied, "linked", res.Linked,
		"added", len(d.Added), "changed", len(d.Changed), "removed", len(d.Removed),
		"prepare", res.Prepare, "switch", res.Switch)
	if p := res.Partition; p != nil {
		c.cfg.Logger.Info("site partitioned", "version", v, "replicas", p.Replicas, "nodes", len(p.Nodes),
			"kept_bytes", p.Kept, "moved_bytes", p.Moved, "moved_files", p.MovedFiles, "written_bytes", p.Written)
	}
	return res, nil
}

// pointCurrent makes CurrentLink name version v (a new link renamed over
// the old one, so it always names a whole version).
func (c *Coordinator) pointCurrent(v uint64) {
	tmp := filepath.Join(c.cfg.Versions, CurrentLink+".tmp")
	os.Remove(tmp)
	if err := os.Symlink(versionDir(v), tmp); err != nil {
		c.cfg.Logger.Warn("publish: cannot link the current version", "err", err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(c.cfg.Versions, CurrentLink)); err != nil {
		c.cfg.Logger.Warn("publish: cannot link the current version", "err", err)
	}
}

// prune removes version trees beyond Keep, oldest first.
func (c *Coordinator) prune() {
	vs := c.versions()
	for len(vs) > c.cfg.Keep {
		os.RemoveAll(filepath.Join(c.cfg.Versions, versionDir(vs[0])))
		os.RemoveAll(filepath.Join(c.cfg.Versions, versionDir(vs[0])+nodesSuffix))
		vs = vs[1:]
	}
}

// each runs f on every participant at once, each under its own timeout, and
// returns the errors, each naming its node.
func each(ctx context.Context, nodes []Participant, timeout time.Duration, f func(context.Context, int, Participant) error) []error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, p := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			if err := f(cctx, i, p); err != nil {
				errs[i] = fmt.Errorf("node %s: %w", p.Name(), err)
			}
		}()
	}
	wg.Wait()
	return errs
}
