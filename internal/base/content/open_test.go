package content

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"shoal/internal/testutil"
)

// TestOpenFileConfined swaps names under a scanned root and opens the
// swapped entries, with openat2 and with the O_NOFOLLOW walk (the fallback
// for kernels without openat2 and for other systems): nothing outside the
// root, no symlink at all and nothing but a regular file may open; an
// untouched file opens with its bytes.
func TestOpenFileConfined(t *testing.T) {
	for _, mode := range []string{"openat2", "walk"} {
		t.Run(mode, func(t *testing.T) {
			for _, c := range []struct {
				name string
				url  string
				swap func(t *testing.T, root, outside string)
				want string // body; "" means the open must fail
			}{
				{"untouched file", "/docs/a.txt", nil, "aaaa"},
				{"untouched top-level file", "/style.css", nil, "body{}"},
				{"file to symlink outside", "/style.css", func(t *testing.T, root, outside string) {
					relink(t, filepath.Join(outside, "secret.txt"), filepath.Join(root, "style.css"))
				}, ""},
				{"file to relative symlink outside", "/style.css", func(t *testing.T, root, outside string) {
					relink(t, "../outside/secret.txt", filepath.Join(root, "style.css"))
				}, ""},
				{"file to symlink inside", "/style.css", func(t *testing.T, root, outside string) {
					relink(t, "index.html", filepath.Join(root, "style.css"))
				}, ""},
				{"directory to symlink outside", "/docs/a.txt", func(t *testing.T, root, outside string) {
					testutil.WriteTree(t, outside, map[string]string{"dir/a.txt": "secret"})
					os.RemoveAll(filepath.Join(root, "docs"))
					relink(t, filepath.Join(outside, "dir"), filepath.Join(root, "docs"))
				}, ""},
				{"deep directory to symlink outside", "/docs/deep/c.js", func(t *testing.T, root, outside string) {
					testutil.WriteTree(t, outside, map[string]string{"dir/c.js": "secret"})
					os.RemoveAll(filepath.Join(root, "docs", "deep"))
					relink(t, filepath.Join(outside, "dir"), filepath.Join(root, "docs", "deep"))
				}, ""},
				{"file to FIFO", "/style.css", func(t *testing.T, root, outside string) {
					os.Remove(filepath.Join(root, "style.css"))
					if err := syscall.Mkfifo(filepath.Join(root, "style.css"), 0o644); err != nil {
						t.Fatal(err)
					}
				}, ""},
				{"file to directory", "/style.css", func(t *testing.T, root, outside string) {
					os.Remove(filepath.Join(root, "style.css"))
					os.Mkdir(filepath.Join(root, "style.css"), 0o755)
				}, ""},
				{"root path moved away and replaced", "/style.css", func(t *testing.T, root, outside string) {
					// The root's descriptor still names the scanned directory.
					if err := os.Rename(root, root+".old"); err != nil {
						t.Fatal(err)
					}
					testutil.WriteTree(t, root, map[string]string{"style.css": "forged"})
				}, "body{}"},
			} {
				t.Run(c.name, func(t *testing.T) {
					root := fixture(t)
					outside := filepath.Join(filepath.Dir(root), "outside")
					s := mustOpen(t, root)
					tbl := s.Snapshot()
					tbl.dir.walk = mode == "walk"
					e, err := tbl.Lookup(c.url)
					if err != nil {
						t.Fatal(err)
					}
					if c.swap != nil {
						c.swap(t, root, outside)
					}
					f, err := tbl.OpenFile(e)
					if c.want == "" {
						if err == nil {
							b, _ := io.ReadAll(f)
							f.Close()
							t.Fatalf("OpenFile(%s) opened %q", c.url, b)
						}
						return
					}
					if err != nil {
						t.Fatalf("OpenFile(%s): %v", c.url, err)
					}
					defer f.Close()
					if b, err := io.ReadAll(f); err != nil || string(b) != c.want {
						t.Errorf("OpenFile(%s) read %q, %v; want %q", c.url, b, err, c.want)
					}
				})
			}
		})
	}
}

// TestOpenFileRefusesForgedEntries checks that OpenFile never opens an
// entry that is not a file URL of plain names, even one built by hand.
func TestOpenFileRefusesForgedEntries(t *testing.T) {
	s := mustOpen(t, fixture(t))
	tbl := s.Snapshot()
	for _, walk := range []bool{false, true} {
		tbl.dir.walk = walk
		for _, e := range []*Entry{
			nil,
			{URL: "/"},
			{URL: "/docs", IsDir: true},
			{URL: "/../outside/secret.txt"},
			{URL: "/docs/../../outside/secret.txt"},
			{URL: "//etc/passwd"},
			{URL: "/docs/./a.txt"},
			{URL: "relative.txt"},
		} {
			if f, err := tbl.OpenFile(e); err == nil {
				f.Close()
				t.Errorf("walk %v: OpenFile(%+v) succeeded", walk, e)
			}
		}
	}
	if _, err := tbl.OpenFile(&Entry{URL: "/docs"}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenFile(directory) = %v, want ErrNotRegular", err)
	}
}

// relink replaces the file at p (if any) by a symlink to target.
func relink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkOpenFile measures what a node's cache miss pays to open a file
// (then close it): "open" is the unconfined open(2) of the scanned path that
// nodes used before (plus os.NewFile), "openat2" Table.OpenFile on Linux,
// "walk" its O_NOFOLLOW fallback, for a file three directories deep.
func BenchmarkOpenFile(b *testing.B) {
	root := b.TempDir()
	testutil.WriteTree(b, root, map[string]string{"a/b/c/file.bin": "x"})
	s := mustOpen(b, root)
	tbl := s.Snapshot()
	e, err := tbl.Lookup("/a/b/c/file.bin")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fd, err := syscall.Open(e.Path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			os.NewFile(uintptr(fd), e.Path).Close()
		}
	})
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		b.Run(name, func(b *testing.B) {
			tbl.dir.walk = walk
			b.ReportAllocs()
			for b.Loop() {
				f, err := tbl.OpenFile(e)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}
