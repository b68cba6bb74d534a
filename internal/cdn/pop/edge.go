package pop

import (
	"fmt"
	"path/filepath"

	"shoal/internal/cluster/node"
)

// edgeNodes is the PoP's nodes' cache-mode configuration (Config.Origins):
// every node an HTTP cache in front of the origins, storing under
// EdgeData/node-N. The gateway routes by cache key to them with the
// cluster tier's content-aware policies, so a response's copies live on
// few of the PoP's nodes (seed 003 §3.1: the storage is the PoP's devices).
func (p *PoP) edgeNodes() (func(i int) node.EdgeConfig, error) {
	origin, err := node.ParseOrigins(p.cfg.Origins)
	if err != nil {
		return nil, err
	}
	return func(i int) node.EdgeConfig {
		ec := node.EdgeConfig{Upstream: origin}
		if p.cfg.EdgeData != "" {
			ec.DataDir = filepath.Join(p.cfg.EdgeData, fmt.Sprintf("node-%d", i))
		}
		return ec
	}, nil
}
