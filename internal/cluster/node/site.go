package node

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"shoal/internal/base/content"
	"shoal/internal/base/httpwire"
)

// SiteFile is the name of a site's rules file in its root. Dot-names are
// never in the content table, so the file is not served.
const SiteFile = ".shoal.toml"

// SiteRules are the per-site response rules a hosting customer sets for
// their own site, in TOML. Example:
//
//	listing = false                 # directory listings (default off)
//	[error_pages]
//	404 = "/404.html"               # served with status 404
//	[types]
//	".foo" = "text/x-foo"           # MIME overrides by extension
//	[[headers]]
//	match = "/assets/"              # prefix: a pattern ending in "/"
//	expires = "720h"                # Expires and Cache-Control: max-age
//	[[headers]]
//	match = "*.html"                # no "/": matched against the base name
//	cache_control = "no-cache"
//
// Header rules apply, first match wins, to the 200, 206 and 304 answers
// for files, like nginx's expires and add_header in a location.
type SiteRules struct {
	// Listing turns on HTML listings of directories without index.html;
	// off (the default), such a directory is 403, as nginx's autoindex off.
	Listing bool `toml:"listing"`
	// ErrorPages maps a status ("404", "403") to the URL of a file of the
	// site whose body answers it, as nginx's error_page.
	ErrorPages map[string]string `toml:"error_pages"`
	// Types maps extensions (".ext") to Content-Types, over the built-in
	// table (nginx's mime.types and the pinned web types).
	Types map[string]string `toml:"types"`
	// Headers are the caching rules by path pattern.
	Headers []HeaderRule `toml:"headers"`
}

// HeaderRule sets caching headers for the files whose URL matches Match: a
// pattern ending in "/" is a prefix of the URL path, one holding another
// "/" is a path.Match pattern for the whole path, and one without "/" a
// path.Match pattern for the last element ("*.css").
type HeaderRule struct {
	Match string `toml:"match"`
	// CacheControl is sent as Cache-Control as is.
	CacheControl string `toml:"cache_control"`
	// Expires is nginx's expires: a Go duration ("720h") sends Expires
	// now+d and Cache-Control: max-age=d (unless CacheControl is set); a
	// negative one, or "epoch", sends an Expires in the past and
	// Cache-Control: no-cache; "max" sends 2037-12-31 and ten years.
	Expires string `toml:"expires"`
}

// siteRules is SiteRules checked and compiled for the request path.
type siteRules struct {
	listing    bool
	errorPages map[int]string
	types      map[string]string // lower-case extension -> type
	headers    []headerRule
}

type headerRule struct {
	kind    byte // 'p' prefix, 'f' full path, 'b' base name
	pattern string
	// fixed holds the header lines that do not change per response;
	// expires > 0 adds an Expires line of now+expires.
	fixed   string
	expires time.Duration
}

// Expires values nginx sends for "epoch" and "max".
const (
	expiresEpoch = "Thu, 01 Jan 1970 00:00:01 GMT"
	expiresMax   = "Thu, 31 Dec 2037 23:55:55 GMT"
)

// LoadSiteRules reads a rules file. Unknown keys are errors naming the file
// and the key, so a typo does not silently drop a rule.
func LoadSiteRules(file string) (SiteRules, error) {
	var r SiteRules
	b, err := os.ReadFile(file)
	if err != nil {
		return r, fmt.Errorf("site rules: %w", err)
	}
	md, err := toml.Decode(string(b), &r)
	if err != nil {
		return r, fmt.Errorf("site rules %s: %w", file, err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		return r, fmt.Errorf("site rules %s: unknown key %q; fix: use listing, error_pages, types or [[headers]] with match, cache_control, expires", file, u[0].String())
	}
	if _, err := r.compile(); err != nil {
		return r, fmt.Errorf("site rules %s: %w", file, err)
	}
	return r, nil
}

// siteRulesFor returns the rules of cfg: cfg.Site when set, else the root's
// SiteFile when present, else none.
func siteRulesFor(cfg *Config) (*siteRules, error) {
	r := cfg.Site
	if r == nil {
		f := filepath.Join(cfg.Root, SiteFile)
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			return &siteRules{}, nil
		}
		loaded, err := LoadSiteRules(f)
		if err != nil {
			return nil, err
		}
		r = &loaded
	}
	return r.compile()
}

func (r *SiteRules) compile() (*siteRules, error) {
	s := &siteRules{listing: r.Listing}
	for k, u := range r.ErrorPages {
		code, err := strconv.Atoi(k)
		if err != nil || code < 400 || code > 599 {
			return nil, fmt.Errorf("error_pages: %q is not a 4xx or 5xx status", k)
		}
		if !strings.HasPrefix(u, "/") {
			return nil, fmt.Errorf("error_pages %s: %q is not a URL path of the site (\"/404.html\")", k, u)
		}
		if s.errorPages == nil {
			s.errorPages = map[int]string{}
		}
		s.errorPages[code] = u
	}
	for ext, t := range r.Types {
		if !strings.HasPrefix(ext, ".") || strings.ContainsAny(t, "\r\n") || t == "" {
			return nil, fmt.Errorf("types: %q = %q: want \".ext\" = \"type/subtype\"", ext, t)
		}
		if s.types == nil {
			s.types = map[string]string{}
		}
		s.types[strings.ToLower(ext)] = t
	}
	for i, h := range r.Headers {
		hr := headerRule{pattern: h.Match}
		switch {
		case h.Match == "":
			return nil, fmt.Errorf("headers[%d]: match is empty", i)
		case strings.HasSuffix(h.Match, "/"):
			hr.kind = 'p'
		case strings.Contains(h.Match, "/"):
			hr.kind = 'f'
		default:
			hr.kind = 'b'
		}
		if _, err := path.Match(h.Match, ""); err != nil {
			return nil, fmt.Errorf("headers[%d]: match %q: %w", i, h.Match, err)
		}
		if strings.ContainsAny(h.CacheControl, "\r\n") {
			return nil, fmt.Errorf("headers[%d]: cache_control holds a line break", i)
		}
		cc := h.CacheControl
		var fixed []byte
		switch h.Expires {
		case "":
		case "epoch":
			fixed = httpwire.AppendHeader(fixed, "Expires", expiresEpoch)
			cc = cmp(cc, "no-cache")
		case "max":
			fixed = httpwire.AppendHeader(fixed, "Expires", expiresMax)
			cc = cmp(cc, "max-age=315360000")
		default:
			d, err := time.ParseDuration(h.Expires)
			if err != nil {
				return nil, fmt.Errorf("headers[%d]: expires %q: want a duration (\"720h\"), \"epoch\" or \"max\"", i, h.Expires)
			}
			if d < 0 {
				fixed = httpwire.AppendHeader(fixed, "Expires", expiresEpoch)
				cc = cmp(cc, "no-cache")
			} else {
				hr.expires = d
				cc = cmp(cc, "max-age="+strconv.FormatInt(int64(d/time.Second), 10))
				if d == 0 {
					hr.expires = -1 // Expires: now
				}
			}
		}
		if cc != "" {
			fixed = httpwire.AppendHeader(fixed, "Cache-Control", cc)
		}
		hr.fixed = string(fixed)
		s.headers = append(s.headers, hr)
	}
	return s, nil
}

func cmp(set, def string) string {
	if set != "" {
		return set
	}
	return def
}

// rule returns the first header rule matching url, or nil.
func (s *siteRules) rule(url string) *headerRule {
	for i := range s.headers {
		h := &s.headers[i]
		var ok bool
		switch h.kind {
		case 'p':
			// "/assets/" matches "/assets" too.
			ok = strings.HasPrefix(url, h.pattern) || len(url)+1 == len(h.pattern) && strings.HasPrefix(h.pattern, url)
		case 'f':
			ok, _ = path.Match(h.pattern, url)
		default:
			ok, _ = path.Match(h.pattern, path.Base(url))
		}
		if ok {
			return h
		}
	}
	return nil
}

// appendRule appends a rule's headers for a response at now.
func appendRule(dst []byte, h *headerRule, now time.Time) []byte {
	if h == nil {
		return dst
	}
	dst = append(dst, h.fixed...)
	if h.expires != 0 {
		t := now
		if h.expires > 0 {
			t = now.Add(h.expires)
		}
		dst = append(dst, "Expires: "...)
		dst = httpwire.AppendHTTPDate(dst, t)
		dst = append(dst, crlf...)
	}
	return dst
}

// contentType is e's type under the site's overrides.
func (s *siteRules) contentType(e *content.Entry) string {
	if s.types == nil {
		return e.ContentType
	}
	ext := path.Ext(e.URL)
	if t, ok := s.types[ext]; ok {
		return t
	}
	if t, ok := s.types[strings.ToLower(ext)]; ok {
		return t
	}
	return e.ContentType
}

// maxErrorPage is the largest error page served; a larger file named as
// one is not read (the built-in text answers).
const maxErrorPage = 1 << 20

// errorPage answers status with the site's page for it when it has one and
// reports whether it did. The page is served like a file (through the
// cache) but with the error status and without validators.
func (c *conn) errorPage(tbl *content.Table, status int, now time.Time, closeAfter, head bool) bool {
	u, ok := c.site.rules.errorPages[status]
	if !ok {
		return false
	}
	e := tbl.Exact(u)
	if e == nil || e.IsDir {
		return false
	}
	if e.Size > maxErrorPage {
		return false // an error page is small; refuse to read a huge one
	}
	var body []byte
	if h, o := c.s.cached(c.cacheKey(e, ""), e, false); o != nil {
		body = make([]byte, e.Size)
		_, err := h.ReadAt(body, 0)
		h.Release()
		if err != nil {
			body = nil
		}
	}
	if body == nil {
		b, err := readSmall(tbl, e)
		if err != nil {
			return false
		}
		body = b
	}
	c.serveBytes(status, c.site.rules.contentType(e), "", body, now, closeAfter, head)
	return true
}

// fail answers an error status with the site's error page or the built-in
// text.
func (c *conn) fail(tbl *content.Table, status int, reason string, now time.Time, closeAfter, head bool) {
	if tbl != nil && c.errorPage(tbl, status, now, closeAfter, head) {
		return
	}
	c.simple(status, "", now, closeAfter, head, reason)
}
