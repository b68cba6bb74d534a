//go:build linux

package handoff

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDialTrustedPaths checks, path by path, which handoff sockets a front
// may connect to: only sockets strictly inside the folder, reached without
// a symbolic link or "..", served by the expected user.
func TestDialTrustedPaths(t *testing.T) {
	base, err := os.MkdirTemp("", "shoal-tr-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	in, out := filepath.Join(base, "in"), filepath.Join(base, "out")
	for _, d := range []string{in, out, filepath.Join(in, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(in, "a.sock"), filepath.Join(in, "sub", "b.sock"), filepath.Join(out, "c.sock")} {
		l, err := ListenFD(p)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	os.WriteFile(filepath.Join(in, "file"), nil, 0o644)
	os.Symlink(filepath.Join(out, "c.sock"), filepath.Join(in, "link.sock"))
	os.Symlink(filepath.Join(in, "a.sock"), filepath.Join(in, "inner-link.sock"))
	os.Symlink(out, filepath.Join(in, "outdir"))
	me := os.Geteuid()
	for _, tc := range []struct {
		path string
		uid  int
		want error // nil: connects
	}{
		{in + "/a.sock", me, nil},
		{in + "/sub/b.sock", me, nil},
		{in + "//sub/b.sock", me, nil},
		{in + "/a.sock", me + 1, ErrSocketPeer},
		{out + "/c.sock", me, ErrSocketOutsideDir},
		{in + "/../out/c.sock", me, ErrSocketOutsideDir},
		{in + "/./a.sock", me, ErrSocketOutsideDir},
		{in + "/link.sock", me, ErrSocketOutsideDir},
		{in + "/inner-link.sock", me, ErrSocketOutsideDir}, // no symbolic link at all, even to inside
		{in + "/outdir/c.sock", me, ErrSocketOutsideDir},
		{in + "/file", me, ErrSocketOutsideDir},
		{in + "/sub", me, ErrSocketOutsideDir},
		{in, me, ErrSocketOutsideDir},
		{in + "x/a.sock", me, ErrSocketOutsideDir},
		{"in/a.sock", me, ErrSocketOutsideDir},
		{"", me, ErrSocketOutsideDir},
	} {
		uc, err := dialTrusted(tc.path, SocketTrust{Dir: in, UID: tc.uid})
		if uc != nil {
			uc.Close()
		}
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%q uid %d: %v, want %v", tc.path, tc.uid, err, tc.want)
		}
	}
}
