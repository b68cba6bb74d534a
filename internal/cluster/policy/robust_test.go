package policy

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPoliciesUnderChurn drives every policy through random membership,
// weight (including negative), health and load changes, out-of-range
// holders, unknown and huge sizes, NaN loads, time jumps, URL tables smaller
// than the URLs and 404 answers that drop URLs, and checks that
// no policy panics, every decision names a usable node, and a policy answers
// None only when no node is usable.
func TestPoliciesUnderChurn(t *testing.T) {
	steps := 20000
	if testing.Short() {
		steps = 3000
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(len(name))))
			c := newCluster(1, 2, 3)
			p := mustNew(t, name, Config{CacheBytes: 1 << 16, Period: time.Second, K: 2 * time.Second, TLow: 2, THigh: 4, MaxURLs: 16})
			closer, _ := p.(ConnCloser)
			var inflight []int
			now := time.Duration(0)
			for step := range steps {
				switch rng.IntN(40) {
				case 0:
					if len(c.Nodes) < 12 {
						c.Nodes = append(c.Nodes, Node{Name: "n" + itoa(len(c.Nodes)), Weight: rng.IntN(5), Up: true, Group: itoa(rng.IntN(3))})
						c.Version++
					}
				case 1:
					c.Nodes[rng.IntN(len(c.Nodes))].Removed = true
					c.Version++
				case 2, 3:
					i := rng.IntN(len(c.Nodes))
					c.Nodes[i].Up = !c.Nodes[i].Up
					c.Version++
				case 4, 5:
					c.Nodes[rng.IntN(len(c.Nodes))].Weight = rng.IntN(13) - 2
					c.Version++
				case 6:
					c.Nodes[rng.IntN(len(c.Nodes))].Load = []float64{0, 0.5, 2, math.NaN(), math.Inf(1)}[rng.IntN(5)]
				case 7:
					now += time.Duration(rng.IntN(100)) * time.Second
				case 8:
					if closer != nil {
						closer.CloseConn(uint64(rng.IntN(50)))
					}
				}
				for len(inflight) > 0 && rng.IntN(10) < 3 {
					k := rng.IntN(len(inflight))
					c.Finish(inflight[k])
					inflight[k] = inflight[len(inflight)-1]
					inflight = inflight[:len(inflight)-1]
				}
				now += time.Duration(rng.IntN(50)) * time.Millisecond
				size := []int64{-1, 0, 1000, 150 << 10, 1 << 40}[rng.IntN(5)]
				r := &Request{URL: "/x" + itoa(rng.IntN(40)), Size: size, Conn: uint64(rng.IntN(50)),
					Holder: rng.IntN(len(c.Nodes)+6) - 3, Now: now}
				d := p.Pick(c, r)
				anyUsable := false
				for i := range c.Nodes {
					anyUsable = anyUsable || c.Nodes[i].Usable()
				}
				if d.Node < 0 {
					if anyUsable {
						t.Fatalf("step %d: None with usable nodes", step)
					}
					continue
				}
				if d.Node >= len(c.Nodes) || !c.Nodes[d.Node].Usable() {
					t.Fatalf("step %d: chose unusable node %d", step, d.Node)
				}
				if d.Fetch >= len(c.Nodes) || d.Fetch < -1 || (d.Fetch >= 0 && !c.Nodes[d.Fetch].Usable()) {
					t.Fatalf("step %d: fetch from %d", step, d.Fetch)
				}
				c.Start(d.Node)
				inflight = append(inflight, d.Node)
				if rng.IntN(2) == 0 {
					r.Size = int64(rng.IntN(200 << 10))
				}
				r.Status = []int{0, 200, 304, 404, 403}[rng.IntN(5)]
				p.Done(c, d.Node, r)
			}
		})
	}
}
