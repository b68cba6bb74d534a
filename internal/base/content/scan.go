package content

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultContentType is used when the built-in tables know no type for a
// file's extension, as nginx's default_type. Content is never sniffed: the
// type of a URL must not depend on bytes an uploader controls.
const DefaultContentType = "application/octet-stream"

// webTypes pins the content types of common web formats, ahead of nginx's
// table. The host's /etc/mime.types (what mime.TypeByExtension reads) is not
// consulted at all: it differs between hosts (Debian maps .js to
// application/javascript on older releases, text/javascript on newer), nodes
// of one cluster must answer the same URL with the same header wherever they
// run, and loading it costs each node 0.4 MB of heap.
var webTypes = map[string]string{
	".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8",
	".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
	".mjs": "text/javascript; charset=utf-8", ".json": "application/json",
	".txt": "text/plain; charset=utf-8", ".xml": "text/xml; charset=utf-8",
	".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".gif": "image/gif", ".webp": "image/webp", ".avif": "image/avif", ".ico": "image/vnd.microsoft.icon",
	".wasm": "application/wasm", ".pdf": "application/pdf", ".woff": "font/woff", ".woff2": "font/woff2",
	".mp4": "video/mp4", ".webm": "video/webm", ".mp3": "audio/mpeg",
	".gz": "application/gzip", ".zip": "application/zip", ".bin": DefaultContentType,
}

// Hidden reports whether a file or folder name is left out of a site (and
// so never served nor published): dot-files such as .git or .env, and names
// holding a backslash, which a client could send as a path separator.
func Hidden(name string) bool {
	return name == "" || name[0] == '.' || strings.IndexByte(name, '\\') >= 0
}

// contentType maps a file extension to its Content-Type: the pinned web
// types first, then nginx's mime.types (mimetypes.go), then
// DefaultContentType.
func contentType(ext string) string {
	if ext == "" {
		return DefaultContentType
	}
	if t, ok := webTypes[strings.ToLower(ext)]; ok {
		return t
	}
	if t, ok := nginxTypes[strings.ToLower(ext)]; ok {
		return t
	}
	return DefaultContentType
}

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
	dir, err := openRoot(real)
	if err != nil {
		return nil, fmt.Errorf("site root %q: %w", root, err)
	}
	t := &Table{
		root:     real,
		dir:      dir,
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
		if Hidden(d.Name()) {
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
		default:
			// Symlinks (refused, inside the root too: Table.OpenFile
			// would not follow them), FIFOs, sockets, devices: never
			// served.
			return nil
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
			e.ContentType = contentType(path.Ext(e.URL))
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
	if err := t.readManifest(); err != nil {
		return nil, fmt.Errorf("scan %s: %w", real, err)
	}
	for _, kids := range t.children {
		slices.SortFunc(kids, func(a, b *Entry) int { return strings.Compare(a.URL, b.URL) })
	}
	t.dirETags()
	return t, nil
}

// fileETag is "mtime_ns_hex-size_hex", strong and quoted.
func fileETag(info fs.FileInfo) string { return etag(info.ModTime().UnixNano(), info.Size()) }

// etag is fileETag from the modification time (ns) and the size: what a
// manifest's remote entries get, so every node agrees on a file's tag.
func etag(mtime, size int64) string {
	b := make([]byte, 0, 36)
	b = append(b, '"')
	b = strconv.AppendUint(b, uint64(mtime), 16)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(size), 16)
	b = append(b, '"')
	return string(b)
}

// dirETags gives every directory an ETag that changes exactly when its
// listing does: an FNV-64a hash of its children's names and kinds and of the
// ETags of the files directly inside it. Subdirectories count by name only,
// so a change deep in the tree does not invalidate every ancestor's listing,
// and identical trees published from different roots get identical tags.
func (t *Table) dirETags() {
	h := fnv.New64a()
	for _, e := range t.entries {
		if !e.IsDir {
			continue
		}
		h.Reset()
		for _, c := range t.children[e.URL] {
			h.Write([]byte(path.Base(c.URL)))
			if c.IsDir {
				h.Write([]byte{0, 'd'})
			} else {
				h.Write([]byte{0, 'f'})
				h.Write([]byte(c.ETag))
			}
			h.Write([]byte{0})
		}
		e.ETag = `"d-` + strconv.FormatUint(h.Sum64(), 16) + `"`
	}
}
