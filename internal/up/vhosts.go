package up

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"shoal/internal/base/vhost"
	"shoal/internal/tools/site"
)

// SampleSites are the virtual hosts `shoal up --vhosts` generates: names
// under .localhost, which resolve to the loopback address (RFC 6761 §6.3),
// so `curl http://a.localhost:8080/` reaches the front without DNS.
var SampleSites = []string{"a.localhost", "b.localhost"}

// prepareVHosts returns a virtual-hosts root (one folder per site) and its
// site names: cfg.Site when given, else two generated sample sites with
// different seeds, so their files of the same name differ.
func prepareVHosts(cfg *Config) (root string, sites []string, info string, err error) {
	root = cfg.Site
	if root == "" {
		root = filepath.Join(cfg.DataDir, "vhosts")
		for i, name := range SampleSites {
			if _, err := site.Generate(filepath.Join(root, name), site.Config{Seed: int64(101 + i), Files: 500}); err != nil {
				return "", nil, "", err
			}
		}
		if err := writeDefaultSite(filepath.Join(root, vhost.Default), SampleSites); err != nil {
			return "", nil, "", fmt.Errorf("--vhosts: %w", err)
		}
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return "", nil, "", fmt.Errorf("--vhosts: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != vhost.Default {
			sites = append(sites, e.Name())
		}
	}
	if len(sites) == 0 {
		return "", nil, "", fmt.Errorf("--vhosts: %s holds no site folder", root)
	}
	return root, sites, fmt.Sprintf("virtual hosts %s in %s", strings.Join(sites, ", "), root), nil
}

// writeDefaultSite writes the page the sample clusters answer for any other
// Host — the address `shoal up` prints, typed into a browser as it is —
// naming the sites and how to reach each: without it that address
// answered 404.
func writeDefaultSite(dir string, sites []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("<!doctype html>\n<meta charset=utf-8>\n<title>shoal: virtual hosts</title>\n")
	b.WriteString("<h1>This shoal cluster serves several sites</h1>\n")
	b.WriteString("<p>The front picks the site by the Host the browser sends; this page answers any other name.</p>\n<ul>\n")
	for _, s := range sites {
		fmt.Fprintf(&b, "<li><a class=site href=\"http://%s/\" data-host=\"%s\">%s</a> (curl -H 'Host: %s' this address)</li>\n", s, s, s, s)
	}
	b.WriteString("</ul>\n<script>\n// Same port as this page: the sites are served where it is.\n")
	b.WriteString("for (const a of document.querySelectorAll('a.site')) a.href = location.protocol + '//' + a.dataset.host + (location.port ? ':' + location.port : '') + '/';\n")
	b.WriteString("</script>\n")
	return os.WriteFile(filepath.Join(dir, "index.html"), []byte(b.String()), 0o644)
}

// SiteURLs returns an address per virtual host of c (none without
// --vhosts): the front's own address with the site's name for host, which
// browsers and curl resolve to loopback for names under .localhost (RFC
// 6761 §6.3); other names need a Host header or a hosts entry.
func (c *Cluster) SiteURLs() []string {
	var out []string
	port := ""
	if i := strings.LastIndexByte(strings.TrimSuffix(c.URL, "/"), ':'); i > 0 {
		port = strings.TrimSuffix(c.URL, "/")[i:]
	}
	scheme, _, _ := strings.Cut(c.URL, "://")
	for _, s := range c.sites {
		out = append(out, scheme+"://"+s+port+"/")
	}
	return out
}

// prepareRoot returns the root the nodes serve and, with cfg.VHosts, the
// site map the front keys by (nil otherwise).
func prepareRoot(cfg *Config) (root, info string, vm *vhost.Map, err error) {
	if !cfg.VHosts {
		root, info, err = prepareSite(cfg)
		return root, info, nil, err
	}
	root, sites, info, err := prepareVHosts(cfg)
	if err != nil {
		return "", "", nil, err
	}
	if vm, err = vhost.New(vhost.Config{Sites: sites}); err != nil {
		return "", "", nil, err
	}
	return root, info, vm, nil
}

// siteNames is vm's sites but the default one; nil for nil.
func siteNames(vm *vhost.Map) []string {
	if vm == nil {
		return nil
	}
	var out []string
	for _, s := range vm.Sites() {
		if s != vhost.Default {
			out = append(out, s)
		}
	}
	return out
}
