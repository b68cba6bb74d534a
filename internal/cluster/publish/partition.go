package publish

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/cluster/peer"
	"shoal/internal/cluster/placement"
)

// Partitioned storage (docs/cooperation.md "Partitioned
// storage"). With Config.Replicas below the number of nodes, a version is
// written as one tree per node holding only the files placement gives it
// (weighted rendezvous hashing, internal/cluster/placement) plus a manifest
// (content.ManifestName) listing every file and its holders, so every node
// knows the whole site and fetches what it does not store from a holder.
// The coordinator's own snapshot (VERSIONS/vNNNNNN) stays the publisher's
// full copy; the nodes serve VERSIONS/vNNNNNN.nodes/<i>.
//
// A node's file comes, in order of preference, from the node's own tree of
// the previous version (kept: no bytes move), from another holder of the
// previous version that is still a member (moved: a copy between nodes,
// what a join or a leave costs), or from the snapshot (written: new or
// changed content, or a file whose holders all left).

// nodesSuffix names a version's folder of per-node trees.
const nodesSuffix = ".nodes"

// Partition is what a partitioned publish wrote.
type Partition struct {
	// Replicas is the R the files were placed with (clamped to the nodes).
	Replicas int `json:"replicas"`
	// Nodes are the placement IDs, in the participants' order; Roots the
	// tree each serves.
	Nodes []string `json:"nodes"`
	Roots []string `json:"roots"`
	// Kept, Moved and Written are the bytes of the node copies that stayed
	// in place, were copied from another holder, and came from the
	// snapshot; MovedFiles counts the moved copies. NodeBytes is each
	// node's stored bytes.
	Kept       int64   `json:"kept_bytes"`
	Moved      int64   `json:"moved_bytes"`
	MovedFiles int     `json:"moved_files"`
	Written    int64   `json:"written_bytes"`
	NodeBytes  []int64 `json:"node_bytes"`
}

// partitioned reports whether r replicas over nodes is less than a full
// copy on every node.
func partitioned(r int, nodes []placement.Node) bool {
	return r > 0 && placement.Replicas(r, nodes) < len(nodes)
}

// siteFile is one file of a snapshot.
type siteFile struct {
	rel     string // slash-separated, no leading slash
	size    int64
	modTime time.Time
}

// listTree lists the folders and regular files of a snapshot tree.
func listTree(root string) (dirs []string, files []siteFile, err error) {
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			dirs = append(dirs, rel)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			files = append(files, siteFile{rel: rel, size: fi.Size(), modTime: fi.ModTime()})
		}
		return nil
	})
	return dirs, files, err
}

// partition writes version root's per-node trees under root+nodesSuffix
// for nodes with r replicas, taking files from prev (placement ID → the
// node's tree of the previous version) where it can. With members (the
// cluster's addresses in the front's order) each tree also gets the
// membership file naming that node's index among them.
func partition(root string, nodes []placement.Node, r int, prev map[string]string, members []string) (Partition, error) {
	p := Partition{Replicas: placement.Replicas(r, nodes), NodeBytes: make([]int64, len(nodes))}
	for _, n := range nodes {
		if n.ID == "" || strings.ContainsAny(n.ID, ",\t\n") {
			return p, fmt.Errorf("partition: node id %q", n.ID)
		}
	}
	dirs, files, err := listTree(root)
	if err != nil {
		return p, fmt.Errorf("partition: %w", err)
	}
	base := root + nodesSuffix
	tmp := base + ".tmp"
	os.RemoveAll(tmp)
	for i, n := range nodes {
		p.Nodes = append(p.Nodes, n.ID)
		p.Roots = append(p.Roots, filepath.Join(base, fmt.Sprint(i)))
		t := filepath.Join(tmp, fmt.Sprint(i))
		if err := os.MkdirAll(t, 0o755); err != nil {
			return p, fmt.Errorf("partition: %w", err)
		}
		for _, d := range dirs {
			if err := os.MkdirAll(filepath.Join(t, filepath.FromSlash(d)), 0o755); err != nil {
				return p, fmt.Errorf("partition: %w", err)
			}
		}
	}
	alive := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		alive[n.ID] = true
	}
	// Sources that are still members, in a fixed order for repeatability.
	var prevIDs []string
	for id := range prev {
		if alive[id] {
			prevIDs = append(prevIDs, id)
		}
	}
	sort.Strings(prevIDs)
	man := make([]content.ManifestFile, 0, len(files))
	var hs []int
	for _, f := range files {
		url := "/" + f.rel
		hs = placement.Holders(hs[:0], nodes, url, r)
		ids := make([]string, len(hs))
		for k, i := range hs {
			ids[k] = nodes[i].ID
			dst := filepath.Join(tmp, fmt.Sprint(i), filepath.FromSlash(f.rel))
			how, err := placeCopy(f, dst, nodes[i].ID, prev, prevIDs, root)
			if err != nil {
				os.RemoveAll(tmp)
				return p, fmt.Errorf("partition: %s on node %s: %w", url, nodes[i].ID, err)
			}
			switch how {
			case kept:
				p.Kept += f.size
			case moved:
				p.Moved += f.size
				p.MovedFiles++
			default:
				p.Written += f.size
			}
			p.NodeBytes[i] += f.size
		}
		man = append(man, content.ManifestFile{URL: url, Size: f.size, ModTime: f.modTime, Holders: ids})
	}
	for i := range nodes {
		mf, err := os.Create(filepath.Join(tmp, fmt.Sprint(i), content.ManifestName))
		if err == nil {
			err = errors.Join(content.WriteManifest(mf, man), mf.Close())
		}
		if err != nil {
			os.RemoveAll(tmp)
			return p, fmt.Errorf("partition: manifest: %w", err)
		}
		if members == nil {
			continue
		}
		pf, err := os.Create(filepath.Join(tmp, fmt.Sprint(i), peer.MembersName))
		if err == nil {
			err = errors.Join(peer.WriteMembers(pf, slices.Index(members, nodes[i].ID), members), pf.Close())
		}
		if err != nil {
			os.RemoveAll(tmp)
			return p, fmt.Errorf("partition: members: %w", err)
		}
	}
	os.RemoveAll(base)
	if err := os.Rename(tmp, base); err != nil {
		os.RemoveAll(tmp)
		return p, fmt.Errorf("partition: %w", err)
	}
	return p, nil
}

type source int

const (
	kept source = iota
	moved
	written
)

// placeCopy puts file f at dst: from the node's own previous tree, else
// from another member's, else from the snapshot at root. A previous copy
// counts only with the same size and modification time (the snapshot keeps
// both for unchanged files, so it is the same ETag). On one host the copy
// is a hard link; across filesystems it is a copy.
func placeCopy(f siteFile, dst, id string, prev map[string]string, prevIDs []string, root string) (source, error) {
	rel := filepath.FromSlash(f.rel)
	try := func(tree string) bool {
		if tree == "" {
			return false
		}
		src := filepath.Join(tree, rel)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.size || !fi.ModTime().Equal(f.modTime) {
			return false
		}
		return linkOrCopy(src, dst, f.modTime) == nil
	}
	if try(prev[id]) {
		return kept, nil
	}
	for _, other := range prevIDs {
		if other != id && try(prev[other]) {
			return moved, nil
		}
	}
	if err := linkOrCopy(filepath.Join(root, rel), dst, f.modTime); err != nil {
		return written, err
	}
	return written, nil
}

func linkOrCopy(src, dst string, mt time.Time) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src) // our own version tree, not the operator's folder
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := copyFile(context.Background(), in, dst, 0o444); err != nil {
		return err
	}
	return os.Chtimes(dst, mt, mt)
}
