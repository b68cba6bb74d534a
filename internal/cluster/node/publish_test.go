package node

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRescanAndTwoPhase: Rescan serves an edited root and drops the changed
// object from the cache; PreparePublish changes nothing served until
// CommitPublish, which refuses a version that was not prepared.
func TestRescanAndTwoPhase(t *testing.T) {
	root, ts, c := startSite(t)
	c.send(get("/hello.txt"))
	if r := c.read(false); r.body != helloBody {
		t.Fatalf("before: %q", r.body)
	}
	if n := ts.srv.objs.Stats().MemoryObjects; n != 1 {
		t.Fatalf("cache holds %d objects, want 1", n)
	}
	os.WriteFile(filepath.Join(root, "hello.txt"), []byte("edited in place, longer\n"), 0o644)
	d, err := ts.srv.Rescan()
	if err != nil || len(d.Changed) == 0 {
		t.Fatalf("rescan: %+v %v", d, err)
	}
	if n := ts.srv.objs.Stats().MemoryObjects; n != 0 {
		t.Errorf("changed object still cached (%d objects)", n)
	}
	c.send(get("/hello.txt"))
	if r := c.read(false); r.body != "edited in place, longer\n" {
		t.Fatalf("after rescan: %q", r.body)
	}

	next := t.TempDir()
	os.WriteFile(filepath.Join(next, "hello.txt"), []byte("v2\n"), 0o644)
	if err := ts.srv.PreparePublish(7, next); err != nil {
		t.Fatal(err)
	}
	c.send(get("/hello.txt"))
	if r := c.read(false); r.body != "edited in place, longer\n" {
		t.Fatalf("prepared version served before commit: %q", r.body)
	}
	if _, err := ts.srv.CommitPublish(8); err == nil {
		t.Fatal("commit of an unprepared version accepted")
	}
	if _, err := ts.srv.CommitPublish(7); err != nil {
		t.Fatal(err)
	}
	c.send(get("/hello.txt"))
	if r := c.read(false); r.body != "v2\n" || ts.srv.SiteVersion() != 7 {
		t.Fatalf("after commit: %q, version %d", r.body, ts.srv.SiteVersion())
	}
	if err := ts.srv.PreparePublish(7, next); err == nil {
		t.Fatal("prepare of the version already served accepted")
	}
}

// TestCommitIdempotentAndRevert: a second commit of the version served
// answers the same diff (the coordinator retries a commit whose answer it
// lost); RevertPublish goes back to the tree served before, with the old
// bytes and ETags and the changed object dropped from the cache, and is a
// no-op for a version the node does not serve.
func TestCommitIdempotentAndRevert(t *testing.T) {
	_, ts, c := startSite(t)
	c.send(get("/hello.txt"))
	if r := c.read(false); r.body != helloBody {
		t.Fatalf("before: %q", r.body)
	}
	oldTag := etagOf(t, ts.srv, "/hello.txt")
	next := t.TempDir()
	os.WriteFile(filepath.Join(next, "hello.txt"), []byte("v3\n"), 0o644)
	if err := ts.srv.PreparePublish(3, next); err != nil {
		t.Fatal(err)
	}
	d1, err := ts.srv.CommitPublish(3)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := ts.srv.CommitPublish(3)
	if err != nil || !slices.Equal(d1.Changed, d2.Changed) || len(d1.Changed) == 0 {
		t.Fatalf("second commit: %+v %v, want the first's %+v", d2, err, d1)
	}
	c.send(get("/hello.txt"))
	if r := c.read(false); r.body != "v3\n" {
		t.Fatalf("after commit: %q", r.body)
	}
	if d, err := ts.srv.RevertPublish(2); err != nil || len(d.Changed)+len(d.Added)+len(d.Removed) != 0 || ts.srv.SiteVersion() != 3 {
		t.Fatalf("revert of a version not served: %+v %v, version %d", d, err, ts.srv.SiteVersion())
	}
	d, err := ts.srv.RevertPublish(3)
	if err != nil || !slices.Contains(d.Changed, "/hello.txt") {
		t.Fatalf("revert: %+v %v", d, err)
	}
	if ts.srv.SiteVersion() != 0 {
		t.Errorf("version after revert %d, want 0 (the tree started with)", ts.srv.SiteVersion())
	}
	c.send(get("/hello.txt"))
	if r := c.read(false); r.body != helloBody {
		t.Fatalf("after revert: %q", r.body)
	}
	if tag := etagOf(t, ts.srv, "/hello.txt"); tag != oldTag {
		t.Errorf("ETag after revert %s, want the old %s", tag, oldTag)
	}
	if _, err := ts.srv.RevertPublish(3); err != nil {
		t.Errorf("second revert: %v", err)
	}
	if _, err := ts.srv.CommitPublish(3); err == nil {
		t.Error("commit of the reverted version accepted without a new prepare")
	}
	if err := ts.srv.PreparePublish(4, next); err != nil {
		t.Errorf("prepare after a revert: %v", err)
	}
}

func etagOf(t *testing.T, s *Server, url string) string {
	t.Helper()
	e, err := s.store.Lookup(url)
	if err != nil {
		t.Fatal(err)
	}
	return e.ETag
}
