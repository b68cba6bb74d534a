package cdnsim

import (
	"bytes"
	"compress/gzip"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"shoal/internal/base/trace"
)

func TestReadMatrix(t *testing.T) {
	for _, tc := range []struct {
		name, csv, cols string
		want            map[[2]string]float64
		err             string
	}{
		{name: "upper triangle, no header", csv: "a,b,10\na,c,30\nb,c,14\n",
			want: map[[2]string]float64{{"a", "b"}: 10, {"b", "a"}: 10, {"c", "a"}: 30, {"c", "b"}: 14, {"a", "a"}: 0}},
		{name: "header, named columns, both directions averaged", cols: "from,to,ms",
			csv:  "ms,junk,to,from\n10,x,b,a\n20,x,a,b\n5,x,c,b\n7,x,c,a\n",
			want: map[[2]string]float64{{"a", "b"}: 15, {"b", "c"}: 5, {"a", "c"}: 7}},
		{name: "numbered columns", cols: "2,3,1", csv: "10,a,b\n20,b,c\n25,a,c\n",
			want: map[[2]string]float64{{"a", "b"}: 10, {"c", "b"}: 20, {"a", "c"}: 25}},
		{name: "missing pair filled by the best detour", csv: "a,b,10\nb,c,14\nc,d,1\na,d,100\n",
			want: map[[2]string]float64{{"a", "c"}: 24, {"b", "d"}: 15, {"a", "d"}: 100}},
		{name: "no path", csv: "a,b,1\nc,d,1\n", err: "missing"},
		{name: "negative", csv: "a,b,-1\n", err: "not ≥ 0"},
		{name: "bad number", csv: "a,b,1\na,c,x\n", err: "not a number"},
		{name: "no such column", cols: "s,d,rtt", csv: "src,dst,rtt\n", err: "no column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols, err := ParseColumns(tc.cols)
			if err != nil {
				t.Fatal(err)
			}
			m, err := readMatrix(strings.NewReader(tc.csv), cols)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got := m.RTT(m.Index(k[0]), m.Index(k[1])); got != v {
					t.Errorf("rtt %s-%s = %v, want %v", k[0], k[1], got, v)
				}
			}
		})
	}
}

func TestLoadMatrixGzip(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte("src,dst,rtt_ms\nx,y,42.5\n"))
	zw.Close()
	p := filepath.Join(t.TempDir(), "m.csv.gz")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := LoadMatrix(p, Columns{"src", "dst", "rtt_ms"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 2 || m.RTT(0, 1) != 42.5 {
		t.Fatalf("%v %v", m.Names, m.RTT(0, 1))
	}
}

// TestGenerate checks the generator against distances known by hand:
// London–Paris ≈ 344 km, New York–London ≈ 5,570 km great circle; RTT =
// 2 ms + 2 × d/100.
func TestGenerate(t *testing.T) {
	m, err := Generate(DefaultGenConfig(120))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b string
		km   float64
	}{{"london", "paris", 344}, {"new-york", "london", 5570}, {"sydney", "auckland", 2160}} {
		want := 2 + 2*tc.km/100
		if got := m.RTT(m.Index(tc.a), m.Index(tc.b)); math.Abs(got-want) > 0.03*want {
			t.Errorf("%s-%s: %.1f ms, want %.1f ±3 %%", tc.a, tc.b, got, want)
		}
	}
	if m.Len() != 120 || m.RTT(5, 5) != 2 {
		t.Fatalf("%d locations, self rtt %v", m.Len(), m.RTT(5, 5))
	}
	// Scattered points stay within ScatterKm of a city: RTT to some city
	// ≤ 2 + 2·300/100 = 8 ms.
	for i := 100; i < 120; i++ {
		best := math.Inf(1)
		for c := range 100 {
			best = min(best, m.RTT(i, c))
		}
		if best > 8.01 {
			t.Errorf("point %s is %.1f ms from every city", m.Names[i], best)
		}
	}
}

// TestRunSmall runs 8 PoPs on a Zipf workload with both views: the rings
// form, a killed PoP is detected, the clients' RTT lies between the oracle's
// and a random PoP's, and a second run gives the same numbers.
func TestRunSmall(t *testing.T) {
	m, err := Generate(DefaultGenConfig(40))
	if err != nil {
		t.Fatal(err)
	}
	w, err := Zipf(trace.Synth{Files: 300, Requests: 3000, Rate: 1, Seed: 3}, 200, m.Len(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, view := range []string{"mbpp", "gossip"} {
		cfg := DefaultConfig()
		cfg.PoPs, cfg.View = 8, view
		r1, err := Run(cfg, m, w)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", r1)
		if r1.FailureDetectS <= 0 || r1.HitRatio <= 0 || r1.ChordHopsMean <= 0 || r1.MBPPBytesRound <= 0 {
			t.Errorf("%s: detect %v s, hit ratio %v, hops %v, bytes/round %v", view, r1.FailureDetectS, r1.HitRatio, r1.ChordHopsMean, r1.MBPPBytesRound)
		}
		if !(r1.OracleRTTMean <= r1.ClientRTTMean && r1.ClientRTTMean < r1.RandomRTTMean) {
			t.Errorf("%s: oracle %.1f ≤ client %.1f < random %.1f does not hold", view, r1.OracleRTTMean, r1.ClientRTTMean, r1.RandomRTTMean)
		}
		r2, _ := Run(cfg, m, w)
		r1.WallS, r2.WallS = 0, 0
		if !reflect.DeepEqual(r1, r2) {
			t.Errorf("%s: two runs differ:\n%+v\n%+v", view, r1, r2)
		}
	}
}

// TestGeoRingForms: with the ring ordered by a tour of the locations, PoPs
// join next to each other within a few ms, so a ping often reaches a PoP
// before its welcome does. The ring must still form with every PoP seeing
// every other (it did not while MBPP counted an entry as delivered when it
// was sent rather than acked).
func TestGeoRingForms(t *testing.T) {
	m, err := Generate(DefaultGenConfig(100))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.PoPs, cfg.Ring = 20, "geo"
	r, err := Run(cfg, m, &Workload{Requests: []Request{{URL: "/"}}, Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("round %.2f s, detect %v s", r.MBPPRoundS, r.FailureDetectS)
}

// TestTransitStub: with fixed delays the RTTs can be written down: two
// transit domains of one router each, one stub domain per router, so a
// pair in one stub domain is access+stub+stub+access each way (6 ms) and
// a pair across is access+stub+uplink+long haul+uplink+stub+access (86 ms).
func TestTransitStub(t *testing.T) {
	c := TransitStubConfig{Locations: 12, Transits: 2, TransitNodes: 1, StubsPerRouter: 1,
		InterMs: [2]float64{30, 30}, IntraMs: [2]float64{9, 9}, UplinkMs: [2]float64{5, 5}, MultiHomeMs: [2]float64{7, 7},
		StubMs: [2]float64{1, 1}, AccessMs: [2]float64{0.5, 0.5}, Seed: 3}
	m, err := TransitStub(c)
	if err != nil {
		t.Fatal(err)
	}
	domain := func(i int) string { return m.Names[i][strings.Index(m.Names[i], "-"):] }
	seen := map[float64]int{}
	for a := range m.Len() {
		if m.RTT(a, a) != 2 {
			t.Fatalf("RTT within %s = %v, want 2", m.Names[a], m.RTT(a, a))
		}
		for b := a + 1; b < m.Len(); b++ {
			want := 86.0
			if domain(a) == domain(b) {
				want = 6
			}
			if m.RTT(a, b) != want || m.RTT(b, a) != want {
				t.Fatalf("RTT %s–%s = %v, want %v", m.Names[a], m.Names[b], m.RTT(a, b), want)
			}
			seen[want]++
		}
	}
	if seen[6] == 0 || seen[86] == 0 {
		t.Fatalf("12 locations in 2 stub domains: pairs %v", seen)
	}
	// The default topology at 1,000 locations: connected, and its RTTs
	// spread like an internet's (tens to a few hundred ms).
	d, err := TransitStub(DefaultTransitStubConfig(1000))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, sum := math.Inf(1), 0.0, 0.0
	for a := range d.Len() {
		for b := a + 1; b < d.Len(); b++ {
			r := d.RTT(a, b)
			lo, hi, sum = min(lo, r), max(hi, r), sum+r
		}
	}
	mean := sum / float64(d.Len()*(d.Len()-1)/2)
	t.Logf("default transit-stub, 1,000 locations: RTT %.1f–%.1f ms, mean %.1f", lo, hi, mean)
	if lo < 2 || hi > 600 || mean < 40 || mean > 300 {
		t.Fatalf("RTT %.1f–%.1f ms, mean %.1f: not an internet's spread", lo, hi, mean)
	}
}

// TestRedirect: with Config.Redirect the simulator sends a client whose PoP
// misses to a better-scoring holder, as the live PoPs' --redirect does
// (replica.Better): the PoPs are loaded (capacity 0.05 requests per second,
// so server performance spreads) and redirects happen; without it none.
func TestRedirect(t *testing.T) {
	m, err := Generate(DefaultGenConfig(40))
	if err != nil {
		t.Fatal(err)
	}
	w, err := Zipf(trace.Synth{Files: 50, Requests: 3000, Rate: 1, Seed: 3}, 200, m.Len(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.PoPs, cfg.Redirect, cfg.CapacityRPS, cfg.KillAt = 8, on, 0.05, 0
		r, err := Run(cfg, m, w)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("redirect=%v: %d redirects, client %.1f ms, hit %.3f", on, r.Redirects, r.ClientRTTMean, r.HitRatio)
		if on != (r.Redirects > 0) {
			t.Errorf("redirect=%v: %d redirects", on, r.Redirects)
		}
	}
}
