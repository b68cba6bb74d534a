package publish

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shoal/internal/base/content"
)

// commitCluster is three fake nodes serving a tree with a.html "old", and
// a coordinator over them that retries commits for retry; site is the
// operator's folder to publish, a.html "new".
func commitCluster(t *testing.T, retry time.Duration) (site, versions string, nodes []*fake, c *Coordinator) {
	t.Helper()
	served, site, versions := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(served, "a.html"), "old", time.Time{})
	writeFile(t, filepath.Join(site, "a.html"), "new", time.Time{})
	for _, n := range []string{"n0", "n1", "n2"} {
		s, err := content.Open(served)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &fake{name: n, store: s})
	}
	c, err := New(Config{Versions: versions, Current: served, CommitRetry: retry, Nodes: func() []Participant {
		out := make([]Participant, len(nodes))
		for i, n := range nodes {
			out[i] = n
		}
		return out
	}})
	if err != nil {
		t.Fatal(err)
	}
	return site, versions, nodes, c
}

func body(t *testing.T, s *content.Store, url string) string {
	t.Helper()
	e, err := s.Lookup(url)
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Snapshot().OpenFile(e)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := f.Read(b)
	return string(b[:n])
}

// TestCommitRetried: a node whose commit fails twice (a lost answer, a
// reset) is asked again until it switches, and one that lost its prepared
// version (restarted between the phases) prepares it again: the publish
// succeeds with every node on the new version.
func TestCommitRetried(t *testing.T) {
	site, _, nodes, c := commitCluster(t, 10*time.Second)
	nodes[1].failCommit = 2
	nodes[2].forget = true
	res, err := c.Publish(context.Background(), site)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if got := body(t, n.store, "/a.html"); got != "new" {
			t.Errorf("%s serves %q, want new", n.name, got)
		}
	}
	// Two failed commits, the second followed by a new prepare and the
	// commit that takes.
	if want := []string{"prepare", "commit", "commit", "prepare", "commit"}; !slices.Equal(nodes[1].calls, want) {
		t.Errorf("n1 calls %v, want %v", nodes[1].calls, want)
	}
	if want := []string{"prepare", "commit", "commit", "prepare", "commit"}; !slices.Equal(nodes[2].calls, want) {
		t.Errorf("n2 calls %v, want %v", nodes[2].calls, want)
	}
	if !slices.Contains(res.Changed, "/a.html") || res.Version != 1 {
		t.Errorf("result %+v", res)
	}
}

// TestCommitRolledBack: a node that never takes the commit makes the
// nodes that switched switch back, so every node serves the old version;
// the error says so, the version's folder is gone, and the next publish
// takes a new number and succeeds once the node is back.
func TestCommitRolledBack(t *testing.T) {
	site, versions, nodes, c := commitCluster(t, 300*time.Millisecond)
	nodes[2].failCommit = -1
	_, err := c.Publish(context.Background(), site)
	if err == nil || !strings.Contains(err.Error(), "commit failed on n2") ||
		!strings.Contains(err.Error(), "rolled back: every node serves the previous version again") {
		t.Fatalf("publish with a node that never commits: %v", err)
	}
	for _, n := range nodes {
		if got := body(t, n.store, "/a.html"); got != "old" {
			t.Errorf("%s serves %q after the rollback, want old", n.name, got)
		}
	}
	for _, n := range nodes[:2] {
		if !slices.Contains(n.calls, "revert") {
			t.Errorf("%s was not switched back: %v", n.name, n.calls)
		}
	}
	if !slices.Contains(nodes[2].calls, "abort") || slices.Contains(nodes[2].calls, "revert") {
		t.Errorf("n2 calls %v: want an abort and no revert", nodes[2].calls)
	}
	if _, err := os.Stat(filepath.Join(versions, "v000001")); !os.IsNotExist(err) {
		t.Errorf("the rolled-back version's folder is still there (%v)", err)
	}
	if _, err := os.Lstat(filepath.Join(versions, CurrentLink)); !os.IsNotExist(err) {
		t.Errorf("current points at a rolled-back version (%v)", err)
	}
	nodes[2].failCommit = 0
	res, err := c.Publish(context.Background(), site)
	if err != nil || res.Version != 2 {
		t.Fatalf("publish after the node came back: version %d, %v; want 2", res.Version, err)
	}
	for _, n := range nodes {
		if got := body(t, n.store, "/a.html"); got != "new" {
			t.Errorf("%s serves %q, want new", n.name, got)
		}
	}
}
