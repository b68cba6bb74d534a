package node

import (
	"fmt"
	"io"

	"shoal/internal/content"
	"shoal/internal/httpwire"
)

// object is a cached file: the body and its 200 response head, prebuilt at
// insert time up to (not including) the Date and Connection lines and the
// blank line, which vary per response.
type object struct {
	etag    string
	lastMod string // IMF-fixdate of the entry's ModTime
	ctype   string
	head    []byte // "HTTP/1.1 200 OK\r\n...Accept-Ranges: bytes\r\n"
	body    []byte
}

// cost is what the object occupies in the cache budget.
func (o *object) cost() int64 {
	return int64(len(o.head) + len(o.body) + len(o.etag) + len(o.lastMod) + 64)
}

// appendEntityHeaders appends the headers shared by 200, 206 and 304
// responses for a file.
func appendEntityHeaders(dst []byte, server, etag, lastMod string) []byte {
	dst = httpwire.AppendHeader(dst, "Server", server)
	dst = httpwire.AppendHeader(dst, "ETag", etag)
	dst = httpwire.AppendHeader(dst, "Last-Modified", lastMod)
	return httpwire.AppendHeader(dst, "Accept-Ranges", "bytes")
}

// newObject builds the cacheable form of a file from its bytes.
func newObject(server string, e *content.Entry, body []byte) *object {
	o := &object{
		etag:    e.ETag,
		lastMod: string(httpwire.AppendHTTPDate(nil, e.ModTime)),
		ctype:   e.ContentType,
		body:    body,
	}
	h := make([]byte, 0, 256)
	h = httpwire.AppendStatusLine(h, 200)
	h = httpwire.AppendHeader(h, "Content-Type", o.ctype)
	h = httpwire.AppendHeaderInt(h, "Content-Length", int64(len(body)))
	h = appendEntityHeaders(h, server, o.etag, o.lastMod)
	o.head = h
	return o
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
