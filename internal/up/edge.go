package up

import (
	"fmt"
	"net"

	"shoal/internal/admin"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/node"
	"shoal/internal/gateway"
)

// startEdge starts a cluster whose nodes run in cache mode (Config.Edge):
// an HTTP cache tier in front of an upstream rather than a site. The front
// keys its content-aware policies by host, path and query, so the copies
// of one response live on few nodes, as a site's files do; there is no
// site, so no publisher.
func startEdge(cfg Config) (*Cluster, error) {
	c := &Cluster{Config: cfg, SiteInfo: "an HTTP cache in front of its origin", errc: make(chan error, cfg.Nodes+2)}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for i := range cfg.Nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		n, err := node.New(node.Config{CacheBytes: int64(cfg.CacheMB) << 20, CachePolicy: cfg.Cache,
			SharedProcess: true, Logger: cfg.Logger.With("node", i), TrustedFronts: loopbackFronts, Edge: cfg.Edge(i)})
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		c.nodes = append(c.nodes, n)
		c.NodeURLs = append(c.NodeURLs, "http://"+ln.Addr().String())
		go c.watch(func() error { return n.Serve(ln) })
	}
	urls, text := cfg.cacheFrontURLs()
	gc := gateway.Config{Path: redirectPath(cfg.Redirect), CacheKeys: true, Control: control.Options{MaxSizes: urls, MaxSizeBytes: text}}
	if err := c.startGateway(gc, true); err != nil {
		return nil, err
	}
	if err := c.serve(); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// Nodes returns the cluster's nodes (in-process clusters only): the CDN
// tier reaches its cache-mode nodes' stores through them.
func (c *Cluster) Nodes() []*node.Server { return c.nodes }

// Admin returns the admin API's handler, nil when it is off: `shoal pop`
// adds its CDN figures to the dashboard through it.
func (c *Cluster) Admin() *admin.Server {
	if c.gw == nil {
		return nil
	}
	return c.gw.Admin
}
