package control

import (
	"testing"

	"shoal/internal/cluster/policy"
)

// BenchmarkBookkeeping is what the dispatch core's cluster bookkeeping
// costs the front per request, policy decision included, behind the
// reloadable switch as `shoal front` runs it, on two nodes:
//   - pick+done: Pick (the size table filled in, the policy, the node's
//     in-flight count) and Done (a relayed 200's size learnt);
//   - hold+release: a handed-off connection counted against its node until
//     its end notice (held.go), under load-aware policies only;
//   - closeconn: the notice that a client connection ended.
//
// docs/benchmarks.md ("Per-request budget") adds these to the budget.
func BenchmarkBookkeeping(b *testing.B) {
	for _, name := range []string{"wrr", "lc", "lard"} {
		p, err := policy.New(name, policy.Config{})
		if err != nil {
			b.Fatal(err)
		}
		c, err := New(policy.NewSwitch(p), []NodeSpec{{URL: "http://127.0.0.1:9001"}, {URL: "http://127.0.0.1:9002"}}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		c.LearnSizes(map[string]int64{"/1k": 1024})
		b.Run(name+"/pick+done", func(b *testing.B) {
			// The request lives outside the loop as the front's lives in its
			// connection (passed to the policy, a local would escape).
			var r policy.Request
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r = policy.Request{URL: "/1k", Size: -1, Conn: uint64(i%64 + 1), Holder: -1}
				d, be := c.Pick(&r)
				if d.Node < 0 {
					b.Fatal("no node")
				}
				r.Status, r.Size = 200, 1024
				c.Done(be, &r)
			}
		})
		b.Run(name+"/hold+release", func(b *testing.B) {
			be := c.Backends()[0]
			b.ReportAllocs()
			for i := uint64(1); b.Loop(); i++ {
				c.Hold(be, i)
				c.Release(i)
			}
		})
		b.Run(name+"/closeconn", func(b *testing.B) {
			b.ReportAllocs()
			for i := uint64(1); b.Loop(); i++ {
				c.CloseConn(i)
			}
		})
	}
}
