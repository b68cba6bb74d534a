// Package vhost maps the host a request names (its Host header, or the
// authority of an absolute-form target) to one of a fixed set of sites, so
// one shoal cluster serves many sites. The front keys its tables
// and counters by site + path, the nodes pick the site's folder and cache by
// the same key, so two sites' "/index.html" never collide and one site's hot
// files are weighed against another's by the same cache policy.
//
// The set of sites is configured, never learned from requests: a Host that
// is not a site or an alias maps to Default ("_default"), which bounds every
// per-site table and metric by the configuration, whatever clients send.
package vhost

import (
	"fmt"
	"sort"
	"strings"
)

// Default is the site for hosts that are neither a site nor an alias, and
// the folder name a node serves them from (ROOT/_default), as Apache's
// _default_ virtual host.
const Default = "_default"

// Config lists the sites.
type Config struct {
	// Sites are the canonical host names ("example.com"), matched without
	// case, port or a trailing dot.
	Sites []string
	// Aliases maps other names to a site ("www.example.com" = "example.com").
	Aliases map[string]string
}

// Map resolves hosts to sites. It is immutable and safe for concurrent use.
type Map struct {
	names map[string]string // normalized host -> site
	sites []string          // sorted, with Default
}

// New checks cfg and builds the Map.
func New(cfg Config) (*Map, error) {
	m := &Map{names: map[string]string{}}
	add := func(name, site string) error {
		n := Normalize(nil, []byte(name))
		if len(n) == 0 || string(n) != strings.ToLower(strings.TrimSuffix(name, ".")) {
			return fmt.Errorf("vhost: %q is not a host name (no port, scheme or path)", name)
		}
		if prev, ok := m.names[string(n)]; ok && prev != site {
			return fmt.Errorf("vhost: %q names both %q and %q", name, prev, site)
		}
		m.names[string(n)] = site
		return nil
	}
	seen := map[string]bool{Default: true}
	m.sites = append(m.sites, Default)
	for _, s := range cfg.Sites {
		if s == Default {
			continue
		}
		if err := add(s, s); err != nil {
			return nil, err
		}
		if !seen[s] {
			seen[s] = true
			m.sites = append(m.sites, s)
		}
	}
	for alias, site := range cfg.Aliases {
		if !seen[site] {
			return nil, fmt.Errorf("vhost: alias %q points to %q, which is not a site", alias, site)
		}
		if err := add(alias, site); err != nil {
			return nil, err
		}
	}
	sort.Strings(m.sites)
	return m, nil
}

// Sites returns the site names, Default included, sorted.
func (m *Map) Sites() []string { return m.sites }

// Site returns the site for a Host header value or an authority
// ("Example.COM:8080" -> "example.com"), or Default. scratch is reused for
// the normalized name, so a caller that keeps its buffer does not allocate.
func (m *Map) Site(scratch []byte, host []byte) (site string, buf []byte) {
	buf = Normalize(scratch[:0], host)
	if s, ok := m.names[string(buf)]; ok {
		return s, buf
	}
	return Default, buf
}

// Normalize appends host lower-cased, without a port and a trailing dot.
// An IPv6 literal keeps its brackets.
func Normalize(dst, host []byte) []byte {
	end := len(host)
	if end > 0 && host[0] == '[' {
		for i, c := range host {
			if c == ']' {
				end = i + 1
				break
			}
		}
	} else {
		for i, c := range host {
			if c == ':' {
				end = i
				break
			}
		}
	}
	h := host[:end]
	if len(h) > 0 && h[len(h)-1] == '.' {
		h = h[:len(h)-1]
	}
	for _, c := range h {
		if c >= 'A' && c <= 'Z' {
			c |= 0x20
		}
		dst = append(dst, c)
	}
	return dst
}

// Authority returns the authority of an absolute-form request-target
// ("http://a.example/x" -> "a.example"), or nil for any other form.
func Authority(target []byte) []byte {
	for _, scheme := range [...]string{"http://", "https://"} {
		if len(target) >= len(scheme) && strings.EqualFold(string(target[:len(scheme)]), scheme) {
			rest := target[len(scheme):]
			for i, c := range rest {
				if c == '/' || c == '?' || c == '#' {
					return rest[:i]
				}
			}
			return rest
		}
	}
	return nil
}

// AppendKey appends the content key of a path on a site: site + path
// ("example.com/index.html"). Paths start with "/", so the key is
// unambiguous.
func AppendKey(dst []byte, site string, path []byte) []byte {
	dst = append(dst, site...)
	return append(dst, path...)
}
