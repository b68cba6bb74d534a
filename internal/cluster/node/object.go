package node

import (
	"fmt"
	"io"

	"shoal/internal/base/content"
)

// object is a cached file: the body and its 200 response head, prebuilt at
// insert time up to (not including) the Date and Connection lines and the
// blank line, which vary per response.
type object struct {
	etag    string
	lastMod string // IMF-fixdate of the entry's ModTime
	ctype   string
	coding  string      // Content-Encoding of a precompressed variant, "" for identity
	vary    bool        // the name has variants: responses carry Vary: Accept-Encoding
	rule    *headerRule // the site's caching headers for the name, or nil (site.go)
	head    []byte      // "HTTP/1.1 200 OK\r\n...Accept-Ranges: bytes\r\n"
	body    []byte
}

// cost is what the object occupies in the cache budget.
func (o *object) cost() int64 {
	return int64(len(o.head) + len(o.body) + len(o.etag) + len(o.lastMod) + 64)
}

// newObject builds the cacheable form of a file from its bytes.
func newObject(server string, e *content.Entry, body []byte) *object {
	return buildObject(server, e, e.ContentType, "", false, body)
}

// readSmall reads a whole file whose table size is e.Size, opened confined
// to tbl's root (content.Table.OpenFile). A file that changed size since the
// scan is refused, so a cached object never contradicts the URL table's
// ETag.
func readSmall(tbl *content.Table, e *content.Entry) ([]byte, error) {
	f, err := tbl.OpenFile(e)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	defer f.Close()
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
