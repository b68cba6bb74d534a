// Package site generates shoal's deterministic sample site: the content tree
// that `shoal up` serves when no --site is given, and that tests and
// benchmarks use as a realistic workload (the one-command cluster;
// SPEC §1 "up").
//
// A site is a few thousand files in nested sections (/docs/aa/…, /img/ab/…,
// /static/css, /static/js, /video) with a heavy-tailed size distribution: a
// lognormal body (median 8 KiB by default) and a Pareto tail, the shape
// Barford and Crovella measured for web files (SURGE, SIGMETRICS 1998) with
// the scale cut down so the default tree stays within 64 MiB for CI. The root
// index.html links to every file and to one index.html per directory, which
// links to that directory's children; manifest.txt lists every URL with its
// size so load generators can replay the site without crawling it.
//
// Generation is deterministic: the same Config produces a byte-identical tree
// (math/rand/v2 PCG seeded from Config.Seed; content bytes are slices of two
// pools drawn once from that stream, so writing is as cheap as copying).
// Sizes pass through math.Exp/Pow, so identity is promised for one toolchain
// and architecture; the manifest records every size, and a tree that does
// not match it is regenerated. manifest.txt is served like any file. If
// the directory already holds a complete site generated with the same Config
// (manifest.txt matches and every listed file has its size) nothing is
// rewritten.
package site

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Defaults for a zero Config field.
const (
	DefaultFiles      = 3000
	DefaultSeed       = 1
	DefaultMedianSize = 8 << 10
	DefaultMaxSize    = 4 << 20
	DefaultMaxTotal   = 64 << 20
)

// Shape of the size distribution. SURGE fits σ = 1.318 for the body and
// α ≈ 1.1 above 133 KB for ~7 % of files; we keep α but use a narrower body
// and a smaller, lower-starting tail so that 3000 files total ~40 MB
// (expected mean: body 8 KiB·e^(σ²/2) ≈ 11 KiB, tail ≈ 136 KiB).
const (
	bodySigma    = 0.8      // lognormal σ of ln(size)
	tailFraction = 0.02     // share of files drawn from the Pareto tail
	tailAlpha    = 1.1      // Pareto shape
	tailMin      = 32 << 10 // Pareto scale x_m (bytes)
	minSize      = 256      // smallest file, room for an HTML skeleton
)

// Config selects a sample site. Zero fields take the defaults above.
type Config struct {
	// Files is the number of content files (index pages and the manifest
	// come on top). Default 3000.
	Files int
	// Seed selects the site; 0 means DefaultSeed, so seed 0 itself is not
	// available.
	Seed int64
	// MedianSize is the median of the lognormal body, in bytes. Default 8 KiB.
	MedianSize int64
	// MaxSize caps the Pareto tail, in bytes. Default 4 MiB.
	MaxSize int64
	// MaxTotal bounds the sum of content file sizes; if a draw exceeds it all
	// sizes are scaled down proportionally. Default 64 MiB.
	MaxTotal int64
}

func (c Config) withDefaults() Config {
	if c.Files <= 0 {
		c.Files = DefaultFiles
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
	if c.MedianSize <= 0 {
		c.MedianSize = DefaultMedianSize
	}
	if c.MaxSize <= 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.MaxTotal <= 0 {
		c.MaxTotal = DefaultMaxTotal
	}
	return c
}

// validate rejects a defaulted Config whose budgets cannot be met.
func (c Config) validate() error {
	if c.MaxSize < minSize || c.MedianSize > c.MaxSize {
		return fmt.Errorf("site config %s: need %d <= median <= max", c, minSize)
	}
	if c.MaxTotal < int64(c.Files)*minSize {
		return fmt.Errorf("site config %s: total must allow %d bytes per file", c, minSize)
	}
	return nil
}

// String is the manifest's config line; two Configs generate the same site
// exactly when their defaulted strings are equal.
func (c Config) String() string {
	c = c.withDefaults()
	return fmt.Sprintf("files=%d seed=%d median=%d max=%d total=%d", c.Files, c.Seed, c.MedianSize, c.MaxSize, c.MaxTotal)
}

// Summary describes a generated site.
type Summary struct {
	// Dir is the site root as given to Generate.
	Dir string
	// Files and Bytes count the content files (not index pages or manifest).
	Files int
	Bytes int64
	// Pages and PageBytes count the generated index.html pages.
	Pages     int
	PageBytes int64
	// MedianSize and MaxSize describe the content file sizes.
	MedianSize, MaxSize int64
	// Reused is true when an identical existing site was kept as is.
	Reused bool
}

// String is a one-line description for status output, e.g.
// "3000 files, 39.2 MB (median 8.2 KB, max 1.0 MB) + 39 index pages".
func (s Summary) String() string {
	return fmt.Sprintf("%d files, %s (median %s, max %s) + %d index pages",
		s.Files, human(s.Bytes), human(s.MedianSize), human(s.MaxSize), s.Pages)
}

// human formats n bytes with a decimal unit.
func human(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// File is one URL of the site and its size.
type File struct {
	URL  string
	Size int64
}

// kind is one class of content file.
type kind struct {
	name, dir, ext string
	bucketed       bool // spread over /dir/aa … /dir/ap
	weight         int
}

var kinds = []kind{
	{"page", "docs", ".html", true, 30},
	{"note", "docs", ".txt", true, 15},
	{"style", "static/css", ".css", false, 5},
	{"script", "static/js", ".js", false, 10},
	{"img", "img", ".png", true, 40},
}

var tailKind = kind{"clip", "video", ".bin", false, 0}

// owned lists the top-level names a generated site consists of; only these
// are removed when a different site is regenerated in the same directory.
var owned = []string{"index.html", manifestName, manifestName + ".tmp", "docs", "img", "static", "video"}

const (
	manifestName = "manifest.txt"
	markerName   = ".shoal-generating" // present while a generation is in progress
	manifestHead = "# shoal sample site, format 1"
	buckets      = 16
)

// planned is one content file before it is written.
type planned struct {
	url  string
	kind kind
	size int64
	off  int // offset into the content pool
}

// plan draws the file list for cfg (already defaulted). It is pure: the same
// cfg gives the same plan.
func plan(cfg Config) []planned {
	r := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x73686f616c)) // "shoal"
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	width := len(strconv.Itoa(cfg.Files - 1))
	files := make([]planned, cfg.Files)
	var sum int64
	for i := range files {
		var size float64
		k := tailKind
		if r.Float64() < tailFraction {
			// Truncated Pareto on [tailMin, MaxSize] by inverse CDF.
			lo, hi := float64(tailMin), float64(cfg.MaxSize)
			ratio := math.Pow(lo/hi, tailAlpha)
			size = lo / math.Pow(1-r.Float64()*(1-ratio), 1/tailAlpha)
		} else {
			size = float64(cfg.MedianSize) * math.Exp(bodySigma*r.NormFloat64())
			w := r.IntN(total)
			for _, kk := range kinds {
				if w < kk.weight {
					k = kk
					break
				}
				w -= kk.weight
			}
		}
		s := min(max(int64(size), minSize), cfg.MaxSize)
		dir := k.dir
		if k.bucketed {
			b := r.IntN(buckets)
			dir += "/" + string([]byte{'a', byte('a' + b)})
		}
		files[i] = planned{
			url:  fmt.Sprintf("/%s/%s-%0*d%s", dir, k.name, width, i, k.ext),
			kind: k,
			size: s,
			off:  r.IntN(poolSize),
		}
		sum += s
	}
	if sum > cfg.MaxTotal {
		// Shrink the part above minSize so the floor cannot push the sum back
		// over the budget: Σ' = n·min + (Σ − n·min)·scale = MaxTotal.
		floor := int64(len(files)) * minSize
		scale := float64(cfg.MaxTotal-floor) / float64(sum-floor)
		for i := range files {
			files[i].size = minSize + int64(float64(files[i].size-minSize)*scale)
		}
	}
	slices.SortFunc(files, func(a, b planned) int { return strings.Compare(a.url, b.url) })
	return files
}

// Generate writes the sample site for cfg into dir (created if missing) and
// returns its Summary. If dir already holds the same site it is left alone
// (Summary.Reused). A directory holding a different shoal site is replaced
// (only the names a site consists of are removed); a non-empty directory that
// holds no shoal site is refused, so a mistyped --site cannot wipe data.
func Generate(dir string, cfg Config) (Summary, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Summary{}, err
	}
	if sum, ok := reuse(dir, cfg); ok {
		return sum, nil
	}
	if err := prepare(dir); err != nil {
		return Summary{}, fmt.Errorf("site %s: %w", dir, err)
	}
	sum, err := write(dir, cfg)
	if err != nil {
		return Summary{}, fmt.Errorf("site %s: %w", dir, err)
	}
	return sum, nil
}

// prepare makes dir ready for a fresh site: creates it, or clears a previous
// shoal site (complete or interrupted), or refuses foreign content.
func prepare(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	ours := false
	for _, e := range ents {
		if e.Name() == manifestName || e.Name() == markerName {
			ours = true
		}
	}
	if len(ents) > 0 && !ours {
		return errors.New("directory is not empty and holds no shoal sample site; refusing to overwrite")
	}
	if err := os.WriteFile(filepath.Join(dir, markerName), nil, 0o644); err != nil {
		return err
	}
	for _, name := range owned {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// reuse reports whether dir already holds the complete site for cfg.
func reuse(dir string, cfg Config) (Summary, bool) {
	if _, err := os.Stat(filepath.Join(dir, markerName)); err == nil {
		return Summary{}, false
	}
	conf, files, err := readManifest(dir)
	if err != nil || conf != cfg.String() {
		return Summary{}, false
	}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.URL)))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.Size {
			return Summary{}, false
		}
	}
	sum := summarize(dir, files)
	sum.Reused = true
	return sum, true
}

// isPage reports whether url is a generated index page (content files are
// never called index.html).
func isPage(url string) bool { return path.Base(url) == "index.html" }

func summarize(dir string, files []File) Summary {
	sum := Summary{Dir: dir}
	var sizes []int64
	for _, f := range files {
		if isPage(f.URL) {
			sum.Pages++
			sum.PageBytes += f.Size
			continue
		}
		sum.Files++
		sum.Bytes += f.Size
		sizes = append(sizes, f.Size)
	}
	if len(sizes) > 0 {
		slices.Sort(sizes)
		sum.MedianSize = sizes[len(sizes)/2]
		sum.MaxSize = sizes[len(sizes)-1]
	}
	return sum
}

// Manifest reads dir/manifest.txt and returns every URL of the site (content
// files and index pages, sorted by URL) with its size.
func Manifest(dir string) ([]File, error) {
	_, files, err := readManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("site %s: %w", dir, err)
	}
	return files, nil
}

func readManifest(dir string) (config string, files []File, err error) {
	f, err := os.Open(filepath.Join(dir, manifestName))
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		switch {
		case line == 1:
			if t != manifestHead {
				return "", nil, fmt.Errorf("%s:1: not a shoal site manifest", manifestName)
			}
		case strings.HasPrefix(t, "config "):
			config = strings.TrimPrefix(t, "config ")
		case t == "" || t[0] == '#':
		default:
			sz, url, ok := strings.Cut(t, " ")
			n, err := strconv.ParseInt(sz, 10, 64)
			if !ok || err != nil || n < 0 || !strings.HasPrefix(url, "/") {
				return "", nil, fmt.Errorf("%s:%d: malformed line %q", manifestName, line, t)
			}
			files = append(files, File{URL: url, Size: n})
		}
	}
	if err := sc.Err(); err != nil {
		return "", nil, fmt.Errorf("%s: %w", manifestName, err)
	}
	if config == "" {
		return "", nil, fmt.Errorf("%s: no config line", manifestName)
	}
	return config, files, nil
}
