package content

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestManifestRemoteEntries: a partitioned node's tree holds some files
// and a manifest listing all; the table lists every file, the missing ones
// as Remote with the ETag the holder's own scan gives them.
func TestManifestRemoteEntries(t *testing.T) {
	full := t.TempDir()
	part := t.TempDir()
	mt := time.Unix(1700000000, 123456789)
	for _, f := range []string{"index.html", "a/b.css", "a/c d.png", "x/y/z.txt"} {
		p := filepath.Join(full, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("body of "+f), 0o644)
		os.Chtimes(p, mt, mt)
	}
	fullStore, err := Open(full)
	if err != nil {
		t.Fatal(err)
	}
	// The node stores index.html only; every folder exists.
	for _, d := range []string{"a", "x/y"} {
		os.MkdirAll(filepath.Join(part, d), 0o755)
	}
	b, _ := os.ReadFile(filepath.Join(full, "index.html"))
	os.WriteFile(filepath.Join(part, "index.html"), b, 0o644)
	os.Chtimes(filepath.Join(part, "index.html"), mt, mt)
	var files []ManifestFile
	for _, e := range fullStore.Snapshot().Entries() {
		if !e.IsDir {
			files = append(files, ManifestFile{URL: e.URL, Size: e.Size, ModTime: e.ModTime, Holders: []string{"n1:80", "n2:80"}})
		}
	}
	files = append(files, ManifestFile{URL: "/nodir/q", Size: 1, ModTime: mt}, ManifestFile{URL: "/a/.hidden", Size: 1, ModTime: mt})
	mf, _ := os.Create(filepath.Join(part, ManifestName))
	if err := WriteManifest(mf, files); err != nil {
		t.Fatal(err)
	}
	mf.Close()

	s := mustOpen(t, part)
	tbl := s.Snapshot()
	if tbl.Files() != 4 || tbl.Remote() != 3 {
		t.Fatalf("files %d remote %d, want 4 and 3", tbl.Files(), tbl.Remote())
	}
	for _, u := range []string{"/index.html", "/a/b.css", "/a/c d.png", "/x/y/z.txt"} {
		want := fullStore.Snapshot().Exact(u)
		got := tbl.Exact(u)
		if got == nil {
			t.Fatalf("%s missing", u)
		}
		if got.ETag != want.ETag || got.Size != want.Size || !got.ModTime.Equal(want.ModTime) || got.ContentType != want.ContentType {
			t.Errorf("%s: %+v, want the full tree's %+v", u, got, want)
		}
		if got.Remote != (u != "/index.html") || !slices.Equal(got.Holders, []string{"n1:80", "n2:80"}) {
			t.Errorf("%s: remote %v holders %v", u, got.Remote, got.Holders)
		}
	}
	if _, err := tbl.OpenFile(tbl.Exact("/a/b.css")); !errors.Is(err, ErrRemote) {
		t.Errorf("OpenFile of a remote file: %v, want ErrRemote", err)
	}
	if tbl.Exact("/nodir/q") != nil || tbl.Exact("/a/.hidden") != nil {
		t.Error("a manifest line without its folder, or hidden, got listed")
	}
	// Folder listings include remote files and agree with the full tree.
	if got, want := tbl.Exact("/a").ETag, fullStore.Snapshot().Exact("/a").ETag; got != want {
		t.Errorf("/a listing ETag %s, full tree %s", got, want)
	}
}

func TestManifestBad(t *testing.T) {
	for name, body := range map[string]string{
		"magic":   "nope\n",
		"fields":  manifestMagic + "\n1\t2\n",
		"size":    manifestMagic + "\n-1\t2\tn\t\"/a\"\n",
		"url":     manifestMagic + "\n1\t2\tn\t/a\n",
		"escape":  manifestMagic + "\n1\t2\tn\t\"/../a\"\n",
		"relurl":  manifestMagic + "\n1\t2\tn\t\"a\"\n",
		"dotdots": manifestMagic + "\n1\t2\tn\t\"/a/./b\"\n",
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ManifestName), []byte(body), 0o644)
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "manifest") && !strings.Contains(err.Error(), ManifestName) {
			t.Errorf("%s: Open = %v, want a manifest error", name, err)
		}
	}
	if err := WriteManifest(new(strings.Builder), []ManifestFile{{URL: "/a", Holders: []string{"a,b"}}}); err == nil {
		t.Error("a holder id with a comma was written")
	}
}
