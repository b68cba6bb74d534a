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
