package content

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPrepareCommit checks the two phases: Prepare changes nothing served,
// Commit swaps and reports the diff, a second Commit is refused.
func TestPrepareCommit(t *testing.T) {
	v1, v2 := t.TempDir(), t.TempDir()
	write := func(dir, name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(v1, "a.txt", "one")
	write(v1, "gone.txt", "x")
	write(v2, "a.txt", "two!")
	write(v2, "new.txt", "n")
	s := mustOpen(t, v1)
	st, err := s.Prepare(v2)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Lookup("/a.txt"); err != nil || e.Size != 3 || s.Version() != 1 {
		t.Fatalf("after Prepare the old table must still serve: %v %v v%d", e, err, s.Version())
	}
	d, err := s.Commit(st)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Added, []string{"/new.txt"}) || !slices.Equal(d.Removed, []string{"/gone.txt"}) ||
		!slices.Equal(d.Changed, []string{"/", "/a.txt"}) || s.Version() != 2 {
		t.Fatalf("diff %+v, version %d", d, s.Version())
	}
	if e, err := s.Lookup("/a.txt"); err != nil || e.Size != 4 {
		t.Fatalf("after Commit: %v %v", e, err)
	}
	if _, err := s.Commit(st); err == nil {
		t.Fatal("second Commit of one Staged accepted")
	}
	if _, err := s.Prepare(filepath.Join(v2, "missing")); err == nil {
		t.Fatal("Prepare of a missing root accepted")
	}
}
