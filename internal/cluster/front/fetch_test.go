package front

import (
	"io"
	"net/http"
	"testing"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/policy"
	"shoal/internal/testutil"
)

// fetchPolicy serves everything on node 0 and, for "/f", names node 1 as
// the memory to fetch from (weblins' small-file decision).
type fetchPolicy struct{}

func (fetchPolicy) Name() string { return "testfetch" }
func (fetchPolicy) Pick(c *policy.Cluster, r *policy.Request) policy.Decision {
	if r.URL == "/f" {
		return policy.Decision{Node: 0, Fetch: 1}
	}
	return policy.Decision{Node: 0, Fetch: -1}
}
func (fetchPolicy) Done(*policy.Cluster, int, *policy.Request) {}

// TestRelayFetchHeader: on relay the decision's fetch node reaches the node
// as "Shoal-Fetch: 1"; a Shoal-Fetch the client sent never does (nodes
// believe the header from their trusted fronts, so the front must not pass
// a client's on).
func TestRelayFetchHeader(t *testing.T) {
	b0, b1 := namedBackend(t, "n0"), namedBackend(t, "n1")
	cl, err := control.New(fetchPolicy{}, []control.NodeSpec{{URL: b0.URL}, {URL: b1.URL}}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	addr := testutil.Serve(t, s)
	for _, tc := range []struct {
		path, client string
		want         []string
	}{
		{"/f", "", []string{"1"}},
		{"/f", "0", []string{"1"}},
		{"/g", "", nil},
		{"/g", "1", nil},
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+tc.path, nil)
		if tc.client != "" {
			req.Header.Set("Shoal-Fetch", tc.client)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := resp.Header.Values("X-Seen-Shoal-Fetch"); len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("%s with client header %q: node saw %q, want %q", tc.path, tc.client, got, tc.want)
		}
	}
}
