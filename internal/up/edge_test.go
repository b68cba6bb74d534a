package up

import (
	"testing"

	"shoal/internal/cluster/node"
)

// A cache tier's front remembers as many URLs as its nodes' memory tiers
// hold one-page objects (4096 + 256 bytes each), and 128 bytes of URL
// text each; a site's front keeps the policy's defaults.
func TestCacheFrontURLs(t *testing.T) {
	edge := func(int) node.EdgeConfig { return node.EdgeConfig{} }
	cases := []struct {
		mb, nodes int
		edge      func(int) node.EdgeConfig
		urls      int
	}{
		{64, 1, edge, 15420}, // 67108864 / 4352
		{64, 2, edge, 30840},
		{1, 1, edge, 4096}, // the floor
		{64, 1, nil, 0},    // a site: the policy's default
	}
	for _, c := range cases {
		cfg := Config{CacheMB: c.mb, Nodes: c.nodes, Edge: c.edge}
		pc := cfg.policyConfig()
		if pc.MaxURLs != c.urls || pc.MaxURLBytes != int64(c.urls)*128 {
			t.Errorf("%d MiB × %d nodes, edge %v: MaxURLs %d, text %d; want %d", c.mb, c.nodes, c.edge != nil, pc.MaxURLs, pc.MaxURLBytes, c.urls)
		}
	}
}
