package sim

import (
	"testing"

	"shoal/internal/cluster/policy"
)

// TestThroughputWindow: throughput mode keeps LARD's admission bound
// S = (n−1)·T_high + T_low − 1 requests in the cluster by default (Pai et
// al. 1998: the front holds back requests beyond it), with the run's
// thresholds; PerNode overrides it with PerNode × n.
func TestThroughputWindow(t *testing.T) {
	cases := []struct {
		nodes, perNode int
		pc             policy.Config
		want           int
	}{
		{1, 0, policy.Config{}, 24},   // 0·65 + 25 − 1
		{4, 0, policy.Config{}, 219},  // 3·65 + 24
		{8, 0, policy.Config{}, 479},  // 7·65 + 24
		{16, 0, policy.Config{}, 999}, // 15·65 + 24
		{4, 0, policy.Config{TLow: 10, THigh: 20}, 69},
		{4, 16, policy.Config{}, 64},
		{1, 1, policy.Config{}, 1},
	}
	for _, c := range cases {
		// 2000 requests: more than any window, so the window is full at once.
		res, err := Run(Config{Policy: "wrr", Nodes: c.nodes, PerNode: c.perNode, PolicyConfig: c.pc},
			NewSliceSource(repeat("/a", 8<<10, 2000)))
		if err != nil {
			t.Fatal(err)
		}
		if res.Window != c.want {
			t.Errorf("%d nodes, per node %d, T_low %d, T_high %d: window %d, want %d",
				c.nodes, c.perNode, c.pc.TLow, c.pc.THigh, res.Window, c.want)
		}
	}
}
