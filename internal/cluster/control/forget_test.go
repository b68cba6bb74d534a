package control

import (
	"testing"

	"shoal/internal/cluster/policy"
)

// urls is the number of URLs in the policy's per-URL table.
func urls(t *testing.T, c *Cluster) int {
	t.Helper()
	n, ok := -1, false
	c.WithPolicy(func(p policy.Policy, _ *policy.Cluster) { n, ok = policy.TableURLs(p) })
	if !ok {
		t.Fatal("policy has no URL table snapshot")
	}
	return n
}

// TestForget: after a publish changed /a and removed /b, the policies'
// tables no longer hold them, and /c stays; through a policy.Switch too.
func TestForget(t *testing.T) {
	for _, name := range []string{"lard", "lardr", "tbccrd", "weblins"} {
		for _, wrap := range []bool{false, true} {
			p, err := policy.New(name, policy.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if wrap {
				p = policy.NewSwitch(p)
			}
			c, err := New(p, []NodeSpec{{URL: "http://127.0.0.1:9001"}, {URL: "http://127.0.0.1:9002"}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range []string{"/a", "/b", "/c"} {
				r := &policy.Request{URL: u, Size: 1000, Conn: 1, Holder: -1}
				_, b := c.Pick(r)
				r.Status = 200
				c.Done(b, r)
			}
			if n := urls(t, c); n != 3 {
				t.Fatalf("%s (switch %v): %d URLs before, want 3", name, wrap, n)
			}
			c.Forget([]string{"/a", "/b", "/not-there"})
			if n := urls(t, c); n != 1 {
				t.Errorf("%s (switch %v): %d URLs after Forget, want 1", name, wrap, n)
			}
		}
	}
}
