package up

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"shoal/internal/cluster/node"
	"shoal/internal/tools/site"
)

// OriginMaxAge is how long the demo origin lets caches keep its files
// (Cache-Control: max-age): long enough that a file fetched once is a hit
// for the rest of a demo, short enough that a changed site shows within
// minutes.
const OriginMaxAge = "public, max-age=300"

// Origin is one node serving the generated sample site, the origin of
// `shoal up --pops N` when no --origin is given, so that the one-command
// demo serves CDN content through every PoP. Its site says how long its
// files may be cached (.shoal.toml, OriginMaxAge).
type Origin struct {
	// URL is where the PoPs fetch from.
	URL string
	// Root is the site's folder.
	Root string
	n    *node.Server
	ln   net.Listener
	errc chan error
}

// StartOrigin generates the sample site in dataDir/origin-site (default
// folder as Config.DataDir) and serves it on addr ("127.0.0.1:0": a free
// loopback port).
func StartOrigin(dataDir, addr string, logger *slog.Logger) (*Origin, error) {
	cfg := Config{DataDir: dataDir, Logger: logger}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	root := filepath.Join(cfg.DataDir, "origin-site")
	if _, err := site.Generate(root, site.Config{}); err != nil {
		return nil, fmt.Errorf("origin site: %w", err)
	}
	rules := "[[headers]]\nmatch = \"/\"\ncache_control = \"" + OriginMaxAge + "\"\n"
	if err := os.WriteFile(filepath.Join(root, node.SiteFile), []byte(rules), 0o644); err != nil {
		return nil, fmt.Errorf("origin site: %w", err)
	}
	n, err := node.New(node.Config{Root: root, CacheBytes: 16 << 20, SharedProcess: true, Logger: cfg.Logger.With("origin", root)})
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	o := &Origin{URL: "http://" + ln.Addr().String(), Root: root, n: n, ln: ln, errc: make(chan error, 1)}
	go func() {
		if err := n.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, node.ErrServerClosed) {
			o.errc <- err
		}
	}()
	return o, nil
}

// Err delivers the error the origin stopped with.
func (o *Origin) Err() <-chan error { return o.errc }

// Shutdown stops the origin, letting requests in flight finish until ctx
// ends.
func (o *Origin) Shutdown(ctx context.Context) error { return o.n.Shutdown(ctx) }
