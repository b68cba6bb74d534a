package sim

import (
	"fmt"
	"slices"
	"testing"

	"shoal/internal/cluster/policy"
)

// TestNodeNamesReachThePolicy: the simulator names its nodes as the live
// cluster does when told (Config.NodeNames), so chbl, whose ring hashes node
// names, places every URL where the live front with those node URLs places
// it. With the default names n0…n3 the ring differs (docs/parity.md: the
// same trace's chbl shares moved by up to 8 points between runs with other
// ports).
func TestNodeNamesReachThePolicy(t *testing.T) {
	live := []string{"http://127.0.0.1:40001", "http://127.0.0.1:40117", "http://127.0.0.1:41230", "http://127.0.0.1:45555"}
	view := &policy.Cluster{}
	for _, n := range live {
		view.Nodes = append(view.Nodes, policy.Node{Name: n, Weight: 1, Up: true})
	}
	ring, err := policy.New("chbl", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range 40 {
		u := fmt.Sprintf("/f%d.html", i)
		want := ring.Pick(view, &policy.Request{URL: u, Size: 100, Holder: -1}).Node
		got := simNode(t, Config{Policy: "chbl", Nodes: 4, NodeNames: live, PerNode: 1}, u)
		if got != want {
			t.Errorf("%s: simulated on node %d, the live ring says %d", u, got, want)
		}
		if simNode(t, Config{Policy: "chbl", Nodes: 4, PerNode: 1}, u) != want {
			moved++
		}
	}
	if moved == 0 {
		t.Error("default names place all 40 URLs as the live names do: the test shows nothing")
	}

	// The names the policy sees, given and default.
	for _, tt := range []struct {
		names, want []string
	}{
		{live, live},
		{nil, []string{"n0", "n1", "n2", "n3"}},
	} {
		var reg policy.Registry
		var seen []string
		if err := reg.Add("names", func(policy.Config) policy.Policy {
			return &nameRecorder{seen: &seen}
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := Run(Config{Policy: "names", Registry: &reg, Nodes: 4, NodeNames: tt.names, PerNode: 1},
			NewSliceSource(repeat("/a", 100, 1))); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seen, tt.want) {
			t.Errorf("names %v: the policy saw %v, want %v", tt.names, seen, tt.want)
		}
	}

	for _, bad := range [][]string{live[:3], {"a", "b", "a", "c"}, {"a", "", "b", "c"}} {
		if _, err := Run(Config{Policy: "chbl", Nodes: 4, NodeNames: bad}, NewSliceSource(nil)); err == nil {
			t.Errorf("names %q for 4 nodes: no error", bad)
		}
	}
}

// simNode runs cfg over one request for url and returns the node that served it.
func simNode(t *testing.T, cfg Config, url string) int {
	t.Helper()
	res, err := Run(cfg, NewSliceSource(repeat(url, 100, 1)))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range res.NodeRequests {
		if n == 1 {
			return i
		}
	}
	t.Fatalf("%s: served nowhere: %v", url, res.NodeRequests)
	return -1
}

// nameRecorder is a policy that records the node names of its first pick
// and sends everything to node 0.
type nameRecorder struct{ seen *[]string }

func (p *nameRecorder) Name() string { return "names" }

func (p *nameRecorder) Pick(c *policy.Cluster, _ *policy.Request) policy.Decision {
	if *p.seen == nil {
		for _, n := range c.Nodes {
			*p.seen = append(*p.seen, n.Name)
		}
	}
	return policy.Decision{Node: 0, Fetch: -1}
}

func (p *nameRecorder) Done(*policy.Cluster, int, *policy.Request) {}
