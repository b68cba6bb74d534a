package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/base/content"
)

// fake is a participant that records the calls it gets and can refuse to
// prepare, refuse to commit (failCommit times, -1 for ever) or forget what
// it prepared at its first commit (a node that restarted in between). Its
// commit is idempotent, as a node's is, and Revert goes back to the tree
// served before.
type fake struct {
	name       string
	failPre    bool
	failCommit int
	forget     bool
	mu         sync.Mutex
	calls      []string
	store      *content.Store
	staged     *content.Staged
	version    uint64 // served
	prevRoot   string
}

func (f *fake) Name() string { return f.name }
func (f *fake) log(s string) { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }
func (f *fake) Prepare(_ context.Context, v uint64, root string) error {
	f.log("prepare")
	if f.failPre {
		return errors.New("disk on fire")
	}
	var err error
	f.staged, err = f.store.Prepare(root)
	return err
}
func (f *fake) Commit(_ context.Context, v uint64) (content.Diff, error) {
	f.log("commit")
	if f.failCommit != 0 {
		f.failCommit--
		return content.Diff{}, errors.New("connection reset")
	}
	if f.forget {
		f.forget, f.staged = false, nil
	}
	if v == f.version {
		return content.Diff{}, nil
	}
	if f.staged == nil {
		return content.Diff{}, errors.New("not prepared")
	}
	prev := f.store.Root()
	d, err := f.store.Commit(f.staged)
	if err == nil {
		f.version, f.prevRoot, f.staged = v, prev, nil
	}
	return d, err
}
func (f *fake) Abort(context.Context, uint64) error { f.log("abort"); return nil }
func (f *fake) Revert(_ context.Context, v uint64) error {
	f.log("revert")
	if v != f.version {
		return nil
	}
	st, err := f.store.Prepare(f.prevRoot)
	if err != nil {
		return err
	}
	_, err = f.store.Commit(st)
	f.version = 0
	return err
}

func writeFile(t *testing.T, path, body string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		os.Chtimes(path, mtime, mtime)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestPublishTwoPhase: a node that cannot prepare stops the publish on
// every node (aborted, none committed, no version folder left); then a good
// publish commits on all, reports the diff, and the ETags follow the bytes.
func TestPublishTwoPhase(t *testing.T) {
	site, versions := t.TempDir(), t.TempDir()
	pinned := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	writeFile(t, filepath.Join(site, "a.html"), "old a", pinned)
	writeFile(t, filepath.Join(site, "same.css"), "same", pinned)
	writeFile(t, filepath.Join(site, ".git/config"), "secret", time.Time{})
	var nodes []*fake
	for _, n := range []string{"n0", "n1", "n2"} {
		s, err := content.Open(site)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &fake{name: n, store: s})
	}
	parts := func() []Participant {
		out := make([]Participant, len(nodes))
		for i, n := range nodes {
			out[i] = n
		}
		return out
	}
	c, err := New(Config{Versions: versions, Current: site, Nodes: parts})
	if err != nil {
		t.Fatal(err)
	}

	nodes[1].failPre = true
	if _, err := c.Publish(context.Background(), site); err == nil || !strings.Contains(err.Error(), "node n1: disk on fire") {
		t.Fatalf("publish with a failing node: %v", err)
	}
	for _, n := range nodes {
		if !slices.Equal(n.calls, []string{"prepare", "abort"}) {
			t.Errorf("%s got %v, want prepare, abort", n.name, n.calls)
		}
		n.calls = nil
	}
	if ents, _ := os.ReadDir(versions); len(ents) != 0 || c.Version() != 0 {
		t.Fatalf("failed publish left %d folders, version %d", len(ents), c.Version())
	}

	nodes[1].failPre = false
	writeFile(t, filepath.Join(site, "new.txt"), "n", time.Time{})
	res, err := c.Publish(context.Background(), site)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if !slices.Equal(n.calls, []string{"prepare", "commit"}) {
			t.Errorf("%s got %v, want prepare, commit", n.name, n.calls)
		}
	}
	// Version 1 is copied from the working folder (never linked to it).
	if res.Version != 1 || res.Files != 3 || res.Copied != 3 || res.Linked != 0 ||
		!slices.Equal(res.Added, []string{"/new.txt"}) || slices.Contains(res.Changed, "/a.html") {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(res.Root, ".git")); err == nil {
		t.Error("hidden folder copied into the version")
	}

	// Same size, same time, other bytes: the ETag must still change.
	writeFile(t, filepath.Join(site, "a.html"), "new a", pinned)
	oldTag := etag(t, nodes[0].store, "/a.html")
	sameTag := etag(t, nodes[0].store, "/same.css")
	res2, err := c.Publish(context.Background(), site)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Version != 2 || res2.Bumped != 1 || res2.Linked != 2 || res2.Copied != 1 ||
		!slices.Equal(res2.Changed, []string{"/", "/a.html"}) || len(res2.Added)+len(res2.Removed) != 0 {
		t.Fatalf("second result %+v", res2)
	}
	if tag := etag(t, nodes[2].store, "/a.html"); tag == oldTag {
		t.Errorf("a.html changed bytes but kept ETag %s", tag)
	}
	if tag := etag(t, nodes[2].store, "/same.css"); tag != sameTag {
		t.Errorf("same.css unchanged but ETag %s became %s", sameTag, tag)
	}
	if inode(t, filepath.Join(res.Root, "same.css")) != inode(t, filepath.Join(res2.Root, "same.css")) {
		t.Error("unchanged file not hard-linked between versions")
	}
	// The working folder edited after a publish does not change it.
	writeFile(t, filepath.Join(site, "a.html"), "edited after publish", time.Time{})
	if b, _ := os.ReadFile(filepath.Join(res2.Root, "a.html")); string(b) != "new a" {
		t.Errorf("version 2's a.html is %q", b)
	}
}

// TestPrune keeps Keep version folders, and a new Coordinator continues the
// numbering after the folders it finds.
func TestPrune(t *testing.T) {
	site, versions := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(site, "x"), "x", time.Time{})
	s, _ := content.Open(site)
	n := &fake{name: "n", store: s}
	nodes := func() []Participant { return []Participant{n} }
	c, err := New(Config{Versions: versions, Keep: 2, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := c.Publish(context.Background(), site); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	ents, _ := os.ReadDir(versions)
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"current", "v000003", "v000004"}) {
		t.Fatalf("versions kept: %v", names)
	}
	c2, err := New(Config{Versions: versions, Nodes: nodes})
	if err != nil || c2.Version() != 4 {
		t.Fatalf("restarted coordinator at version %d (%v), want 4", c2.Version(), err)
	}
	// It links unchanged files from the version "current" names.
	res, err := c2.Publish(context.Background(), site)
	if err != nil || res.Linked != 1 || res.Version != 5 {
		t.Fatalf("publish after restart: %+v %v", res, err)
	}
	if target, _ := os.Readlink(filepath.Join(versions, "current")); target != "v000005" {
		t.Fatalf("current -> %q", target)
	}
}

func etag(t *testing.T, s *content.Store, url string) string {
	t.Helper()
	e, err := s.Lookup(url)
	if err != nil {
		t.Fatal(err)
	}
	return e.ETag
}
