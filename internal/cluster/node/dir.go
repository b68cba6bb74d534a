package node

import (
	"html"
	"net/url"
	"path"
	"time"

	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
)

// serveDir answers a directory: a redirect to the slash form (so relative
// links resolve), then index.html if the directory has one, else a listing.
func (c *conn) serveDir(tbl *content.Table, e *content.Entry, rawPath []byte, now time.Time, closeAfter, head bool) bool {
	if rawPath[len(rawPath)-1] != '/' {
		// Built from the cleaned URL, never from the raw target, so the
		// Location cannot become "//other.host/".
		loc := (&url.URL{Path: e.URL + "/"}).EscapedPath()
		c.simple(301, "Location: "+loc+"\r\n", now, closeAfter, head, "")
		return !closeAfter
	}
	idxURL := e.URL + "/index.html"
	if e.URL == "/" {
		idxURL = "/index.html"
	}
	if idx, err := tbl.Lookup(idxURL); err == nil && !idx.IsDir {
		return c.serveFile(tbl, idx, now, closeAfter, head)
	}
	if !c.site.rules.listing {
		// As nginx with autoindex off: a directory without an index.
		c.fail(tbl, 403, "directory listing is off", now, closeAfter, head)
		return !closeAfter
	}
	kids, err := tbl.List(e.URL)
	if err != nil {
		c.fail(tbl, 404, "not found", now, closeAfter, head)
		return !closeAfter
	}
	c.serveBytes(200, "text/html; charset=utf-8", "", listing(e.URL, kids), now, closeAfter, head)
	return !closeAfter
}

// listing renders a minimal HTML index of a directory. Names are escaped
// twice over: %-escaped in href, HTML-escaped in both attribute and text.
func listing(dirURL string, kids []*content.Entry) []byte {
	title := html.EscapeString(dirURL)
	b := make([]byte, 0, 256+64*len(kids))
	b = append(b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of "...)
	b = append(b, title...)
	b = append(b, "</title></head>\n<body><h1>Index of "...)
	b = append(b, title...)
	b = append(b, "</h1>\n<ul>\n"...)
	if dirURL != "/" {
		b = append(b, "<li><a href=\"../\">../</a></li>\n"...)
	}
	for _, k := range kids {
		name := path.Base(k.URL)
		href := (&url.URL{Path: name}).EscapedPath()
		if len(name) > 0 && containsColon(name) {
			href = "./" + href // "a:b" must not parse as a scheme
		}
		shown := name
		if k.IsDir {
			href += "/"
			shown += "/"
		}
		b = append(b, "<li><a href=\""...)
		b = append(b, html.EscapeString(href)...)
		b = append(b, "\">"...)
		b = append(b, html.EscapeString(shown)...)
		b = append(b, "</a>"...)
		if !k.IsDir {
			b = append(b, " "...)
			b = httpwire.AppendHTTPDate(b, k.ModTime)
			b = append(b, " "...)
			b = appendInt(b, k.Size)
		}
		b = append(b, "</li>\n"...)
	}
	return append(b, "</ul>\n</body></html>\n"...)
}

func containsColon(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return true
		}
	}
	return false
}
