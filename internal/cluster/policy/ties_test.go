package policy

import (
	"fmt"
	"testing"
)

// TestLeastLoadedTiesRotate: a least-loaded choice among equally loaded
// nodes goes round the nodes instead of always to the lowest index. At low
// concurrency (each request done before the next arrives, so every node
// shows Active 0) the lowest-index rule sent every lc/wlc request, and
// placed every new LARD/LARD-R target, on node 0; live, where a request
// spends most of its life outside the nodes, such ties are the common case
// and skewed shares towards node 0 (docs/parity.md).
func TestLeastLoadedTiesRotate(t *testing.T) {
	tests := []struct {
		policy  string
		weights []int
		active  []int // held constant: the picks are not counted
		want    string
	}{
		{"lc", []int{1, 1, 1, 1}, []int{0, 0, 0, 0}, "abcdabcd"},
		{"wlc", []int{1, 1, 1, 1}, []int{0, 0, 0, 0}, "abcdabcd"},
		{"lard", []int{1, 1, 1, 1}, []int{0, 0, 0, 0}, "abcdabcd"},
		{"lardr", []int{1, 1, 1, 1}, []int{0, 0, 0, 0}, "abcdabcd"},
		// Only the tied minimum rotates: b (1) and d (1) alternate, a and c
		// (2) are never chosen.
		{"lc", []int{1, 1, 1, 1}, []int{2, 1, 2, 1}, "bdbdbd"},
		{"lard", []int{1, 1, 1, 1}, []int{2, 1, 2, 1}, "bdbdbd"},
		// wlc ties by Active/Weight: 2/2 = 1/1 = 1 (a, b), c at 3/1.
		{"wlc", []int{2, 1, 1}, []int{2, 1, 3}, "ababab"},
		// Down nodes are skipped by the rotation.
		{"lc", []int{1, 0, 1, 1}, []int{0, 0, 0, 0}, "acdacd"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v %v", tt.policy, tt.weights, tt.active), func(t *testing.T) {
			c := newCluster(tt.weights...)
			setActive(c, tt.active...)
			p := mustNew(t, tt.policy, Config{})
			got := ""
			for i := range len(tt.want) {
				// A new URL each time: LARD places it on the least loaded.
				d := p.Pick(c, &Request{URL: fmt.Sprintf("/u%d", i), Size: -1, Holder: -1})
				if d.Node < 0 {
					got += "-"
					continue
				}
				got += c.Nodes[d.Node].Name
				p.Done(c, d.Node, &Request{URL: fmt.Sprintf("/u%d", i), Status: 200})
			}
			if got != tt.want {
				t.Errorf("%s = %q, want %q", tt.policy, got, tt.want)
			}
		})
	}
}
