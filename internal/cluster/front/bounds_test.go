package front

import (
	"strconv"
	"testing"
	"time"

	"shoal/internal/cluster/policy"
)

// policyURLs is the number of URLs in the cluster policy's per-URL table.
func policyURLs(t *testing.T, s interface {
	WithPolicy(func(policy.Policy, *policy.Cluster))
}) int {
	t.Helper()
	n, ok := -1, false
	s.WithPolicy(func(p policy.Policy, _ *policy.Cluster) { n, ok = policy.TableURLs(p) })
	if !ok {
		t.Fatal("policy has no URL table snapshot")
	}
	return n
}

// settledPolicyURLs is policyURLs once it equals want, or its last value
// after 10 s: the front releases a request's ticket, which is when a
// policy drops a 404's URL, only after the client has the response, so a
// count read right after the last response may still include that URL.
func settledPolicyURLs(t *testing.T, s interface {
	WithPolicy(func(policy.Policy, *policy.Cluster))
}, want int) int {
	t.Helper()
	n := policyURLs(t, s)
	for deadline := time.Now().Add(10 * time.Second); n != want && time.Now().Before(deadline); n = policyURLs(t, s) {
		time.Sleep(5 * time.Millisecond)
	}
	return n
}

// TestRelayScanLeavesTablesEmpty checks the table bounds through a live relay
// cluster of real nodes: a scanner's unique URLs all get 404, and the
// content-aware policies' tables keep none of them, only the files that
// were served.
func TestRelayScanLeavesTablesEmpty(t *testing.T) {
	const scan = 2000
	for _, pol := range []string{"lard", "lardr", "tbccrd", "weblins"} {
		t.Run(pol, func(t *testing.T) {
			addr, _, cl, _, urls, _ := passfdCluster(t, pol, 2, Config{Path: Relay()})
			c := dialFront(t, addr)
			for i := range scan {
				if resp, _ := c.do(get("/scan/" + strconv.Itoa(i))); resp.StatusCode != 404 {
					t.Fatalf("scan %d: status %d, want 404", i, resp.StatusCode)
				}
			}
			if n := settledPolicyURLs(t, cl, 0); n != 0 {
				t.Errorf("%s: %d URLs in the table after %d 404s, want 0", pol, n, scan)
			}
			for _, u := range urls[:3] {
				if resp, _ := c.do(get(u)); resp.StatusCode != 200 {
					t.Fatalf("%s: status %d", u, resp.StatusCode)
				}
			}
			if n := settledPolicyURLs(t, cl, 3); n != 3 {
				t.Errorf("%s: %d URLs in the table after 3 served files, want 3", pol, n)
			}
		})
	}
}
