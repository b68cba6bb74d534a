package logfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReopen: after a rename and Reopen, lines go to a new file at the
// path and the renamed one keeps what was written before; a Reopen that
// cannot open the path keeps writing the old file.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "access.log")
	l, err := Open(p, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write([]byte("one\n"))
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("two\n")) // still the renamed file: not reopened yet
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("three\n"))
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(p + ".1"); got != "one\ntwo\n" {
		t.Errorf("rotated file = %q, want one, two", got)
	}
	if got := read(p); got != "three\n" {
		t.Errorf("new file = %q, want three", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm()&0o007 != 0 {
		t.Errorf("new file mode %v: others may read it", fi.Mode())
	}

	gone := filepath.Join(dir, "sub", "x.log")
	os.MkdirAll(filepath.Dir(gone), 0o755)
	g, err := Open(gone, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	os.Rename(gone, filepath.Join(dir, "x.log.1"))
	os.Remove(filepath.Dir(gone))
	if err := g.Reopen(); err == nil {
		t.Fatal("Reopen with the folder gone: no error")
	}
	if _, err := g.Write([]byte("kept\n")); err != nil {
		t.Fatalf("write after a failed reopen: %v", err)
	}
	if got := read(filepath.Join(dir, "x.log.1")); got != "kept\n" {
		t.Errorf("old file after a failed reopen = %q, want kept", got)
	}
}
