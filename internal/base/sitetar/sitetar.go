// Package sitetar moves a published site version between hosts as a tar
// stream (docs/publish.md, "Several hosts"): the front writes a version's
// tree, a node on another host extracts it into its own versions folder
// during the prepare phase. Extraction refuses anything a site version
// cannot hold — links, devices, names that climb out or are hidden — so a
// stream cannot write outside the folder it is given.
package sitetar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Write writes the tree at root — folders and regular files only — as a
// PAX tar stream, whose modification times keep their nanoseconds, so
// every host that extracts it computes the same ETags (content.Entry).
func Write(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: info.ModTime(), Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		case info.Mode().IsRegular():
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.CopyN(tw, f, info.Size())
			return err
		}
		return nil // versions hold only folders and files
	})
	if err != nil {
		return fmt.Errorf("site tar: %w", err)
	}
	return tw.Close()
}

// maxFetch bounds what a node writes while fetching one version, so a
// broken or hostile stream cannot fill its disk. 64 GiB.
const maxFetch = 64 << 30

// Extract writes the tar stream r (Write's) into dst, which
// must not exist: into dst+".tmp" first, renamed when complete. Only
// folders and regular files are taken, and only names that stay inside
// dst with no hidden segment; anything else fails the whole version.
func Extract(r io.Reader, dst string) error {
	tmp := dst + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("site tar: %w", err)
	}
	if err := extract(r, tmp); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("site tar: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("site tar: %w", err)
	}
	return nil
}

func extract(r io.Reader, dst string) error {
	tr := tar.NewReader(r)
	var total int64
	type dirTime struct {
		path string
		t    time.Time
	}
	var dirs []dirTime
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimSuffix(hdr.Name, "/"))
		if name == "." || strings.HasPrefix(name, "/") || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("entry %q leaves the version", hdr.Name)
		}
		for seg := range strings.SplitSeq(name, "/") {
			if seg == "" || seg[0] == '.' || strings.IndexByte(seg, '\\') >= 0 {
				return fmt.Errorf("entry %q: hidden or invalid name", hdr.Name)
			}
		}
		out := filepath.Join(dst, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, dirTime{out, hdr.ModTime})
		case tar.TypeReg:
			if total += hdr.Size; hdr.Size < 0 || total > maxFetch {
				return fmt.Errorf("version larger than %d bytes", int64(maxFetch))
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_, err = io.CopyN(f, tr, hdr.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := os.Chtimes(out, hdr.ModTime, hdr.ModTime); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: only folders and regular files", hdr.Name)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- { // after their files were written
		os.Chtimes(dirs[i].path, dirs[i].t, dirs[i].t)
	}
	return nil
}
