package publish

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// swapSite makes a site of n small files and a secret outside it, and
// starts swapping each file in turn (atomic renames) for what swapIn
// makes at a hidden temporary name, then back to the regular file: the
// race a hostile editor of the site folder can run against a publish.
// The swapping stops when the test ends.
func swapSite(t *testing.T, n int, swapIn func(tmp, secret string) error) (site, secret string) {
	t.Helper()
	dir := t.TempDir()
	site = filepath.Join(dir, "site")
	os.Mkdir(site, 0o755)
	secret = filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("SECRET-OUTSIDE-THE-SITE"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		os.WriteFile(filepath.Join(site, fmt.Sprintf("f%03d.txt", i)), []byte("inside"), 0o644)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tmp, back := filepath.Join(site, ".swap"), filepath.Join(site, ".back")
		for i := 0; ; i = (i + 1) % n {
			select {
			case <-stop:
				return
			default:
			}
			f := filepath.Join(site, fmt.Sprintf("f%03d.txt", i))
			os.Remove(tmp)
			if err := swapIn(tmp, secret); err != nil {
				t.Error(err)
				return
			}
			os.Rename(tmp, f)
			os.WriteFile(back, []byte("inside"), 0o644)
			os.Rename(back, f)
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
	return site, secret
}

// TestSnapshotSymlinkSwapStaysInside: a file swapped for a link to a file
// outside the site between the walk and the open must never be published
// (opening by path followed the link).
func TestSnapshotSymlinkSwapStaysInside(t *testing.T) {
	site, _ := swapSite(t, 64, func(tmp, secret string) error { return os.Symlink(secret, tmp) })
	out := t.TempDir()
	for round := range 30 {
		dst := filepath.Join(out, fmt.Sprint(round))
		if _, err := snapshot(context.Background(), site, dst, "", false); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("SECRET")) {
					t.Fatalf("round %d: %s holds the file from outside the site", round, p)
				}
			}
			return nil
		})
	}
}

// TestSnapshotFIFOSwapDoesNotHang: a file swapped for a FIFO between the
// walk and the open must not block the publish (and with it every later
// one): the open does not wait for a writer and the opened file must be
// regular.
func TestSnapshotFIFOSwapDoesNotHang(t *testing.T) {
	site, _ := swapSite(t, 64, func(tmp, _ string) error { return syscall.Mkfifo(tmp, 0o644) })
	out := t.TempDir()
	done := make(chan error, 1)
	go func() {
		for round := range 30 {
			if _, err := snapshot(context.Background(), site, filepath.Join(out, fmt.Sprint(round)), "", false); err != nil {
				done <- fmt.Errorf("round %d: %w", round, err)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		// Unblock the hung open so the test binary can end.
		filepath.WalkDir(site, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&fs.ModeNamedPipe != 0 {
				if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			}
			return nil
		})
		t.Fatal("a snapshot hung on a FIFO swapped in for a file")
	}
}

// TestSnapshotTimesOut: a snapshot past its deadline stops, reports it and
// leaves no version behind, so a huge or stuck tree cannot hold the
// publish lock for ever.
func TestSnapshotTimesOut(t *testing.T) {
	site := t.TempDir()
	for i := range 10 {
		os.WriteFile(filepath.Join(site, fmt.Sprintf("f%d", i)), []byte("x"), 0o644)
	}
	ctx, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	dst := filepath.Join(t.TempDir(), "v1")
	if _, err := snapshot(ctx, site, dst, "", false); err == nil {
		t.Fatal("a snapshot past its deadline succeeded")
	}
	for _, p := range []string{dst, dst + ".tmp"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
}

// TestSnapshotKeepsInsideLinks: links to regular files inside the site are
// still published as the files they name; links leaving it, to folders,
// dangling ones and FIFOs are not.
func TestSnapshotKeepsInsideLinks(t *testing.T) {
	dir := t.TempDir()
	site := filepath.Join(dir, "site")
	os.MkdirAll(filepath.Join(site, "sub"), 0o755)
	os.WriteFile(filepath.Join(site, "sub", "real.txt"), []byte("real"), 0o644)
	os.WriteFile(filepath.Join(dir, "outside.txt"), []byte("SECRET"), 0o644)
	syscall.Mkfifo(filepath.Join(site, "fifo"), 0o644)
	os.Symlink("sub/real.txt", filepath.Join(site, "in.txt"))
	os.Symlink("../outside.txt", filepath.Join(site, "out.txt"))
	os.Symlink(filepath.Join(dir, "outside.txt"), filepath.Join(site, "abs.txt"))
	os.Symlink("sub", filepath.Join(site, "dirlink"))
	os.Symlink("nowhere", filepath.Join(site, "dangling"))
	os.Symlink("fifo", filepath.Join(site, "fifolink"))
	dst := filepath.Join(dir, "v1")
	st, err := snapshot(context.Background(), site, dst, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "in.txt")); err != nil || string(b) != "real" {
		t.Errorf("inside link: %q, %v", b, err)
	}
	for _, n := range []string{"out.txt", "abs.txt", "dirlink", "dangling", "fifo", "fifolink"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); err == nil {
			t.Errorf("%s published", n)
		}
	}
	if st.Files != 2 {
		t.Errorf("%d files, want 2 (sub/real.txt, in.txt)", st.Files)
	}
}
