// Package content maps a site root directory to shoal's URL table: for every
// servable file and directory under the root it records the cleaned URL, the
// absolute file path, size, modification time, a strong ETag and a content
// type (SPEC §2, "Content tree").
//
// # Confinement
//
// Keeping requests inside the root is the point of this package. The tree is
// scanned once (Open, Publish) and Lookup answers only from that in-memory
// table: it never builds a filesystem path from a user-supplied string and
// never calls the filesystem, so no request path — however it is encoded —
// can name a file outside the root. On top of that, Lookup rejects malformed
// paths early, so attacks show up as 400/403 rather than silent 404s:
//
//   - %-escapes are decoded exactly once; an invalid escape is ErrBadPath.
//     Double-encoded input ("%252e%252e") decodes to the literal name "%2e%2e",
//     which is just a name that is not in the table.
//   - NUL and backslash (raw or encoded) are ErrBadPath: neither is valid in a
//     POSIX URL path, and backslash is a separator on other systems.
//   - Decoded "%2f" is a separator like "/"; a ".." segment that would climb
//     above the root ("/../x", "/%2e%2e/x", "/a/..%2f..%2fx") is ErrForbidden.
//     ".." that stays inside the root ("/a/../b") is resolved with path.Clean.
//
// The scan enforces the rest:
//
//   - Symlinks are not served, wherever they point — inside the root or not
//     (nginx's "disable_symlinks on"): they are left out of the table, and
//     a root that is itself a symlink is resolved once, at Open.
//   - Hidden names (any path segment starting with '.', e.g. ".git", ".env")
//     are not served, nor is anything below a hidden directory.
//   - Only regular files and directories are listed: FIFOs, sockets and device
//     nodes (which could block or leak a server) are skipped, as are names
//     containing a backslash, which no request could reach.
//
// The table is a snapshot of the tree at scan time, but the files are
// opened later, and a name may have been swapped since — a file or a
// directory replaced by a symlink that leaves the root, or by a FIFO. So
// servers open files only with Table.OpenFile, which resolves the entry's
// URL beneath the root's descriptor, held open since the scan, following
// no symlink and accepting only a regular file, at open time (openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS on Linux; an O_NOFOLLOW walk
// elsewhere). Sites should still change by publishing a new root.
//
// # Publishing
//
// A Store holds an immutable Table behind an atomic.Pointer. Publish scans a
// new root completely, then swaps the pointer, so a reader sees either the old
// site or the new one, never a mix (SPEC §2: "Publishing a new version is
// atomic"). The returned Diff lists the URLs that were added, removed or whose
// ETag changed, which is what caches need to invalidate. Readers that need
// several answers from one version take a Snapshot.
package content

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by Lookup and List. They are returned unwrapped from the
// request path (Lookup is on every request and the caller already holds the
// path it asked for), so test them with errors.Is.
var (
	// ErrNotFound: the URL is well formed but not in the table (includes
	// hidden files and symlinks). HTTP 404.
	ErrNotFound = errors.New("content: not found")
	// ErrForbidden: a ".." segment would climb above the site root. HTTP 403.
	ErrForbidden = errors.New("content: path escapes the site root")
	// ErrBadPath: invalid %-escape, NUL or backslash in the path. HTTP 400.
	ErrBadPath = errors.New("content: malformed path")
	// ErrNotDir: List was asked for the children of a file.
	ErrNotDir = errors.New("content: not a directory")
)

// Entry is one URL of the site. Entries are shared between all readers of a
// Table and must not be modified.
type Entry struct {
	// URL is the cleaned, decoded URL path: "/" for the root, "/a/b.html" for
	// a file, "/a" (no trailing slash) for a directory.
	URL string
	// Path is the absolute filesystem path of the file as scanned, for
	// logs; servers open it with Table.OpenFile, never by this path.
	Path string
	// Size is the file size in bytes (0 for directories).
	Size int64
	// ModTime is the file's modification time.
	ModTime time.Time
	// ETag is a strong, quoted entity tag. For files it is built from the
	// modification time (ns) and size, like nginx's "mtime-size" but with
	// nanoseconds; the inode is deliberately left out so that nodes serving
	// identical copies of a site agree on ETags (the reason Apache 2.4 dropped
	// the inode from its default FileETag). For directories it is a hash of
	// the children's names, kinds and file ETags, so it changes exactly when
	// the directory listing would.
	ETag string
	// ContentType comes from the extension: a pinned table of web types, then
	// nginx's mime.types, then application/octet-stream. It is never sniffed
	// from content. Directories have none: the server decides between an
	// index file and a listing.
	ContentType string
	// IsDir reports a directory entry.
	IsDir bool
	// Remote marks a file this node does not store: the site is
	// partitioned (internal/cluster/placement) and the version's manifest
	// (ManifestName) lists it with the nodes that do, Holders (their
	// placement IDs, best first). Servers fetch it from a holder; OpenFile
	// refuses it.
	Remote  bool
	Holders []string
}

// Diff reports how a Publish changed the table. Each list holds URLs sorted
// ascending; Changed holds URLs present in both versions with different ETags.
type Diff struct {
	Added, Removed, Changed []string
}

// Table is one immutable version of the URL table. All methods are safe for
// concurrent use; a Table never changes after it is built.
type Table struct {
	version  uint64
	root     string
	dir      *rootDir // root held open; files open beneath it
	entries  map[string]*Entry
	children map[string][]*Entry // dir URL → children sorted by name
	files    int
	remote   int // files listed by the manifest and stored elsewhere
}

// Store is the concurrency-safe handle to the current Table. Lookups are
// lock-free (one atomic load); Publish calls are serialised by a mutex.
type Store struct {
	cur atomic.Pointer[Table]
	mu  sync.Mutex // serialises Publish
}

// Open scans root once and returns a Store at Version 1. root may itself be
// a symlink; it is resolved, and Root reports the resolved absolute path.
func Open(root string) (*Store, error) {
	t, err := scan(root)
	if err != nil {
		return nil, err
	}
	t.version = 1
	s := &Store{}
	s.cur.Store(t)
	return s, nil
}

// Snapshot returns the current Table. Use it when several answers must come
// from the same version of the site (for example a directory listing and the
// entries it links to).
func (s *Store) Snapshot() *Table { return s.cur.Load() }

// Lookup resolves a request-target path against the current Table; see
// Table.Lookup.
func (s *Store) Lookup(rawPath string) (*Entry, error) { return s.cur.Load().Lookup(rawPath) }

// List returns the children of a directory in the current Table; see
// Table.List.
func (s *Store) List(dirURL string) ([]*Entry, error) { return s.cur.Load().List(dirURL) }

// Version counts published tables: 1 after Open, +1 per successful Publish.
func (s *Store) Version() uint64 { return s.cur.Load().version }

// Root is the resolved absolute root directory of the current Table.
func (s *Store) Root() string { return s.cur.Load().root }

// Len is the number of URLs (files and directories) in the current Table.
func (s *Store) Len() int { return s.cur.Load().Len() }

// Publish scans newRoot completely and only then swaps it in as the current
// Table with Version+1, returning the URLs that changed. Publishing the same
// root again re-reads it (a reload). On error the current Table stays.
func (s *Store) Publish(newRoot string) (Diff, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := scan(newRoot)
	if err != nil {
		return Diff{}, fmt.Errorf("publish: %w", err)
	}
	old := s.cur.Load()
	t.version = old.version + 1
	d := diff(old, t)
	s.cur.Store(t)
	return d, nil
}

func diff(old, new *Table) Diff {
	var d Diff
	for u, e := range new.entries {
		o, ok := old.entries[u]
		switch {
		case !ok:
			d.Added = append(d.Added, u)
		case o.ETag != e.ETag || o.IsDir != e.IsDir:
			d.Changed = append(d.Changed, u)
		}
	}
	for u := range old.entries {
		if _, ok := new.entries[u]; !ok {
			d.Removed = append(d.Removed, u)
		}
	}
	slices.Sort(d.Added)
	slices.Sort(d.Removed)
	slices.Sort(d.Changed)
	return d
}

// Version is the Table's version number (see Store.Version).
func (t *Table) Version() uint64 { return t.version }

// Root is the resolved absolute root directory this Table was scanned from.
func (t *Table) Root() string { return t.root }

// Len is the number of URLs (files and directories, including "/").
func (t *Table) Len() int { return len(t.entries) }

// Files is the number of file (non-directory) entries.
func (t *Table) Files() int { return t.files }

// Entries returns every entry sorted by URL (a fresh slice of shared entries).
func (t *Table) Entries() []*Entry {
	out := make([]*Entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *Entry) int {
		switch {
		case a.URL < b.URL:
			return -1
		case a.URL > b.URL:
			return 1
		}
		return 0
	})
	return out
}

// Lookup resolves rawPath, the path of a request-target exactly as received
// (it may be %-encoded and may carry a "?query", which is ignored), to its
// Entry. "/" and directories return the directory Entry; a file requested
// with a trailing slash is ErrNotFound. Errors: ErrBadPath, ErrForbidden,
// ErrNotFound (see the package doc). A path that is already clean and needs
// no decoding is looked up without allocating.
func (t *Table) Lookup(rawPath string) (*Entry, error) {
	u, dirOnly, err := CleanURL(rawPath)
	if err != nil {
		return nil, err
	}
	e, ok := t.entries[u]
	if !ok || (dirOnly && !e.IsDir) {
		return nil, ErrNotFound
	}
	return e, nil
}

// List returns the children of the directory dirURL (resolved like Lookup),
// sorted by name, as a fresh slice.
func (t *Table) List(dirURL string) ([]*Entry, error) {
	e, err := t.Lookup(dirURL)
	if err != nil {
		return nil, err
	}
	if !e.IsDir {
		return nil, ErrNotDir
	}
	return slices.Clone(t.children[e.URL]), nil
}
