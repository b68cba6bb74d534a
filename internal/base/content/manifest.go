package content

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ManifestName is the file at the root of a node's tree of a partitioned
// site (internal/cluster/publish with replicas below the node count) that lists
// every file of the version — the ones this node stores and the ones it
// does not — with their sizes, modification times and holders, so every
// node knows which files exist and who stores them. The leading dot keeps
// it out of the URL table (hidden names are never served).
const ManifestName = ".shoal-manifest"

// manifestMagic is the manifest's first line (format version 1).
const manifestMagic = "shoal-manifest 1"

// ErrRemote: OpenFile was asked for a file this node does not store.
var ErrRemote = errors.New("content: file stored on other nodes")

// ManifestFile is one line of a manifest.
type ManifestFile struct {
	// URL is the file's table URL ("/a/b.html").
	URL string
	// Size and ModTime are the file's, so that every node derives the
	// same ETag for it.
	Size    int64
	ModTime time.Time
	// Holders are the placement IDs of the nodes that store it, best
	// first. IDs contain no comma, tab or newline.
	Holders []string
}

// WriteManifest writes files as a manifest: a magic line, then one line
// per file, "size TAB mtime-ns TAB holder,holder TAB quoted-URL".
func WriteManifest(w io.Writer, files []ManifestFile) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(manifestMagic + "\n")
	var b []byte
	for _, f := range files {
		for _, h := range f.Holders {
			if h == "" || strings.ContainsAny(h, ",\t\n") {
				return fmt.Errorf("manifest: holder id %q", h)
			}
		}
		b = strconv.AppendInt(b[:0], f.Size, 10)
		b = append(b, '\t')
		b = strconv.AppendInt(b, f.ModTime.UnixNano(), 10)
		b = append(b, '\t')
		b = append(b, strings.Join(f.Holders, ",")...)
		b = append(b, '\t')
		b = strconv.AppendQuote(b, f.URL)
		b = append(b, '\n')
		bw.Write(b)
	}
	return bw.Flush()
}

// ReadManifest parses a manifest written by WriteManifest.
func ReadManifest(r io.Reader) ([]ManifestFile, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() || sc.Text() != manifestMagic {
		return nil, fmt.Errorf("manifest: not a %q file", manifestMagic)
	}
	var out []ManifestFile
	for n := 2; sc.Scan(); n++ {
		f := strings.SplitN(sc.Text(), "\t", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("manifest line %d: %d fields, want 4", n, len(f))
		}
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		mt, err2 := strconv.ParseInt(f[1], 10, 64)
		u, err3 := strconv.Unquote(f[3])
		if err := errors.Join(err1, err2, err3); err != nil || size < 0 {
			return nil, fmt.Errorf("manifest line %d: %q: bad field (%v)", n, sc.Text(), err)
		}
		var hs []string
		if f[2] != "" {
			hs = strings.Split(f[2], ",")
		}
		out = append(out, ManifestFile{URL: u, Size: size, ModTime: time.Unix(0, mt), Holders: hs})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return out, nil
}

// readManifest adds the files the tree's manifest lists and the tree does
// not hold, as Remote entries, and records the holders of those it does.
// A tree without a manifest is a full copy; a manifest that is not a
// regular file or does not parse fails the scan (a partitioned node
// without its manifest would answer 404 for most of the site).
func (t *Table) readManifest() error {
	p := filepath.Join(t.root, ManifestName)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", ManifestName)
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	files, err := ReadManifest(f)
	if err != nil {
		return err
	}
	for _, m := range files {
		if len(m.URL) < 2 || m.URL[0] != '/' || path.Clean(m.URL) != m.URL || strings.ContainsAny(m.URL, "\\\x00") {
			return fmt.Errorf("%s: bad URL %q", ManifestName, m.URL)
		}
		if e := t.entries[m.URL]; e != nil {
			if !e.IsDir {
				e.Holders = m.Holders
			}
			continue
		}
		parent := path.Dir(m.URL)
		if d := t.entries[parent]; d == nil || !d.IsDir || hiddenURL(m.URL) {
			continue // the publisher makes every folder in every tree
		}
		e := &Entry{URL: m.URL, Size: m.Size, ModTime: m.ModTime, ETag: etag(m.ModTime.UnixNano(), m.Size),
			ContentType: contentType(path.Ext(m.URL)), Remote: true, Holders: m.Holders}
		t.entries[m.URL] = e
		t.children[parent] = append(t.children[parent], e)
		t.files++
		t.remote++
	}
	return nil
}

// hiddenURL reports a URL with a segment that starts with a dot (never
// served, like the scan's hidden names).
func hiddenURL(u string) bool { return strings.Contains(u, "/.") }

// Remote is the number of files the table lists that this node does not
// store (a partitioned site's other nodes' files).
func (t *Table) Remote() int { return t.remote }
