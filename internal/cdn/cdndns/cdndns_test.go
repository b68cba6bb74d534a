package cdndns

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

var a = netip.MustParseAddr

// testView is four PoPs with a hand-made RTT table: paris and tokyo have
// both families (tokyo v4 only), lima is down, oslo is above capacity.
// Score is mbpp.Score's rule with the defaults (L:K = 1:3, RTTRef 50 ms,
// local bonus 0.1), so the cases below can be checked by hand.
func testView() View {
	rtt := map[[2]string]float64{{"paris", "oslo"}: 30, {"paris", "tokyo"}: 250, {"paris", "lima"}: 200,
		{"tokyo", "oslo"}: 260, {"tokyo", "lima"}: 180, {"lima", "oslo"}: 220}
	cs := []Candidate{
		{Name: "paris", Alive: true, Server: 0.9, V4: a("10.77.0.1"), V6: a("fd00::1")},
		{Name: "tokyo", Alive: true, Server: 0.9, V4: a("10.77.0.2")},
		{Name: "lima", Alive: false, Server: 1, V4: a("10.77.0.3")},
		{Name: "oslo", Alive: true, Server: 0.01, V4: a("10.77.0.4")}, // over capacity
	}
	server := map[string]float64{}
	for _, c := range cs {
		server[c.Name] = c.Server
	}
	return View{PoPs: cs, Self: "paris", Score: func(from, to string) float64 {
		if from == to {
			return (1+3*server[to])/4 + 0.1
		}
		r, ok := rtt[[2]string{from, to}]
		if !ok {
			r = rtt[[2]string{to, from}]
		}
		return (50/(50+r) + 3*server[to]) / 4
	}}
}

func TestChoose(t *testing.T) {
	cov, err := NewCoverage([]Rule{{"192.0.2.0/24", "paris"}, {"192.0.2.128/25", "tokyo"},
		{"198.51.100.0/24", "lima"}, {"203.0.113.0/24", "oslo"}, {"2001:db8::/32", "paris"}, {"100.64.0.0/10", "nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		client string
		v6     bool
		want   string
		why    Reason
	}{
		{"192.0.2.10", false, "paris", ByCoverage},
		{"192.0.2.200", false, "tokyo", ByCoverage},       // longest prefix wins
		{"::ffff:192.0.2.10", false, "paris", ByCoverage}, // v4-mapped
		// lima is down: from lima's place tokyo (180 ms) beats paris
		// (200 ms) at equal server performance, not the answering PoP.
		{"198.51.100.7", false, "tokyo", Fallback},
		{"203.0.113.9", false, "paris", Fallback}, // oslo is full: paris is 30 ms from it
		{"100.64.1.1", false, "paris", Fallback},  // a PoP not in the view: from the answering PoP
		{"8.8.8.8", false, "paris", ByScore},      // no rule: from the answering PoP
		{"2001:db8::5", true, "paris", ByCoverage},
		{"192.0.2.200", true, "paris", Fallback}, // tokyo has no v6 address
	} {
		c, why := Choose(cov, testView(), a(tc.client), tc.v6, 0.05)
		if c.Name != tc.want || why != tc.why {
			t.Errorf("%s v6=%v: %s (%v), want %s (%v)", tc.client, tc.v6, c.Name, why, tc.want, tc.why)
		}
	}
	// Tokyo loaded (server 0.3): its own clients go to paris, whose serv
	// from tokyo's place (50/300 + 3·0.9)/4 = 0.717 beats tokyo's own
	// (1 + 3·0.3)/4 + 0.1 = 0.575: MBPP's load balancing.
	v := testView()
	v.PoPs[1].Server = 0.3
	srv := v.Score
	v.Score = func(from, to string) float64 {
		if to == "tokyo" {
			return map[bool]float64{true: 0.575, false: (50.0/300 + 0.9) / 4}[from == to]
		}
		return srv(from, to)
	}
	if c, why := Choose(cov, v, a("192.0.2.200"), false, 0.05); c.Name != "paris" || why != Balanced {
		t.Errorf("tokyo loaded: %s (%v), want paris (balanced)", c.Name, why)
	}
	// Everyone above capacity: the best live one rather than nothing.
	v = testView()
	for i := range v.PoPs {
		v.PoPs[i].Server = 0.01
	}
	if c, why := Choose(cov, v, a("192.0.2.10"), false, 0.05); c.Name != "paris" || why != Overloaded {
		t.Errorf("all full: %s (%v), want paris (overloaded)", c.Name, why)
	}
	if _, why := Choose(cov, View{Self: "x", Score: v.Score}, a("192.0.2.1"), false, 0.05); why != NoPoP {
		t.Errorf("empty view: reason %v, want NoPoP", why)
	}
}

func TestCoverageScope(t *testing.T) {
	cov, _ := NewCoverage([]Rule{{"10.0.0.0/8", "a"}, {"10.1.0.0/16", "b"}, {"192.0.2.0/24", "c"}})
	for _, tc := range []struct {
		addr string
		bits int
		ok   bool
	}{
		{"192.0.2.7", 24, true},
		{"10.1.2.3", 16, true},
		{"10.2.2.3", 0, false}, // the /8 holds the /16: not all of it answers alike
		{"8.8.8.8", 0, false},
	} {
		if bits, ok := cov.Scope(a(tc.addr)); bits != tc.bits || ok != tc.ok {
			t.Errorf("Scope(%s) = %d %v, want %d %v", tc.addr, bits, ok, tc.bits, tc.ok)
		}
	}
}

func TestLoadCoverage(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "c.csv")
	os.WriteFile(csv, []byte("# prefix,pop\n10.0.0.0/8, a\n10.1.0.0/16,b # more specific\n\n"), 0o600)
	js := filepath.Join(dir, "c.json")
	os.WriteFile(js, []byte(`[{"prefix":"10.0.0.0/8","pop":"a"},{"prefix":"10.1.0.0/16","pop":"b"}]`), 0o600)
	for _, p := range []string{csv, js} {
		c, err := LoadCoverage(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := c.Lookup(a("10.1.2.3")); got != "b" || c.Len() != 2 {
			t.Errorf("%s: 10.1.2.3 → %q (%d rules)", p, got, c.Len())
		}
		if got, _ := c.Lookup(a("10.2.2.3")); got != "a" {
			t.Errorf("%s: 10.2.2.3 → %q", p, got)
		}
	}
	bad := filepath.Join(dir, "bad.csv")
	for _, body := range []string{"10.0.0.0/33,a\n", "10.0.0.0/8\n", "10.0.0.0/8,\n"} {
		os.WriteFile(bad, []byte(body), 0o600)
		if _, err := LoadCoverage(bad); err == nil {
			t.Errorf("%q accepted", body)
		}
	}
}
