package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"shoal/internal/base/content"
	"shoal/internal/base/vhost"
)

// vsite is one site a node serves: its content and its rules. A node
// without VHosts has one site with an empty name, whose cache keys are the
// bare URLs as before.
type vsite struct {
	name  string // "" for a single-site node; the site's host name otherwise
	store *content.Store
	rules *siteRules

	vmu  sync.Mutex // builds vidx
	vidx atomic.Pointer[variantIndex]
}

// openSites opens the node's sites. With VHosts every folder of Root not
// starting with "." is a site named after it (ROOT/example.com/...), with
// its own rules file; ROOT/_default answers hosts that are no site. Without
// it, Root itself is the one site.
func openSites(cfg *Config) (sites map[string]*vsite, single *vsite, vm *vhost.Map, err error) {
	if !cfg.VHosts {
		st, err := content.Open(cfg.Root)
		if err != nil {
			return nil, nil, nil, err
		}
		rules, err := siteRulesFor(cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		one := &vsite{store: st, rules: rules}
		return nil, one, nil, nil
	}
	ents, err := os.ReadDir(cfg.Root)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("vhosts root: %w", err)
	}
	sites = map[string]*vsite{}
	var names []string
	for _, de := range ents {
		name := de.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		full := filepath.Join(cfg.Root, name)
		if fi, err := os.Stat(full); err != nil || !fi.IsDir() {
			continue
		}
		st, err := content.Open(full)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("site %s: %w", name, err)
		}
		sc := *cfg
		sc.Root, sc.Site = full, nil
		rules, err := siteRulesFor(&sc)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("site %s: %w", name, err)
		}
		sites[name] = &vsite{name: name, store: st, rules: rules}
		if name != vhost.Default {
			names = append(names, name)
		}
	}
	if len(sites) == 0 {
		return nil, nil, nil, fmt.Errorf("vhosts root %s holds no site folder (ROOT/example.com/, ROOT/_default/)", cfg.Root)
	}
	vm, err = vhost.New(vhost.Config{Sites: names, Aliases: cfg.Aliases})
	if err != nil {
		return nil, nil, nil, err
	}
	return sites, nil, vm, nil
}

// pickSite sets c.site for the current request: the authority of an
// absolute-form target wins over Host (RFC 9112 §3.2.2). It reports false
// when the host maps to no site folder (no ROOT/_default).
func (c *conn) pickSite() bool {
	if c.s.vmap == nil {
		c.site = c.s.single
		return true
	}
	host := c.req.Host
	if a := vhost.Authority(c.req.Target); a != nil {
		host = a
	}
	var name string
	name, c.hostBuf = c.s.vmap.Site(c.hostBuf, host)
	c.site = c.s.sites[name]
	return c.site != nil
}
