package node

import (
	"os"
	"path/filepath"
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
