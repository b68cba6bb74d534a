package trace

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"
)

// Synth describes a synthetic static-web workload (SPEC §6 "synthetic
// workloads"): Files objects whose popularity follows Zipf(Alpha) (rank i is
// requested with probability ∝ 1/i^Alpha; web traces show Alpha ≈ 0.6–0.9,
// Breslau et al. 1999) and whose sizes are heavy-tailed: a lognormal body with
// a Pareto tail, the SURGE model of Barford & Crovella (1998). Popularity and
// size are drawn independently, as SURGE found them nearly uncorrelated.
// Zero fields take the documented defaults. The same Synth and Seed always
// produce the same Records (math/rand/v2 PCG, no global generator).
type Synth struct {
	Files    int     // distinct objects; default 10,000
	Alpha    float64 // Zipf exponent, > 0; default 0.8
	Requests int     // requests to generate; default 100,000
	Seed     int64   // PCG seed
	MeanSize int64   // mean of the lognormal body in bytes; default 11,000

	Sigma        float64 // lognormal σ of ln(size); default 1.318 (SURGE)
	TailFraction float64 // share of files drawn from the Pareto tail; default 0.07 (SURGE)
	TailAlpha    float64 // Pareto shape; default 1.1 (SURGE)
	TailMin      int64   // Pareto scale (minimum tail size) in bytes; default 133,000 (SURGE)
	MaxSize      int64   // sizes are capped here; default 64 MiB

	// Sites > 0 spreads the files over that many virtual hosts
	// ("site1.example", ...; file i on site i mod Sites, so every site has
	// popular and rare files) and sets Record.VHost: a multi-site log.
	// Default 0: one site, no VHost.
	Sites int

	Start time.Time // time of the first request; default 1995-08-01 00:00:00 UTC
	Rate  float64   // mean requests per second (Poisson arrivals); default 100
}

// positiveOr returns v, or d when v is not positive (zero or a negative
// that no knob of Synth can mean).
func positiveOr[T int | int64 | float64](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

func (s Synth) withDefaults() Synth {
	s.Files = positiveOr(s.Files, 10000)
	s.Alpha = positiveOr(s.Alpha, 0.8)
	s.Requests = positiveOr(s.Requests, 100000)
	s.MeanSize = positiveOr(s.MeanSize, 11000)
	s.Sigma = positiveOr(s.Sigma, 1.318)
	s.TailFraction = positiveOr(s.TailFraction, 0.07)
	s.TailAlpha = positiveOr(s.TailAlpha, 1.1)
	s.TailMin = positiveOr(s.TailMin, 133000)
	s.MaxSize = positiveOr(s.MaxSize, 64<<20)
	if s.Start.IsZero() {
		s.Start = time.Date(1995, time.August, 1, 0, 0, 0, 0, time.UTC)
	}
	s.Rate = positiveOr(s.Rate, 100)
	return s
}

// Gen yields the Records of a Synth workload; it implements Source.
type Gen struct {
	s     Synth
	rng   *rand.Rand
	cdf   []float64 // cdf[i] = P(rank ≤ i)
	urls  []string
	hosts []string // per file, with Sites > 0
	sizes []int64
	n     int
	t     time.Time
}

// New builds the generator: it draws every file's size up front (so a URL
// always has one size) and the Zipf CDF (O(Files) memory, O(log Files) per request).
func (s Synth) New() (*Gen, error) {
	s = s.withDefaults()
	if s.TailFraction >= 1 || math.IsNaN(s.Alpha) || math.IsInf(s.Alpha, 0) {
		return nil, fmt.Errorf("synth: TailFraction %v must be < 1 and Alpha finite", s.TailFraction)
	}
	g := &Gen{
		s:     s,
		rng:   rand.New(rand.NewPCG(uint64(s.Seed), 0x5e0a1)), // second word: fixed stream id
		cdf:   make([]float64, s.Files),
		urls:  make([]string, s.Files),
		sizes: make([]int64, s.Files),
		t:     s.Start,
	}
	sum := 0.0
	for i := range g.cdf {
		sum += math.Pow(float64(i+1), -s.Alpha)
		g.cdf[i] = sum
	}
	for i := range g.cdf {
		g.cdf[i] /= sum
	}
	mu := math.Log(float64(s.MeanSize)) - s.Sigma*s.Sigma/2 // mean of lognormal = e^(μ+σ²/2)
	for i := range g.sizes {
		var v float64
		if g.rng.Float64() < s.TailFraction {
			// Pareto by inversion: x = k / U^(1/α), U in (0,1].
			v = float64(s.TailMin) / math.Pow(1-g.rng.Float64(), 1/s.TailAlpha)
		} else {
			v = math.Exp(mu + s.Sigma*g.rng.NormFloat64())
		}
		g.sizes[i] = min(max(int64(v), 1), s.MaxSize)
		g.urls[i] = "/synth/" + strconv.Itoa(i) + ".html"
	}
	if s.Sites > 0 {
		g.hosts = make([]string, s.Files)
		names := make([]string, s.Sites)
		for k := range names {
			names[k] = "site" + strconv.Itoa(k+1) + ".example"
		}
		for i := range g.hosts {
			g.hosts[i] = names[i%s.Sites]
		}
	}
	return g, nil
}

// Next returns the next request, or io.EOF after Requests records. It does not allocate.
func (g *Gen) Next() (Record, error) {
	if g.n >= g.s.Requests {
		return Record{}, io.EOF
	}
	g.n++
	u := g.rng.Float64()
	i := sort.SearchFloat64s(g.cdf, u)
	if i >= len(g.cdf) {
		i = len(g.cdf) - 1
	}
	g.t = g.t.Add(time.Duration(g.rng.ExpFloat64() / g.s.Rate * float64(time.Second)))
	vh := ""
	if g.hosts != nil {
		vh = g.hosts[i]
	}
	return Record{
		VHost: vh, Host: "synth", Time: g.t, Method: "GET", URL: g.urls[i], Proto: "HTTP/1.0",
		Status: 200, Bytes: g.sizes[i],
	}, nil
}

// Sizes returns every file's content key (Record.Key: URL, or site + URL
// with Sites) and size, the map a trace's Sizes would give.
func (g *Gen) Sizes() map[string]int64 {
	m := make(map[string]int64, len(g.urls))
	for i, u := range g.urls {
		if g.hosts != nil {
			u = g.hosts[i] + u
		}
		m[u] = g.sizes[i]
	}
	return m
}

// URL returns the URL of the file with popularity rank i (0 = most popular).
func (g *Gen) URL(i int) string { return g.urls[i] }
