package content

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/internal/testutil"
)

// fixture builds base/site (the root) next to base/outside (must never be
// served) and returns the root.
// mustOpen opens the store over root, failing the test if it cannot.
func mustOpen(t testing.TB, root string) *Store {
	t.Helper()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fixture(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	testutil.WriteTree(t, base, map[string]string{
		"outside/secret.txt": "secret",
		"outside/dir/x.txt":  "x",
		"site-sibling/s.txt": "sibling",
	})
	root := filepath.Join(base, "site")
	testutil.WriteTree(t, root, map[string]string{
		"index.html":        "<h1>hi</h1>",
		"style.css":         "body{}",
		"docs/a.txt":        "aaaa",
		"docs/b.md":         "bb",
		"docs/deep/c.js":    "c()",
		"sp ace.txt":        "space",
		"a?b.txt":           "question",
		"100%.txt":          "percent",
		"%2e%2e/trap.txt":   "literal name, not a traversal",
		"noext":             "n",
		"IMG.PNG":           "png",
		"blob.bin":          "bb",
		".hidden":           "hidden",
		".git/config":       "git",
		"docs/.env":         "env",
		"link-in.txt":       "->docs/a.txt",
		"link-abs-in.txt":   "->" + filepath.Join(root, "style.css"),
		"link-out.txt":      "->../outside/secret.txt",
		"link-abs-out.txt":  "->" + filepath.Join(base, "outside/secret.txt"),
		"link-sibling.txt":  "->../site-sibling/s.txt", // prefix "site" must not count as inside
		"link-dir-out":      "->../outside/dir",
		"link-dir-in":       "->docs",
		"link-passwd":       "->/etc/passwd",
		"link-dangling":     "->nowhere.txt",
		"link-to-hidden":    "->.hidden",
		"link-to-root":      "->.",
		"docs/link-up.txt":  "->../index.html",
		"docs/link-up2.txt": "->../../outside/secret.txt",
	})
	return root
}

func TestLookupTraversal(t *testing.T) {
	s := mustOpen(t, fixture(t))
	tests := []struct {
		in      string
		wantURL string // when wantErr is nil
		wantErr error
	}{
		// Plain and normalised forms.
		{"/", "/", nil},
		{"", "/", nil},
		{"/index.html", "/index.html", nil},
		{"index.html", "/index.html", nil},
		{"/index.html?x=1&y=../../etc", "/index.html", nil},
		{"/docs", "/docs", nil},
		{"/docs/", "/docs", nil},
		{"/docs/.", "/docs", nil},
		{"//docs//a.txt", "/docs/a.txt", nil},
		{"/docs/./a.txt", "/docs/a.txt", nil},
		{"/docs/../index.html", "/index.html", nil},
		{"/docs/deep/../../style.css", "/style.css", nil},
		{"/docs/deep/..", "/docs", nil},
		{"/docs/%2e%2e/index.html", "/index.html", nil},
		{"/%69ndex.html", "/index.html", nil},
		{"/docs%2fa.txt", "/docs/a.txt", nil},
		{"/sp%20ace.txt", "/sp ace.txt", nil},
		{"/a%3Fb.txt", "/a?b.txt", nil},
		{"/100%25.txt", "/100%.txt", nil},
		{"/%252e%252e/trap.txt", "/%2e%2e/trap.txt", nil}, // double encoding decodes once: a literal name
		// Climbing above the root.
		{"/..", "", ErrForbidden},
		{"/../", "", ErrForbidden},
		{"..", "", ErrForbidden},
		{"../etc/passwd", "", ErrForbidden},
		{"/../etc/passwd", "", ErrForbidden},
		{"/docs/../../etc/passwd", "", ErrForbidden},
		{"/docs/deep/../../../x", "", ErrForbidden},
		{"/./../x", "", ErrForbidden},
		{"/%2e%2e/etc/passwd", "", ErrForbidden},
		{"/%2E%2E/%2E%2E/etc/passwd", "", ErrForbidden},
		{"/.%2e/x", "", ErrForbidden},
		{"/%2e./x", "", ErrForbidden},
		{"/..%2fetc%2fpasswd", "", ErrForbidden},
		{"/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "", ErrForbidden},
		{"/docs/..%2f..%2fsite-sibling/s.txt", "", ErrForbidden},
		{"%2e%2e", "", ErrForbidden},
		// Malformed.
		{"/a\x00.txt", "", ErrBadPath},
		{"/index.html%00", "", ErrBadPath},
		{"/index.html%00.txt", "", ErrBadPath},
		{"/index.html%0d%0aSet-Cookie:%20x", "", ErrBadPath}, // CR/LF: header and log injection
		{"/docs/a\r.txt", "", ErrBadPath},
		{"/a%09b", "", ErrBadPath},
		{"/a%7f", "", ErrBadPath},
		{"/..\\..\\etc\\passwd", "", ErrBadPath},
		{"/docs\\a.txt", "", ErrBadPath},
		{"/%5c..%5cetc", "", ErrBadPath},
		{"/%5C", "", ErrBadPath},
		{"/%", "", ErrBadPath},
		{"/%2", "", ErrBadPath},
		{"/%zz", "", ErrBadPath},
		{"/%g0", "", ErrBadPath},
		{"/100%.txt", "", ErrBadPath},
		// Well formed but not served.
		{"/%252e%252e/etc/passwd", "", ErrNotFound},
		{"/%25%32%65%25%32%65/x", "", ErrNotFound}, // "%2e%2e/x" literal
		{"/nothere", "", ErrNotFound},
		{"/index.html/", "", ErrNotFound},
		{"/index.html/.", "", ErrNotFound},
		{"/docs/...", "", ErrNotFound},
		{"/.hidden", "", ErrNotFound},
		{"/.git/config", "", ErrNotFound},
		{"/.git", "", ErrNotFound},
		{"/docs/.env", "", ErrNotFound},
		{"/%2egit/config", "", ErrNotFound},
		{"/%c0%ae%c0%ae/etc/passwd", "", ErrNotFound}, // overlong UTF-8 is just bytes
		{"/link-out.txt", "", ErrNotFound},
		{"/link-abs-out.txt", "", ErrNotFound},
		{"/link-sibling.txt", "", ErrNotFound},
		{"/link-dir-out", "", ErrNotFound},
		{"/link-dir-out/x.txt", "", ErrNotFound},
		{"/link-dir-in", "", ErrNotFound},
		{"/link-dir-in/a.txt", "", ErrNotFound},
		{"/link-passwd", "", ErrNotFound},
		{"/link-dangling", "", ErrNotFound},
		{"/link-to-hidden", "", ErrNotFound},
		{"/link-to-root", "", ErrNotFound},
		{"/docs/link-up2.txt", "", ErrNotFound},
		{"/etc/passwd", "", ErrNotFound},
		// Symlinks inside the root are refused too (nginx's
		// disable_symlinks on): OpenFile would not follow them.
		{"/link-in.txt", "", ErrNotFound},
		{"/link-abs-in.txt", "", ErrNotFound},
		{"/docs/link-up.txt", "", ErrNotFound},
	}
	for _, tc := range tests {
		e, err := s.Lookup(tc.in)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Lookup(%q) = %v, %v; want error %v", tc.in, e, err, tc.wantErr)
			}
			continue
		}
		if err != nil || e.URL != tc.wantURL {
			t.Errorf("Lookup(%q) = %+v, %v; want URL %q", tc.in, e, err, tc.wantURL)
			continue
		}
		if !strings.HasPrefix(e.Path, s.Root()) {
			t.Errorf("Lookup(%q).Path = %q, outside root %q", tc.in, e.Path, s.Root())
		}
	}
}

func TestEntryFields(t *testing.T) {
	root := fixture(t)
	s := mustOpen(t, root)
	tests := []struct {
		url, ctype string
		size       int64
		dir        bool
	}{
		{"/index.html", "text/html; charset=utf-8", 11, false},
		{"/style.css", "text/css; charset=utf-8", 6, false},
		{"/docs/deep/c.js", "text/javascript; charset=utf-8", 3, false},
		{"/noext", DefaultContentType, 1, false},
		{"/IMG.PNG", "image/png", 3, false},
		{"/blob.bin", DefaultContentType, 2, false},
		{"/docs", "", 0, true},
		{"/", "", 0, true},
	}
	for _, tc := range tests {
		e, err := s.Lookup(tc.url)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", tc.url, err)
		}
		if e.ContentType != tc.ctype || e.Size != tc.size || e.IsDir != tc.dir {
			t.Errorf("%s: got type %q size %d dir %v; want %q %d %v", tc.url, e.ContentType, e.Size, e.IsDir, tc.ctype, tc.size, tc.dir)
		}
		if len(e.ETag) < 4 || e.ETag[0] != '"' || e.ETag[len(e.ETag)-1] != '"' {
			t.Errorf("%s: ETag %q is not a quoted strong tag", tc.url, e.ETag)
		}
		if !filepath.IsAbs(e.Path) {
			t.Errorf("%s: Path %q not absolute", tc.url, e.Path)
		}
	}
	if s.Version() != 1 {
		t.Errorf("Version = %d, want 1", s.Version())
	}
}

func TestList(t *testing.T) {
	s := mustOpen(t, fixture(t))
	kids, err := s.List("/docs/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range kids {
		got = append(got, k.URL)
	}
	want := []string{"/docs/a.txt", "/docs/b.md", "/docs/deep"} // not the symlink link-up.txt
	if !slices.Equal(got, want) {
		t.Errorf("List(/docs/) = %q, want %q", got, want)
	}
	if _, err := s.List("/index.html"); !errors.Is(err, ErrNotDir) {
		t.Errorf("List(file) err = %v, want ErrNotDir", err)
	}
	if _, err := s.List("/../"); !errors.Is(err, ErrForbidden) {
		t.Errorf("List(/../) err = %v, want ErrForbidden", err)
	}
	root, _ := s.List("/")
	for _, k := range root {
		if strings.Contains(k.URL, "/.") || strings.Contains(k.URL, "out") {
			t.Errorf("root listing has %q", k.URL)
		}
	}
}

// Lookup serves only from the scanned table: files created later, or a
// symlink swapped to point outside, change nothing until Publish.
func TestLookupNeverTouchesFilesystem(t *testing.T) {
	root := fixture(t)
	s := mustOpen(t, root)
	testutil.WriteTree(t, root, map[string]string{"late.txt": "late"})
	if _, err := s.Lookup("/late.txt"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lookup(late file) err = %v, want ErrNotFound before Publish", err)
	}
	if _, err := s.Publish(root); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup("/late.txt"); err != nil {
		t.Errorf("after Publish: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	testutil.WriteTree(t, dir, map[string]string{"f.txt": "x"})
	for _, root := range []string{filepath.Join(dir, "missing"), filepath.Join(dir, "f.txt")} {
		if _, err := Open(root); err == nil {
			t.Errorf("Open(%q) succeeded", root)
		}
	}
	// A root that is itself a symlink resolves.
	link := filepath.Join(t.TempDir(), "rootlink")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, link)
	if real, _ := filepath.EvalSymlinks(dir); s.Root() != real {
		t.Errorf("Root = %q, want %q", s.Root(), real)
	}
	if _, err := s.Lookup("/f.txt"); err != nil {
		t.Error(err)
	}
	// A failed Publish keeps the current table.
	if _, err := s.Publish(filepath.Join(dir, "missing")); err == nil {
		t.Error("Publish(missing) succeeded")
	}
	if s.Version() != 1 || s.Len() != 2 {
		t.Errorf("after failed Publish: version %d len %d, want 1 and 2", s.Version(), s.Len())
	}
}

func TestPublishDiff(t *testing.T) {
	base := t.TempDir()
	v1 := filepath.Join(base, "v1")
	v2 := filepath.Join(base, "v2")
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	testutil.WriteTree(t, v1, map[string]string{
		"same.txt": "same", "changed.txt": "old", "removed.txt": "bye", "d/keep.txt": "k", "gone/x.txt": "x",
		"s/t/deep.txt": "v1",
	})
	testutil.WriteTree(t, v2, map[string]string{
		"same.txt": "same", "changed.txt": "new!", "added.txt": "hi", "d/keep.txt": "k", "d/new.txt": "n",
		"s/t/deep.txt": "v2!",
	})
	// Equal mtimes for the unchanged files so their ETags match across roots.
	for _, dir := range []string{v1, v2} {
		for _, f := range []string{"same.txt", "changed.txt", "d/keep.txt", "s/t/deep.txt"} {
			if err := os.Chtimes(filepath.Join(dir, f), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := mustOpen(t, v1)
	d, err := s.Publish(v2)
	if err != nil {
		t.Fatal(err)
	}
	want := Diff{
		Added:   []string{"/added.txt", "/d/new.txt"},
		Removed: []string{"/gone", "/gone/x.txt", "/removed.txt"},
		// Directories change when their own listing does: "/s" lists only
		// "t", so the deep change reaches "/s/t" but not "/s".
		Changed: []string{"/", "/changed.txt", "/d", "/s/t", "/s/t/deep.txt"},
	}
	if !slices.Equal(d.Added, want.Added) || !slices.Equal(d.Removed, want.Removed) || !slices.Equal(d.Changed, want.Changed) {
		t.Errorf("Diff = %+v\nwant   %+v", d, want)
	}
	if s.Version() != 2 {
		t.Errorf("Version = %d, want 2", s.Version())
	}
	if _, err := s.Lookup("/removed.txt"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removed file still served: %v", err)
	}
	// Republishing the same root changes nothing but the version.
	d, err = s.Publish(v2)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Added)+len(d.Removed)+len(d.Changed) != 0 || s.Version() != 3 {
		t.Errorf("republish: diff %+v version %d; want empty and 3", d, s.Version())
	}
}

// Readers running during Publish see one version at a time: within a
// Snapshot the version and two entries always agree.
func TestPublishConcurrentReaders(t *testing.T) {
	base := t.TempDir()
	// Root A: both files 1 byte; root B: both 2 bytes.
	a := filepath.Join(base, "a")
	b := filepath.Join(base, "b")
	testutil.WriteTree(t, a, map[string]string{"x.txt": "a", "y/z.txt": "a"})
	testutil.WriteTree(t, b, map[string]string{"x.txt": "bb", "y/z.txt": "bb"})
	s := mustOpen(t, a)
	const publishes = 200
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan string, 4)
	for range 4 {
		wg.Go(func() {
			var last uint64
			for !done.Load() {
				snap := s.Snapshot()
				v := snap.Version()
				x, err1 := snap.Lookup("/x.txt")
				z, err2 := snap.Lookup("/y/z.txt")
				if err1 != nil || err2 != nil {
					errc <- "lookup failed"
					return
				}
				want := int64(1) // odd versions are root A
				if v%2 == 0 {
					want = 2
				}
				if x.Size != want || z.Size != want {
					errc <- "mixed versions in one snapshot"
					return
				}
				if v < last {
					errc <- "version went backwards"
					return
				}
				last = v
			}
		})
	}
	for i := range publishes {
		root := b
		if i%2 == 1 {
			root = a
		}
		if _, err := s.Publish(root); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for e := range errc {
		t.Error(e)
	}
	if s.Version() != publishes+1 {
		t.Errorf("Version = %d, want %d", s.Version(), publishes+1)
	}
}

func TestCleanURLAllocs(t *testing.T) {
	for _, p := range []string{"/", "/docs/deep/c.js", "/index.html?q=1"} {
		if n := testing.AllocsPerRun(100, func() { _, _, _ = CleanURL(p) }); n != 0 {
			t.Errorf("CleanURL(%q) allocates %.0f times, want 0", p, n)
		}
	}
}

func benchLookup(b *testing.B, p string, want error) {
	s := mustOpen(b, fixture(b))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Lookup(p); !errors.Is(err, want) {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookupClean(b *testing.B)   { benchLookup(b, "/docs/deep/c.js", nil) }
func BenchmarkLookupQuery(b *testing.B)   { benchLookup(b, "/docs/deep/c.js?v=3", nil) }
func BenchmarkLookupEncoded(b *testing.B) { benchLookup(b, "/sp%20ace.txt", nil) }
func BenchmarkLookupDotDot(b *testing.B)  { benchLookup(b, "/docs/../index.html", nil) }
func BenchmarkLookupTraversal(b *testing.B) {
	benchLookup(b, "/%2e%2e/%2e%2e/etc/passwd", ErrForbidden)
}
func BenchmarkLookupNotFound(b *testing.B) { benchLookup(b, "/docs/missing.html", ErrNotFound) }

func TestHidden(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"index.html", false},
		{"a.b.c", false},
		{"docs", false},
		{".git", true},
		{".env", true},
		{".", true},
		{`a\b`, true},
		{`..\secret`, true},
		{"", true},
	} {
		if got := Hidden(tc.name); got != tc.want {
			t.Errorf("Hidden(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestObjectKey checks that the spellings of one file an access log holds
// fold to the file's table URL, and that a directory names its index file.
func TestObjectKey(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"/a/b.gif", "/a/b.gif", true},
		{"/cgi-bin/imagemap/countdown70?173,285", "/cgi-bin/imagemap/countdown70", true},
		{"/./enviro/gif/access.gif", "/enviro/gif/access.gif", true},
		{"/finance//brrow_1t.gif", "/finance/brrow_1t.gif", true},
		{"/warn.gif%20width=20", "/warn.gif width=20", true},
		{"/", "/index.html", true},
		{"/?x", "/index.html", true},
		{"/shuttle/countdown/", "/shuttle/countdown/index.html", true},
		{"/shuttle/countdown", "/shuttle/countdown", true},
		{"/a/..", "/index.html", true},
		{"/../etc/passwd", "", false},
		{"/a%zz", "", false},
	} {
		got, ok := ObjectKey(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ObjectKey(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ObjectKey("/docs/deep/c.js?q=1") }); n != 0 {
		t.Errorf("ObjectKey of a clean file URL allocates %.0f times, want 0", n)
	}
}
