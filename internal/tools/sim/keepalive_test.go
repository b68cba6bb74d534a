package sim

import (
	"fmt"
	"testing"

	"shoal/internal/cluster/policy"
)

// hashedTo returns a URL urlhash sends to node i of 2.
func hashedTo(t *testing.T, i int) string {
	t.Helper()
	p, err := policy.New("urlhash", policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := &policy.Cluster{Nodes: []policy.Node{{Name: "n0", Weight: 1, Up: true}, {Name: "n1", Weight: 1, Up: true}}}
	for k := range 100 {
		u := fmt.Sprintf("/u%d", k)
		if p.Pick(c, &policy.Request{URL: u, Size: -1, Holder: -1}).Node == i {
			return u
		}
	}
	t.Fatalf("no URL hashes to node %d", i)
	return ""
}

// TestKeepAliveMoves counts moves by hand: urlhash on an l7 front, 2 nodes,
// 4 requests per connection. conn 1: u0 u1 u1 u0 (2 moves), conn 2: u1 u1
// u0 u0 (1), conn 3: u0 u0 (0): 3 moves in 10 requests. Without keep-alive
// no request has a holder, so none moves.
func TestKeepAliveMoves(t *testing.T) {
	u0, u1 := hashedTo(t, 0), hashedTo(t, 1)
	var acc []Access
	for _, u := range []string{u0, u1, u1, u0, u1, u1, u0, u0, u0, u0} {
		acc = append(acc, Access{URL: u, Size: 1000})
	}
	for _, tc := range []struct {
		k     int
		moves int64
	}{{4, 3}, {1, 0}, {0, 0}, {10, 4}} {
		res, err := Run(Config{Policy: "urlhash", Nodes: 2, PerNode: 1, Path: PathL7, ConnRequests: tc.k}, NewSliceSource(acc))
		if err != nil {
			t.Fatal(err)
		}
		if res.Moves != tc.moves || res.Requests != 10 || res.MovesPerRequest != float64(tc.moves)/10 {
			t.Errorf("k=%d: moves %d (%.2f per request) of %d requests, want %d", tc.k, res.Moves, res.MovesPerRequest,
				res.Requests, tc.moves)
		}
	}
}

// TestKeepAliveTBCCRD: tbccrd's connection table sees each keep-alive
// connection once, and every connection is closed at the end (its table is
// empty), whatever the window.
func TestKeepAliveTBCCRD(t *testing.T) {
	var acc []Access
	for i := range 997 {
		acc = append(acc, Access{URL: fmt.Sprintf("/f%d", (i*7)%31), Size: 2000})
	}
	for _, path := range []Path{PathL7, PathTag} {
		cfg := Config{Policy: "tbccrd", Nodes: 3, PerNode: 4, Path: path, ConnRequests: 10, CacheBytes: 40000}
		s, err := newSim(cfg, NewSliceSource(acc))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.run(); err != nil {
			t.Fatal(err)
		}
		res := s.result()
		tb := s.pol.(*policy.TBCCRD).Tables(0).(policy.TBCCRDTables)
		t.Logf("%s: %.3f moves per request, handoffs %.3f, hit ratio %.3f", path, res.MovesPerRequest, res.HandoffsPerRequest, res.HitRatio)
		if res.Requests != 997 || res.Moves == 0 || res.Moves > res.Requests || tb.Conns != 0 || len(s.conns) != 0 {
			t.Errorf("%s: %d requests, %d moves, %d connections left in the table, %d in the simulator", path, res.Requests,
				res.Moves, tb.Conns, len(s.conns))
		}
	}
}
