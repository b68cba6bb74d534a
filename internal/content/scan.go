package content

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultContentType is used when mime.TypeByExtension knows no type for a
// file's extension. Content is never sniffed: the type of a URL must not
// depend on bytes an uploader controls.
const DefaultContentType = "application/octet-stream"

// scan builds a Table (version 0) from the tree at root. Errors reading a
// directory fail the whole scan, so a Publish never swaps in half a site; a
// file that vanishes while the walk runs is simply left out.
func scan(root string) (*Table, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("site root %q: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("site root %q: %w", root, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("site root %q: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("site root %q: %w", root, ErrNotDir)
	}
	t := &Table{
		root:     real,
		entries:  make(map[string]*Entry),
		children: make(map[string][]*Entry),
	}
	t.entries["/"] = &Entry{URL: "/", Path: real, ModTime: fi.ModTime(), IsDir: true}

	walkErr := filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != real {
				return nil
			}
			return err
		}
		if p == real {
			return nil
		}
		name := d.Name()
		if name[0] == '.' || strings.IndexByte(name, '\\') >= 0 {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(real, p)
		if err != nil {
			return err
		}
		e := &Entry{URL: "/" + filepath.ToSlash(rel), Path: p}
		var info fs.FileInfo
		switch mode := d.Type(); {
		case mode.IsDir():
			info, err = d.Info()
			e.IsDir = true
		case mode.IsRegular():
			info, err = d.Info()
		case mode&fs.ModeSymlink != 0:
			e.Path, info = resolveLink(real, p)
			if info == nil {
				return nil // leaves the root, dangles, or is not a regular file
			}
		default:
			return nil // FIFO, socket, device: never served
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		e.ModTime = info.ModTime()
		if !e.IsDir {
			e.Size = info.Size()
			e.ETag = fileETag(info)
			e.ContentType = mime.TypeByExtension(path.Ext(e.URL))
			if e.ContentType == "" {
				e.ContentType = DefaultContentType
			}
			t.files++
		}
		t.entries[e.URL] = e
		parent := path.Dir(e.URL)
		t.children[parent] = append(t.children[parent], e)
		return nil
	})
	if walkErr != nil {
		return nil, fmt.Errorf("scan %s: %w", real, walkErr)
	}
	for _, kids := range t.children {
		slices.SortFunc(kids, func(a, b *Entry) int { return strings.Compare(a.URL, b.URL) })
	}
	t.dirETag(t.entries["/"])
	return t, nil
}

// resolveLink follows the symlink at p and returns the target's path and info
// only if the target is a regular file inside root with no hidden segment;
// otherwise info is nil.
func resolveLink(root, p string) (string, fs.FileInfo) {
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", nil
	}
	rel, err := filepath.Rel(root, target)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", nil
	}
	for seg := range strings.SplitSeq(filepath.ToSlash(rel), "/") {
		if seg == "" || seg[0] == '.' {
			return "", nil
		}
	}
	info, err := os.Stat(target)
	if err != nil || !info.Mode().IsRegular() {
		return "", nil
	}
	return target, info
}

// fileETag is "mtime_ns_hex-size_hex", strong and quoted.
func fileETag(info fs.FileInfo) string {
	b := make([]byte, 0, 36)
	b = append(b, '"')
	b = strconv.AppendUint(b, uint64(info.ModTime().UnixNano()), 16)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(info.Size()), 16)
	b = append(b, '"')
	return string(b)
}

// dirETag sets the ETag of directory e (and, first, of its subdirectories) to
// an FNV-64a hash of its children's names and ETags.
func (t *Table) dirETag(e *Entry) {
	h := fnv.New64a()
	for _, c := range t.children[e.URL] {
		if c.IsDir {
			t.dirETag(c)
		}
		h.Write([]byte(path.Base(c.URL)))
		h.Write([]byte{0})
		h.Write([]byte(c.ETag))
		h.Write([]byte{0})
	}
	e.ETag = `"d-` + strconv.FormatUint(h.Sum64(), 16) + `"`
}
