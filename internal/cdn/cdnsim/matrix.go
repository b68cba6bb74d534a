package cdnsim

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// Matrix is a symmetric round-trip-time matrix between locations, in
// milliseconds. Every location may hold a PoP and clients.
type Matrix struct {
	Names []string
	rtt   []float32 // row-major L×L
}

// Len returns the number of locations.
func (m *Matrix) Len() int { return len(m.Names) }

// RTT returns the round-trip time between locations a and b in ms.
func (m *Matrix) RTT(a, b int) float64 { return float64(m.rtt[a*len(m.Names)+b]) }

func newMatrix(names []string) *Matrix {
	n := len(names)
	r := make([]float32, n*n)
	for i := range r {
		r[i] = float32(math.NaN())
	}
	return &Matrix{Names: names, rtt: r}
}

func (m *Matrix) set(a, b int, v float64) {
	n := len(m.Names)
	m.rtt[a*n+b], m.rtt[b*n+a] = float32(v), float32(v)
}

// Columns names the source, destination and RTT columns of a matrix file:
// header names, or 1-based column numbers.
type Columns struct{ Src, Dst, RTT string }

// ParseColumns reads "SRC,DST,RTT_MS"; "" gives the first three columns.
func ParseColumns(s string) (Columns, error) {
	if s == "" {
		return Columns{"1", "2", "3"}, nil
	}
	p := strings.Split(s, ",")
	if len(p) != 3 {
		return Columns{}, fmt.Errorf("rtt columns %q: want SRC,DST,RTT_MS", s)
	}
	for i := range p {
		p[i] = strings.TrimSpace(p[i])
		if p[i] == "" {
			return Columns{}, fmt.Errorf("rtt columns %q: empty column", s)
		}
	}
	return Columns{p[0], p[1], p[2]}, nil
}

// LoadMatrix reads a matrix file (CSV, plain or gzip by its magic bytes):
// one row per pair, upper triangle allowed (RTT is taken as symmetric; when
// both directions are given the mean is used). A first row whose RTT column
// is not a number is a header. Pairs missing from the file are estimated
// through the best intermediate location (a detour, as the Internet routes);
// a pair with no path at all is an error.
func LoadMatrix(path string, cols Columns) (*Matrix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rtt matrix: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("rtt matrix %s: gzip: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	m, err := readMatrix(r, cols)
	if err != nil {
		return nil, fmt.Errorf("rtt matrix %s: %w", path, err)
	}
	return m, nil
}

func readMatrix(r io.Reader, cols Columns) (*Matrix, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cr.Comment = '#'
	idx := [3]int{-1, -1, -1}
	want := [3]string{cols.Src, cols.Dst, cols.RTT}
	numeric := true
	for i, w := range want {
		if n, err := strconv.Atoi(w); err == nil && n >= 1 {
			idx[i] = n - 1
		} else {
			numeric = false
		}
	}
	type pair struct {
		a, b int
		v    float64
	}
	ids := map[string]int{}
	var names []string
	id := func(s string) int {
		if i, ok := ids[s]; ok {
			return i
		}
		ids[s] = len(names)
		names = append(names, s)
		return len(names) - 1
	}
	var pairs []pair
	line := 0
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line++
		if err != nil {
			return nil, err
		}
		if line == 1 && !numeric {
			for i, w := range want {
				for j, h := range rec {
					if strings.EqualFold(strings.TrimSpace(h), w) {
						idx[i] = j
					}
				}
				if idx[i] < 0 {
					return nil, fmt.Errorf("no column %q in the header %q", w, strings.Join(rec, ","))
				}
			}
			continue
		}
		if max(idx[0], idx[1], idx[2]) >= len(rec) {
			return nil, fmt.Errorf("line %d: %d columns, want column %d", line, len(rec), max(idx[0], idx[1], idx[2])+1)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rec[idx[2]]), 64)
		if err != nil {
			if line == 1 {
				continue // a header
			}
			return nil, fmt.Errorf("line %d: rtt %q is not a number", line, rec[idx[2]])
		}
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("line %d: rtt %v is not ≥ 0", line, v)
		}
		a, b := id(strings.TrimSpace(rec[idx[0]])), id(strings.TrimSpace(rec[idx[1]]))
		pairs = append(pairs, pair{a, b, v})
	}
	if len(names) < 2 {
		return nil, fmt.Errorf("%d locations, want ≥ 2", len(names))
	}
	m := newMatrix(names)
	n := len(names)
	sum := make([]float64, n*n)
	cnt := make([]int32, n*n)
	for _, p := range pairs {
		if p.a == p.b {
			continue
		}
		x, y := min(p.a, p.b), max(p.a, p.b)
		sum[x*n+y] += p.v
		cnt[x*n+y]++
	}
	for a := range n {
		m.rtt[a*n+a] = 0
		for b := a + 1; b < n; b++ {
			if cnt[a*n+b] > 0 {
				m.set(a, b, sum[a*n+b]/float64(cnt[a*n+b]))
			}
		}
	}
	return m, m.fill()
}

// fill estimates missing pairs by the best one-intermediate detour.
func (m *Matrix) fill() error {
	n := len(m.Names)
	missing := 0
	for a := range n {
		for b := a + 1; b < n; b++ {
			if !math.IsNaN(m.RTT(a, b)) {
				continue
			}
			best := math.Inf(1)
			for k := range n {
				if v := m.RTT(a, k) + m.RTT(k, b); v < best { // NaN compares false
					best = v
				}
			}
			if math.IsInf(best, 1) {
				missing++
				continue
			}
			m.set(a, b, best)
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d pairs missing with no location joining them", missing)
	}
	return nil
}

// GenConfig describes a generated matrix.
type GenConfig struct {
	// Locations is how many; the first min(Locations, 100) are the real
	// cities of the embedded list, the rest are points scattered up to
	// ScatterKm around cities drawn at random (suburbs, smaller towns).
	Locations int
	// Inflation multiplies the great-circle propagation delay. Light in
	// fibre covers about 200 km per ms (refractive index ≈ 1.47), so the
	// round trip over a great circle of d km takes d/100 ms; fibre follows
	// roads, rails and sea cables and routing adds detours, which measured
	// paths put at about twice that (Singla et al., "The Internet at the
	// speed of light", HotNets 2014: median fibre RTT inflation ≈ 2 over
	// c-latency in fibre, more with routing). Default 2.
	Inflation float64
	// BaseMs is added to every pair and is the RTT within one location:
	// access and last-mile delay. Default 2 ms.
	BaseMs float64
	// ScatterKm bounds the distance of a scattered point from its city.
	ScatterKm float64
	Seed      uint64
}

// DefaultGenConfig returns the generator's defaults for n locations.
func DefaultGenConfig(n int) GenConfig {
	return GenConfig{Locations: n, Inflation: 2, BaseMs: 2, ScatterKm: 300, Seed: 1}
}

const earthKm = 6371.0

// greatCircleKm is the haversine distance between two points in degrees.
func greatCircleKm(lat1, lon1, lat2, lon2 float64) float64 {
	r := math.Pi / 180
	dlat, dlon := (lat2-lat1)*r, (lon2-lon1)*r
	h := math.Sin(dlat/2)*math.Sin(dlat/2) + math.Cos(lat1*r)*math.Cos(lat2*r)*math.Sin(dlon/2)*math.Sin(dlon/2)
	return 2 * earthKm * math.Asin(math.Min(1, math.Sqrt(h)))
}

// Generate builds a matrix from city coordinates: RTT = BaseMs + Inflation ×
// d/100 ms for a great-circle distance of d km.
func Generate(g GenConfig) (*Matrix, error) {
	if g.Locations < 2 || g.Inflation <= 0 || g.BaseMs < 0 || g.ScatterKm < 0 {
		return nil, fmt.Errorf("rtt generator: %d locations (want ≥ 2), inflation %v (> 0), base %v ms and scatter %v km (≥ 0)",
			g.Locations, g.Inflation, g.BaseMs, g.ScatterKm)
	}
	rng := rand.New(rand.NewPCG(g.Seed, 0xc17e5))
	pts := make([]city, g.Locations)
	names := make([]string, g.Locations)
	for i := range pts {
		if i < len(cities) {
			pts[i] = cities[i]
		} else {
			c := cities[rng.IntN(len(cities))]
			d := g.ScatterKm * math.Sqrt(rng.Float64()) / earthKm * 180 / math.Pi
			th := 2 * math.Pi * rng.Float64()
			lat := c.lat + d*math.Sin(th)
			lon := c.lon + d*math.Cos(th)/math.Max(0.1, math.Cos(c.lat*math.Pi/180))
			pts[i] = city{fmt.Sprintf("%s-%d", c.name, i), lat, lon}
		}
		names[i] = pts[i].name
	}
	m := newMatrix(names)
	for a := range pts {
		m.rtt[a*len(pts)+a] = float32(g.BaseMs)
		for b := a + 1; b < len(pts); b++ {
			d := greatCircleKm(pts[a].lat, pts[a].lon, pts[b].lat, pts[b].lon)
			m.set(a, b, g.BaseMs+g.Inflation*d/100)
		}
	}
	return m, nil
}

// Index returns the location named name, or -1.
func (m *Matrix) Index(name string) int {
	for i, n := range m.Names {
		if n == name {
			return i
		}
	}
	return -1
}

// NewMatrix builds a matrix from names and a square table of RTTs in ms
// (row i, column j: from names[i] to names[j]), as a scenario file gives
// it; the table is taken as symmetric (the mean of both directions).
func NewMatrix(names []string, rtt [][]float64) (*Matrix, error) {
	n := len(names)
	if n == 0 || len(rtt) != n {
		return nil, fmt.Errorf("rtt matrix: %d rows for %d locations", len(rtt), n)
	}
	m := newMatrix(names)
	for i, row := range rtt {
		if len(row) != n {
			return nil, fmt.Errorf("rtt matrix: row %d (%s) has %d entries, want %d", i+1, names[i], len(row), n)
		}
		for j := i; j < n; j++ {
			a, b := row[j], rtt[j][i]
			if a < 0 || b < 0 || math.IsNaN(a) || math.IsNaN(b) {
				return nil, fmt.Errorf("rtt matrix: %s–%s is not a delay", names[i], names[j])
			}
			m.set(i, j, (a+b)/2)
		}
	}
	return m, nil
}
