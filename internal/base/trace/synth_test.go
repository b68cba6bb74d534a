package trace

import (
	"io"
	"math"
	"testing"
)

func TestSynthDeterministic(t *testing.T) {
	gen := func(seed int64) []Record {
		g, err := Synth{Files: 500, Requests: 2000, Seed: seed}.New()
		if err != nil {
			t.Fatal(err)
		}
		return readAll(t, g)
	}
	a, b, c := gen(7), gen(7), gen(8)
	if len(a) != 2000 {
		t.Fatalf("%d records, want 2000", len(a))
	}
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("record %d differs for the same seed: %+v vs %+v", i, a[i], b[i])
		}
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("seeds 7 and 8 gave the same workload")
	}
	for i := 1; i < len(a); i++ {
		if a[i].Time.Before(a[i-1].Time) {
			t.Fatalf("time goes backwards at %d", i)
		}
	}
}

func TestSynthDistributions(t *testing.T) {
	const files, reqs = 1000, 200000
	g, err := Synth{Files: files, Alpha: 1.0, Requests: reqs, Seed: 1, MeanSize: 10000, TailFraction: 0.05}.New()
	if err != nil {
		t.Fatal(err)
	}
	sizes := g.Sizes()
	count := map[string]int{}
	for {
		r, err := g.Next()
		if err == io.EOF {
			break
		}
		if r.Bytes != sizes[r.URL] || r.Status != 200 {
			t.Fatalf("record %+v disagrees with Sizes (%d)", r, sizes[r.URL])
		}
		count[r.URL]++
	}
	// Zipf(1) over 1000 ranks: P(rank 1) = 1/H(1000) = 1/7.4855 = 0.1336, P(rank 2) = 0.0668.
	// With 200,000 draws the standard error is ~0.0008, so ±0.005 cannot flake for a fixed seed.
	for rank, want := range map[int]float64{0: 0.1336, 1: 0.0668, 9: 0.01336} {
		got := float64(count[g.URL(rank)]) / reqs
		if math.Abs(got-want) > 0.005 {
			t.Errorf("rank %d share %.4f, want %.4f", rank+1, got, want)
		}
	}
	// Sizes: 95% lognormal with mean 10,000 and 5% Pareto(1.1) ≥ 133,000; the
	// median of all files must sit near the body's median e^(μ) = 10000·e^(-σ²/2) = 4,198.
	var below, tail int
	for _, s := range sizes {
		if s < 4198 {
			below++
		}
		if s >= 133000 {
			tail++
		}
		if s < 1 || s > 64<<20 {
			t.Fatalf("size %d out of range", s)
		}
	}
	if below < 400 || below > 540 {
		t.Errorf("%d of %d files below 4,198 bytes, want about 475 (half the body)", below, files)
	}
	if tail < 40 || tail > 100 {
		t.Errorf("%d files ≥ 133,000 bytes, want about 50 tail + a few body files", tail)
	}
}

// TestSynthDefaults: zero and negative knobs take the documented default,
// positive ones are kept.
func TestSynthDefaults(t *testing.T) {
	for _, tc := range []struct {
		in      Synth
		files   int
		alpha   float64
		tailMin int64
		rate    float64
		name    string
	}{
		{Synth{}, 10000, 0.8, 133000, 100, "zero"},
		{Synth{Files: -3, Alpha: -1, TailMin: -5, Rate: -2}, 10000, 0.8, 133000, 100, "negative"},
		{Synth{Files: 7, Alpha: 1.2, TailMin: 9, Rate: 3}, 7, 1.2, 9, 3, "set"},
	} {
		got := tc.in.withDefaults()
		if got.Files != tc.files || got.Alpha != tc.alpha || got.TailMin != tc.tailMin || got.Rate != tc.rate {
			t.Errorf("%s: Files %d Alpha %v TailMin %d Rate %v, want %d %v %d %v", tc.name,
				got.Files, got.Alpha, got.TailMin, got.Rate, tc.files, tc.alpha, tc.tailMin, tc.rate)
		}
	}
}
