package node

import (
	"fmt"
	"io"
	"os"

	"shoal/internal/base/content"
	"shoal/internal/base/store"
)

// object is what the node keeps of a representation beside its body: the
// validators and its 200 response head, prebuilt up to (not including)
// the Date and Connection lines and the blank line, which vary per
// response. It is the value of the representation's entry in the node's
// object store (internal/base/store), which holds the body off the Go
// heap: in its arena when small, in the page cache otherwise.
type object struct {
	etag   string
	date   [29]byte // IMF-fixdate of the entry's ModTime (lastModified)
	ctype  string
	coding string      // Content-Encoding of a precompressed variant, "" for identity
	vary   bool        // the name has variants: responses carry Vary: Accept-Encoding
	rule   *headerRule // the site's caching headers for the name, or nil (site.go)
	head   []byte      // "HTTP/1.1 200 OK\r\n...Accept-Ranges: bytes\r\n"
}

// lastModified is the object's Last-Modified value, a view of its date:
// only appended to responses, never kept.
func (o *object) lastModified() string { return bstr(o.date[:]) }

// cached returns key's entry in the object store when it holds the
// representation sel (same ETag and Vary), with its object; otherwise an
// invalid handle. A stale entry stays until replaced.
func (s *Server) cached(key string, sel *content.Entry, vary bool) (store.Handle, *object) {
	h, ok := s.objs.Get(key)
	if !ok {
		return h, nil
	}
	if o, _ := h.Value().(*object); o != nil && o.etag == sel.ETag && o.vary == vary {
		return h, o
	}
	h.Release()
	return store.Handle{}, nil
}

// link opens sel's file and hands it to the object store under key with
// o, returning the handle the response is sent from: the store's policy
// decides whether the entry stays for later requests (its body then
// stays in memory) or goes with the handle (its pages dropped). key must
// not be a view of a scratch buffer.
func (s *Server) link(tbl *content.Table, sel *content.Entry, key string, o *object) (store.Handle, error) {
	f, err := tbl.OpenFile(sel)
	if err != nil {
		return store.Handle{}, fmt.Errorf("node: %w", err)
	}
	h, err := s.objs.Link(key, f, sel.Size, nil, o)
	if err != nil {
		return h, fmt.Errorf("node: %w", err)
	}
	return h, nil
}

// readSmall reads a whole file whose table size is e.Size, opened confined
// to tbl's root (content.Table.OpenFile). A file that changed size since the
// scan is refused, so a body never contradicts the URL table's ETag.
func readSmall(tbl *content.Table, e *content.Entry) ([]byte, error) {
	f, err := tbl.OpenFile(e)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	defer f.Close()
	return readExact(f, e)
}

func readExact(f *os.File, e *content.Entry) ([]byte, error) {
	buf := make([]byte, e.Size)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("node: read %s: %w", e.URL, err)
	}
	var one [1]byte
	if n, _ := f.Read(one[:]); n != 0 {
		return nil, fmt.Errorf("node: read %s: file grew since the scan", e.URL)
	}
	return buf, nil
}

// handleReader reads a store entry's body from the start: what the node
// lends the peer host for a peer's fetch (PeerFile). FromMemory tells the
// peer host whether the body was in this node's memory.
type handleReader struct {
	h   store.Handle
	off int64
	mem bool
}

func (r *handleReader) Read(p []byte) (int, error) {
	n, err := r.h.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (r *handleReader) Close() error {
	r.h.Release()
	return nil
}

// FromMemory reports whether the body was in the memory tier.
func (r *handleReader) FromMemory() bool { return r.mem }
