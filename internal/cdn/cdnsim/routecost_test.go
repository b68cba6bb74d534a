package cdnsim

import (
	"testing"

	"shoal/internal/cdn/chord"
)

// TestRouteCost checks a live miss's time, by hand, on two PoPs a and b
// 10 ms apart, a client 4 ms from a and the origin 30 ms from both. With
// two PoPs a key is homed at b when it lies in (a, b], else at a. A key
// of b's: a's lookup ends at a (its successor is b: no message), the
// directory query to b is 10, the shield fetch from b is a handshake
// and a request, 10 + 10, and b's origin fetch 30 + 30: 4+10+20+60 = 94.
// A key of a's: the lookup asks b, 10, and a fetches from the origin,
// 30 + 30: 4+10+60 = 74. Again at once: a hit, 4. Without RouteCost the
// misses cost their fetch alone: 4+10+30 = 44 and 4+30 = 34.
func TestRouteCost(t *testing.T) {
	m, err := NewMatrix([]string{"a", "b", "client", "origin"}, [][]float64{
		{0, 10, 4, 30}, {10, 0, 14, 30}, {4, 14, 0, 34}, {30, 30, 34, 0}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := chord.Hash("a"), chord.Hash("b")
	ofB := func(u string) bool { // u's key in (a, b] on the circle
		k := chord.Hash(u)
		if a < b {
			return a < k && k <= b
		}
		return k > a || k <= b
	}
	var urlB, urlA string
	for i := 0; urlA == "" || urlB == ""; i++ {
		u := "/f" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if ofB(u) && urlB == "" {
			urlB = u
		} else if !ofB(u) && urlA == "" {
			urlA = u
		}
	}
	for _, c := range []struct {
		cost bool
		want []float64
	}{{true, []float64{94, 4, 74}}, {false, []float64{44, 4, 34}}} {
		w := &Workload{Clients: 1, Requests: []Request{{At: 0, Client: 2, URL: urlB, Size: 100},
			{At: 1e9, Client: 2, URL: urlB, Size: 100}, {At: 2e9, Client: 2, URL: urlA, Size: 100}}}
		cfg := DefaultConfig()
		cfg.PoPLocs, cfg.Origin, cfg.KillAt, cfg.RouteCost = []int{0, 1}, "origin", 0, c.cost
		var got []float64
		cfg.OnRequest = func(_ int, o Outcome) { got = append(got, o.ClientMs) }
		r, err := Run(cfg, m, w)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.want {
			if i >= len(got) || got[i] != c.want[i] {
				t.Fatalf("route cost %v: requests took %v ms, want %v", c.cost, got, c.want)
			}
		}
		if r.PeerBytes != 100 || r.Ingress["client"] != "a" {
			t.Fatalf("route cost %v: peer bytes %d (want the shield's 100), client's PoP %q", c.cost, r.PeerBytes, r.Ingress["client"])
		}
	}
}
