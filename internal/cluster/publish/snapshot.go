package publish

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"shoal/internal/base/content"
)

// snapshotStats says how a version's tree was built.
type snapshotStats struct {
	Files, Linked, Copied, Bumped int
	Bytes                         int64 // bytes copied
}

// snapshot writes an immutable copy of the site at src into dst (which
// must not exist), for nodes to serve while src goes on being edited. A
// file identical to the one at the same place in prev (same bytes) is
// hard-linked from there, so unchanged
// files cost no space and keep their ETag (content.Entry: mtime and size)
// even if only their time changed; any other file is copied with its
// modification time. A file whose bytes changed but whose size and time did
// not (tools that pin mtimes for reproducible builds) gets a time one
// microsecond later than prev's, so that its ETag changes with its content. Hidden names are left out, as the
// content table would; symlinks to regular files inside src are copied as
// the files they point to, others skipped. The tree is written to dst+".tmp"
// and renamed into place, so a half-written version never has its name.
func snapshot(src, dst, prev string, link bool) (snapshotStats, error) {
	var st snapshotStats
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return st, fmt.Errorf("site %s: %w", src, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return st, fmt.Errorf("site %s: not a directory", src)
	}
	tmp := dst + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return st, fmt.Errorf("version folder: %w", err)
	}
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == real {
			return nil
		}
		if content.Hidden(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(real, p)
		if err != nil {
			return err
		}
		out := filepath.Join(tmp, rel)
		switch mode := d.Type(); {
		case mode.IsDir():
			return os.Mkdir(out, 0o755)
		case mode&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling: the content table skips it too
			}
			if r, err := filepath.Rel(real, target); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				return nil // leaves the site
			}
			if fi, err := os.Stat(target); err != nil || !fi.Mode().IsRegular() {
				return nil
			}
			p = target
		case !mode.IsRegular():
			return nil
		}
		st.Files++
		return placeFile(p, out, filepath.Join(prev, rel), link, &st)
	})
	if err != nil {
		os.RemoveAll(tmp)
		return st, fmt.Errorf("snapshot %s: %w", src, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return st, fmt.Errorf("snapshot %s: %w", src, err)
	}
	return st, nil
}

// placeFile puts the file src at out: a hard link to old when old holds
// the same bytes with the same size and time, a copy otherwise.
func placeFile(src, out, old string, link bool, st *snapshotStats) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	ofi, oerr := os.Stat(old)
	sameSize := oerr == nil && ofi.Mode().IsRegular() && ofi.Size() == fi.Size()
	same := false
	if sameSize {
		if os.SameFile(fi, ofi) {
			same = true // a republish of the served tree (Rebalance)
		} else if same, err = sameBytes(src, old); err != nil {
			return err
		}
		if same && link {
			// Keep the previous version's file, and with its time its ETag.
			if err := os.Link(old, out); err == nil {
				st.Linked++
				return nil
			}
			// Another filesystem: copy below.
		}
	}
	n, err := copyFile(src, out, fi.Mode().Perm()|0o444)
	if err != nil {
		return err
	}
	st.Copied++
	st.Bytes += n
	mt := fi.ModTime()
	switch {
	case same:
		mt = ofi.ModTime()
	case sameSize && ofi.ModTime().Equal(mt):
		// Same size and time, other bytes: move the time on so the ETag
		// moves with the content.
		mt = mt.Add(time.Microsecond)
		st.Bumped++
	}
	return os.Chtimes(out, mt, mt)
}

func copyFile(src, dst string, perm fs.FileMode) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// sameBytes compares two files of equal size.
func sameBytes(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		aDone := errors.Is(ea, io.EOF) || errors.Is(ea, io.ErrUnexpectedEOF)
		bDone := errors.Is(eb, io.EOF) || errors.Is(eb, io.ErrUnexpectedEOF)
		if aDone || bDone {
			return aDone && bDone, nil
		}
		if ea != nil {
			return false, ea
		}
		if eb != nil {
			return false, eb
		}
	}
}
