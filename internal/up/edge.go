package up

import (
	"fmt"
	"net"

	"shoal/internal/admin"
	"shoal/internal/base/sysmon"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
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
	path := redirectPath(cfg.Redirect)
	if path == nil {
		path = front.Local(c.serveLocal)
	}
	urls, text := cfg.cacheFrontURLs()
	gc := gateway.Config{Path: path, CacheKeys: true, Control: control.Options{MaxSizes: urls, MaxSizeBytes: text}}
	if err := c.startGateway(gc, true); err != nil {
		return nil, err
	}
	if err := c.serve(); err != nil {
		return nil, err
	}
	idleSysmon(cfg)
	ok = true
	return c, nil
}

// idleSysmon puts the Go runtime's monitor thread at SCHED_IDLE
// (internal/base/sysmon), as `shoal front` does and `shoal up` does not:
// a cache hit is answered on the gateway's goroutine from memory (the
// local path), and sysmon's wake-ups every 20 µs took about 8 % of a
// PoP's CPU under a load of hits (perf, bench/edge-vs-varnish.sh). A
// node's blocking file I/O (a disk-tier hit, a miss being stored) then
// waits for an idle moment of the core to get its P taken away, which on
// a PoP's own machine comes at once.
func idleSysmon(cfg Config) {
	if tid, err := sysmon.Idle(); err != nil {
		cfg.Logger.Debug("sysmon thread left at normal priority", "err", err)
	} else {
		cfg.Logger.Debug("sysmon thread at SCHED_IDLE", "tid", tid)
	}
}

// serveLocal hands a request the gateway read to the chosen in-process
// node, which answers it on the client's connection when it is a fresh
// hit (node.Server.ServeLocal; front.Local relays the rest).
func (c *Cluster) serveLocal(b *control.Backend, r front.LocalRequest) front.LocalAnswer {
	if b.Index < 0 || b.Index >= len(c.nodes) || c.NodeURLs[b.Index] != b.URL {
		return front.LocalAnswer{}
	}
	a := c.nodes[b.Index].ServeLocal(r.Conn, r.Req, r.Now, r.Close, r.WriteTimeout)
	return front.LocalAnswer{Handled: a.Handled, Status: a.Status, Size: a.Size, Body: a.Body, Sent: a.Sent, Close: !a.Keep, Err: a.Err}
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
