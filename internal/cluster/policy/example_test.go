package policy_test

import (
	"fmt"

	"shoal/internal/cluster/policy"
)

// A caller's loop: build the policy once, then per request Pick, Start on
// dispatch, and Done plus Finish on completion (Done with the size learned
// from the response).
func Example() {
	c := &policy.Cluster{Version: 1, Nodes: []policy.Node{
		{Name: "a", Weight: 4, Up: true},
		{Name: "b", Weight: 3, Up: true},
		{Name: "c", Weight: 2, Up: true},
	}}
	p, err := policy.New("wrr", policy.Config{})
	if err != nil {
		panic(err)
	}
	for range 9 {
		r := &policy.Request{URL: "/index.html", Size: -1, Holder: -1}
		d := p.Pick(c, r)
		if d.Node < 0 {
			fmt.Println("503")
			continue
		}
		c.Start(d.Node)
		fmt.Print(c.Nodes[d.Node].Name, " ")
		r.Size = 1024
		p.Done(c, d.Node, r)
		c.Finish(d.Node)
	}
	fmt.Println()
	// Output: a a b a b c a b c
}
