package loadgen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"shoal/internal/base/trace"
)

// Workload chooses the request-target (path and query) of request i. Request
// indices are handed out by one shared atomic counter, so a deterministic
// Workload gives the same sequence of requests whatever the number of
// connections — the property that makes trace replay order-preserving.
// Implementations must be safe for concurrent use and must not allocate.
type Workload interface {
	// Target returns the request-target of request i, starting with '/'.
	Target(i uint64) string
	// Len is the number of requests in one pass (a trace's length), or 0
	// when the workload is unbounded.
	Len() uint64
}

// Fixed requests the same target every time (the plain `--url` benchmark).
type Fixed string

// Target returns the fixed target.
func (f Fixed) Target(uint64) string { return string(f) }

// Len is 0: a fixed target is unbounded.
func (f Fixed) Len() uint64 { return 0 }

// List replays a list of targets in order, wrapping around at its end.
type List []string

// Target returns element i mod len.
func (l List) Target(i uint64) string { return l[i%uint64(len(l))] }

// Len is the list's length.
func (l List) Len() uint64 { return uint64(len(l)) }

// LoadTrace reads the URLs of an access log (CLF or EPA, plain or gzip, via
// internal/base/trace) in log order, keeping at most limit of them (0 = all).
// Only GET and HEAD records are kept — other methods cannot be replayed
// without their bodies — and each URL is made a valid request-target
// (bytes outside printable ASCII are %-encoded; a missing leading slash is
// added). prefix (a base URL's path, e.g. "/mirror") is prepended.
func LoadTrace(path, prefix string, limit int) (List, error) {
	r, err := trace.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	defer r.Close()
	var out List
	var b strings.Builder
	for limit <= 0 || len(out) < limit {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trace %s: record %d: %w", path, len(out)+1, err)
		}
		if rec.Method != "" && rec.Method != "GET" && rec.Method != "HEAD" {
			continue
		}
		if rec.URL == "" {
			continue
		}
		out = append(out, requestTarget(&b, prefix, rec.URL))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("trace %s: no replayable GET records", path)
	}
	return out, nil
}

// requestTarget joins prefix and u and escapes what may not appear in a
// request line (RFC 9112 §3.2: no controls, no spaces, ASCII only).
func requestTarget(b *strings.Builder, prefix, u string) string {
	b.Reset()
	b.WriteString(strings.TrimSuffix(prefix, "/"))
	if !strings.HasPrefix(u, "/") {
		b.WriteByte('/')
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		if c <= ' ' || c >= 0x7f {
			fmt.Fprintf(b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// PatternNames returns n targets named by a printf pattern applied to
// 1 … n (default pattern "/f%05d" gives "/f00001" …), prefixed by prefix.
func PatternNames(prefix, pattern string, n int) ([]string, error) {
	if pattern == "" {
		pattern = "/f%05d"
	}
	if n <= 0 {
		return nil, fmt.Errorf("pattern %q: need at least one file, got %d", pattern, n)
	}
	if strings.Count(pattern, "%")-2*strings.Count(pattern, "%%") != 1 {
		return nil, fmt.Errorf("pattern %q: want exactly one integer verb such as %%05d", pattern)
	}
	if strings.Contains(fmt.Sprintf(pattern, 1), "%!") {
		return nil, fmt.Errorf("pattern %q: its verb does not format an integer", pattern)
	}
	out := make([]string, n)
	var b strings.Builder
	for i := range out {
		out[i] = requestTarget(&b, prefix, fmt.Sprintf(pattern, i+1))
	}
	return out, nil
}

// ReadIndex reads a site's file list, most popular first (Zipf rank 1 is
// the first URL). Each line is either "URL" or "SIZE URL" — the second form
// is the line format of a shoal sample site's manifest.txt (internal/tools/site),
// so `--index site/manifest.txt` works as is (its URLs are in sorted order,
// so ranks then follow the URL order). URLs must start with '/'; blank
// lines, '#' comments and any other line (such as the manifest's "config"
// line) are skipped.
func ReadIndex(path, prefix string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	defer f.Close()
	var out []string
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if size, rest, ok := strings.Cut(l, " "); ok && size != "" && strings.Trim(size, "0123456789") == "" {
			l = strings.TrimSpace(rest)
		}
		if !strings.HasPrefix(l, "/") {
			continue
		}
		out = append(out, requestTarget(&b, prefix, l))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("index %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("index %s: no entries", path)
	}
	return out, nil
}

// Zipf draws targets with P(rank k) ∝ 1/k^α over its names (rank 1 = the
// first name), the popularity law of web requests the seed papers assume
// (seed 001 sizes its cache for it). Unlike math/rand's Zipf it accepts any
// α ≥ 0 (web traces have α ≈ 0.6–1.0, below rand.Zipf's limit of 1).
// Request i's draw is a pure function of (seed, i), so the sequence does not
// depend on how many connections share it. Sampling is a binary search in
// the cumulative distribution: O(log n), no allocation.
type Zipf struct {
	names []string
	cdf   []float64
	seed  uint64
}

// NewZipf builds the distribution over names with exponent alpha.
func NewZipf(alpha float64, names []string, seed uint64) (*Zipf, error) {
	if len(names) == 0 {
		return nil, errors.New("zipf: no names")
	}
	if alpha < 0 || math.IsNaN(alpha) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("zipf: exponent %v must be a finite number ≥ 0", alpha)
	}
	cdf := make([]float64, len(names))
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(float64(k+1), -alpha)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	cdf[len(cdf)-1] = 1
	return &Zipf{names: names, cdf: cdf, seed: seed}, nil
}

// Target returns the name drawn for request i.
func (z *Zipf) Target(i uint64) string { return z.names[z.Rank(i)] }

// Rank returns the 0-based rank drawn for request i.
func (z *Zipf) Rank(i uint64) int {
	u := float64(splitmix64(z.seed^(i*0x9e3779b97f4a7c15))>>11) / (1 << 53)
	k := sort.SearchFloat64s(z.cdf, u) // first k with cdf[k] ≥ u
	if k >= len(z.cdf) {
		k = len(z.cdf) - 1
	}
	return k
}

// Len is 0: a Zipf workload is unbounded.
func (z *Zipf) Len() uint64 { return 0 }

// splitmix64 is a fast, well-mixed 64-bit hash (Steele et al., 2014).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
