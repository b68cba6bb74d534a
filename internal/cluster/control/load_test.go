package control

import (
	"math"
	"slices"
	"testing"
	"time"

	"shoal/internal/cluster/policy"
)

// TestNodeLoadFromStatus: the load a policy reads (Node.Load, dfwrr's
// input, target 0.95) is a utilisation in [0,1] by construction. A node with
// its own process reports CPU over all its cores; nodes sharing one process
// (`shoal up`) report the process's CPU, which says nothing of one node, so
// their load is their own busy time instead (every node of `shoal
// up` showed the same 1.061).
func TestNodeLoadFromStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Status
		want float64
	}{
		{"own process, one core of two", Status{CPUPercent: 106, CPUs: 2}, 0.53},
		{"own process, above all cores (sampling jitter)", Status{CPUPercent: 212, CPUs: 2}, 1},
		{"own process, one core", Status{CPUPercent: 40, CPUs: 1}, 0.4},
		{"a node that does not report its cores", Status{CPUPercent: 106}, 1},
		{"shared process: busy time, not the process CPU", Status{CPUPercent: 106, BusyPercent: 40, CPUs: 2, SharedProcess: true}, 0.2},
		{"shared process, idle", Status{CPUPercent: 180, CPUs: 2, SharedProcess: true}, 0},
		{"negative", Status{CPUPercent: -5, CPUs: 1}, 0},
		{"NaN", Status{CPUPercent: math.NaN(), CPUs: 1}, 0},
	} {
		c, _ := newTest(t, "http://127.0.0.1:1")
		s := tc.s
		c.SetStatus(0, &s)
		if got := c.Nodes()[0].Load; math.IsNaN(got) || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: load %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEffectiveWeightsVisible: dfwrr's feedback-adjusted weights show in
// Nodes (the admin API's /nodes and /metrics read it), next to the
// configured weight.
func TestEffectiveWeightsVisible(t *testing.T) {
	pol, err := policy.New("dfwrr", policy.Config{Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Duration(0)
	c, err := New(pol, []NodeSpec{{URL: "http://127.0.0.1:1", Weight: 10}, {URL: "http://127.0.0.1:2", Weight: 10}},
		Options{Clock: func() time.Duration { return now }})
	if err != nil {
		t.Fatal(err)
	}
	c.SetStatus(0, &Status{CPUPercent: 100, CPUs: 1}) // load 1: above target, loses weight
	c.SetStatus(1, &Status{CPUPercent: 0, CPUs: 1})   // load 0: gains
	for i := range 3 {
		now = time.Duration(i+1) * 1100 * time.Millisecond
		r := policy.Request{URL: "/", Size: -1}
		if _, b := c.Pick(&r); b != nil {
			c.Done(b, &r)
		}
	}
	want := pol.(*policy.DFWRR).Weights()
	var got, conf []int
	for _, n := range c.Nodes() {
		got = append(got, n.EffectiveWeight)
		conf = append(conf, n.Weight)
	}
	if !slices.Equal(got, want) || slices.Equal(got, conf) {
		t.Errorf("effective weights %v, want dfwrr's %v (configured %v)", got, want, conf)
	}
}
