package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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
//
// src may be edited, even by someone hostile, while this runs: every
// folder is read and every file opened through an os.Root on src (openat
// with O_NOFOLLOW on each component, links resolved inside the root and
// refused when they leave it), files with O_NONBLOCK so that a FIFO or
// device swapped in for a file cannot block the open, and what was opened
// is checked with fstat to be a regular file and is the only thing read.
// A file swapped for a link to outside src, or for anything but a regular
// file, is skipped. ctx bounds the whole snapshot: past its deadline the
// copy stops between two blocks and nothing is left behind.
func snapshot(ctx context.Context, src, dst, prev string, link bool) (snapshotStats, error) {
	var st snapshotStats
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return st, fmt.Errorf("site %s: %w", src, err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return st, fmt.Errorf("site %s: %w", src, err)
	}
	defer root.Close()
	if fi, err := root.Stat("."); err != nil || !fi.IsDir() {
		return st, fmt.Errorf("site %s: not a directory", src)
	}
	tmp := dst + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return st, fmt.Errorf("version folder: %w", err)
	}
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if content.Hidden(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		out := filepath.Join(tmp, filepath.FromSlash(rel))
		switch mode := d.Type(); {
		case mode.IsDir():
			return os.Mkdir(out, 0o755)
		case mode&fs.ModeSymlink == 0 && !mode.IsRegular():
			return nil // FIFOs, sockets, devices
		}
		return placeFile(ctx, root, rel, out, filepath.Join(prev, filepath.FromSlash(rel)), link, &st)
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

// openRegular opens rel inside root for reading, without blocking and
// without leaving root, and returns it with its fstat only when it is a
// regular file; (nil, nil, nil) means "not a file to publish": a link
// leaving the site, dangling or naming a folder, a FIFO, a device, or a
// name gone since the walk listed it.
func openRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, nil
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// placeFile puts the file rel of root at out: a hard link to old when old
// holds the same bytes with the same size and time, a copy otherwise.
// Only the descriptor opened once (openRegular) is read.
func placeFile(ctx context.Context, root *os.Root, rel, out, old string, link bool, st *snapshotStats) error {
	f, fi, err := openRegular(root, rel)
	if f == nil {
		return err
	}
	defer f.Close()
	st.Files++
	ofi, oerr := os.Stat(old)
	sameSize := oerr == nil && ofi.Mode().IsRegular() && ofi.Size() == fi.Size()
	same := false
	if sameSize {
		if os.SameFile(fi, ofi) {
			same = true // a republish of the served tree (Rebalance)
		} else if same, err = sameBytes(f, old); err != nil {
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
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	n, err := copyFile(ctx, f, out, fi.Mode().Perm()|0o444)
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

// copyFile copies in to a new file dst, checking ctx between blocks.
func copyFile(ctx context.Context, in io.Reader, dst string, perm fs.FileMode) (int64, error) {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, ctxReader{ctx, in})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// ctxReader ends a read with ctx's error once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// sameBytes compares the opened file fa with the file at b (of equal size).
func sameBytes(fa io.Reader, b string) (bool, error) {
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
