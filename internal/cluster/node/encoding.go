package node

import (
	"strings"

	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
)

// Precompressed variants (nginx's gzip_static and brotli_static): a file
// "name.br" or "name.gz" next to "name" is the same representation with a
// content coding applied (RFC 9110 §8.4), written ahead of time by `shoal
// compress`. The node serves it instead of "name" when the client accepts
// the coding, with Content-Encoding, the variant file's own ETag and
// Last-Modified, and ranges over the encoded bytes (RFC 9110 §14.1.2: a
// range selects bytes of the selected representation; nginx 1.22 ignores
// Range on gzip_static responses instead). Every response for a name that
// has a variant carries "Vary: Accept-Encoding", as nginx with gzip_vary on.

// variant is one precompressed coding: the file suffix and the coding name
// sent in Content-Encoding. Order is preference: brotli first, as nginx
// runs brotli_static before gzip_static.
var variants = [...]struct{ suffix, coding string }{
	{".br", "br"},
	{".gz", "gzip"},
}

// selectEncoding picks the representation of e to send: e itself, or a
// precompressed variant the client accepts. vary reports whether e has any
// usable variant (so the response depends on Accept-Encoding). HTTP/1.0
// clients get the identity, like nginx's default gzip_http_version 1.1,
// because HTTP/1.0 caches ignore Vary. A variant older than e is stale (the
// file changed after `shoal compress`) and is ignored. The variants come
// from the site's index for tbl: one map lookup by entry, no allocation.
func (c *conn) selectEncoding(tbl *content.Table, e *content.Entry, ae []byte) (sel *content.Entry, coding string, vary bool) {
	if c.s.cfg.NoPrecompressed {
		return e, "", false
	}
	set := c.site.variantsOf(tbl)[e]
	if set == nil {
		return e, "", false
	}
	if ae != nil && c.req.Minor >= 1 {
		for i, v := range variants {
			if set[i] != nil && acceptsCoding(ae, v.coding) {
				return set[i], v.coding, true
			}
		}
	}
	return e, "", true
}

// variantSet holds an entry's usable variants, in the order of variants.
type variantSet [len(variants)]*content.Entry

// variantIndex maps the files of one table version that have usable
// variants to them.
type variantIndex struct {
	tbl *content.Table
	m   map[*content.Entry]*variantSet
}

// variantsOf returns the variant index of tbl, building it on first use
// after a publish (one pass over the table). Tables are immutable, so the
// index is valid as long as tbl is the table served.
func (s *vsite) variantsOf(tbl *content.Table) map[*content.Entry]*variantSet {
	if x := s.vidx.Load(); x != nil && x.tbl == tbl {
		return x.m
	}
	s.vmu.Lock()
	defer s.vmu.Unlock()
	if x := s.vidx.Load(); x != nil && x.tbl == tbl {
		return x.m
	}
	m := map[*content.Entry]*variantSet{}
	for _, ve := range tbl.Entries() {
		if ve.IsDir {
			continue
		}
		for i, v := range variants {
			name, ok := strings.CutSuffix(ve.URL, v.suffix)
			if !ok {
				continue
			}
			base := tbl.Exact(name)
			if base == nil || base.IsDir || ve.ModTime.Before(base.ModTime) {
				continue
			}
			set := m[base]
			if set == nil {
				set = new(variantSet)
				m[base] = set
			}
			set[i] = ve
		}
	}
	s.vidx.Store(&variantIndex{tbl: tbl, m: m})
	return m
}

// acceptsCoding reports whether an Accept-Encoding value (RFC 9110 §12.5.3)
// lists coding with a non-zero weight. Like nginx, only an explicit token
// counts ("*" does not select a precompressed file).
func acceptsCoding(v []byte, coding string) bool {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		el := httpwire.TrimOWS(v[:i])
		name, params := el, []byte(nil)
		for j, ch := range el {
			if ch == ';' {
				name, params = httpwire.TrimOWS(el[:j]), el[j+1:]
				break
			}
		}
		if httpwire.EqualFold(name, coding) {
			return !zeroWeight(params)
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
	}
	return false
}

// zeroWeight reports whether parameters hold "q=0" (0, 0.0, 0.00, 0.000).
func zeroWeight(params []byte) bool {
	for len(params) > 0 {
		i := 0
		for i < len(params) && params[i] != ';' {
			i++
		}
		p := httpwire.TrimOWS(params[:i])
		if len(p) >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=' {
			q := httpwire.TrimOWS(p[2:])
			if len(q) == 0 || q[0] != '0' {
				return false
			}
			for _, ch := range q[1:] {
				if ch != '.' && ch != '0' {
					return false
				}
			}
			return true
		}
		if i == len(params) {
			break
		}
		params = params[i+1:]
	}
	return false
}

// cacheKey is the cache key of a representation: the URL for the identity,
// "coding:URL" for a variant, so each encoding is its own cache object and
// a direct request for "/a.css.gz" (served as application/gzip) does not
// share one. With virtual hosts the URL is prefixed by the site's name
// ("example.com/a.css"), so sites share the cache without colliding. A key
// other than e.URL is a view of the scratch buffer, valid until the next
// call; Add needs a copy.
func (c *conn) cacheKey(e *content.Entry, coding string) string {
	if coding == "" && c.site.name == "" {
		return e.URL
	}
	c.scratch = c.scratch[:0]
	if coding != "" {
		c.scratch = append(append(c.scratch, coding...), ':')
	}
	c.scratch = append(append(c.scratch, c.site.name...), e.URL...)
	return bstr(c.scratch)
}

// appendRepHeaders appends the headers that describe a representation in
// 200, 206 and 304 responses: Server, ETag, Last-Modified, and when they
// apply Content-Encoding and Vary.
func appendRepHeaders(dst []byte, server, etag, lastMod, coding string, vary bool) []byte {
	dst = httpwire.AppendHeader(dst, "Server", server)
	dst = httpwire.AppendHeader(dst, "ETag", etag)
	dst = httpwire.AppendHeader(dst, "Last-Modified", lastMod)
	if coding != "" {
		dst = httpwire.AppendHeader(dst, "Content-Encoding", coding)
	}
	if vary {
		dst = httpwire.AppendHeader(dst, "Vary", "Accept-Encoding")
	}
	return dst
}

// buildObject is the cacheable form of a representation of size bytes,
// sel, sent with the content type of the name it answers for.
func buildObject(server string, sel *content.Entry, ctype, coding string, vary bool, size int64) *object {
	o := &object{}
	o.build(server, sel, ctype, coding, vary, size)
	return o
}

// build makes o the cacheable form of a representation of size bytes,
// reusing o's head buffer: a conn rebuilds the object of a miss the store
// did not keep (conn.spare) instead of allocating one per miss.
func (o *object) build(server string, sel *content.Entry, ctype, coding string, vary bool, size int64) {
	h := o.head[:0]
	if h == nil {
		h = make([]byte, 0, 256)
	}
	*o = object{etag: sel.ETag, ctype: ctype, coding: coding, vary: vary}
	httpwire.AppendHTTPDate(o.date[:0], sel.ModTime) // always 29 bytes: fills date in place
	h = httpwire.AppendStatusLine(h, 200)
	h = httpwire.AppendHeader(h, "Content-Type", o.ctype)
	h = httpwire.AppendHeaderInt(h, "Content-Length", size)
	h = appendRepHeaders(h, server, o.etag, o.lastModified(), coding, vary)
	h = httpwire.AppendHeader(h, "Accept-Ranges", "bytes")
	o.head = h
}
