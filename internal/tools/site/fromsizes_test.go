package site

import (
	"os"
	"path/filepath"
	"testing"

	"shoal/internal/base/content"
)

func TestFromSizes(t *testing.T) {
	dir := t.TempDir()
	sizes := map[string]int64{
		"/":                     100,  // → /index.html
		"/a/b.html":             2000, // plain file
		"/a/":                   50,   // → /a/index.html
		"/a%20b.txt":            7,    // decoded name "a b.txt"
		"/x":                    10,   // also a directory below: skipped
		"/x/y.gif":              30,
		"/../etc/passwd":        5, // refused by CleanURL
		"/.hidden":              5, // hidden
		"/zero":                 0, // no size
		"/shuttle/countdown/":   70,
		"/shuttle/countdown/ok": 1 << 17, // larger than the filler pattern
	}
	written, skipped, err := FromSizes(dir, sizes)
	if err != nil {
		t.Fatal(err)
	}
	if written != 7 || skipped != 4 {
		t.Errorf("written %d skipped %d, want 7 and 4", written, skipped)
	}
	st, err := content.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]int64{"/index.html": 100, "/a/b.html": 2000, "/a/index.html": 50,
		"/a%20b.txt": 7, "/x/y.gif": 30, "/shuttle/countdown/index.html": 70, "/shuttle/countdown/ok": 1 << 17} {
		e, err := st.Lookup(url)
		if err != nil || e.Size != want {
			t.Errorf("Lookup(%s) = %v, %v; want size %d", url, e, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "etc", "passwd")); err == nil {
		t.Error("a traversal URL was written outside the site")
	}
	// A second run keeps the files; a foreign directory is refused.
	if w, _, err := FromSizes(dir, sizes); err != nil || w != 7 {
		t.Errorf("rerun = %d, %v", w, err)
	}
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "mine.txt"), []byte("x"), 0o644)
	if _, _, err := FromSizes(foreign, sizes); err == nil {
		t.Error("wrote into a foreign non-empty directory")
	}
}
