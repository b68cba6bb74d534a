package site

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"shoal/internal/base/content"
)

// hashTree hashes every file's relative path and bytes, in walk order.
func hashTree(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Write([]byte(rel))
		h.Write([]byte{0})
		h.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func gen(t *testing.T, cfg Config) (string, Summary) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "site")
	sum, err := Generate(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dir, sum
}

func TestDeterministic(t *testing.T) {
	cfgs := []Config{{Files: 400, Seed: 7}}
	if !testing.Short() {
		cfgs = append(cfgs, Config{}) // the default site, ~40 MB, twice
	}
	for _, cfg := range cfgs {
		d1, s1 := gen(t, cfg)
		d2, s2 := gen(t, cfg)
		if h1, h2 := hashTree(t, d1), hashTree(t, d2); h1 != h2 {
			t.Errorf("%v: trees differ: %s vs %s", cfg, h1, h2)
		}
		s1.Dir, s2.Dir = "", ""
		if s1 != s2 {
			t.Errorf("%v: summaries differ: %+v vs %+v", cfg, s1, s2)
		}
		other := cfg.withDefaults()
		other.Seed++
		d3, _ := gen(t, other)
		if hashTree(t, d1) == hashTree(t, d3) {
			t.Errorf("%v and %v gave the same tree", cfg, other)
		}
	}
}

var hrefRE = regexp.MustCompile(`href="([^"]*)"`)

func TestIndexLinksResolve(t *testing.T) {
	dir, sum := gen(t, Config{Files: 500, Seed: 3})
	files, err := Manifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var contentURLs, pages []string
	for _, f := range files {
		if isPage(f.URL) {
			pages = append(pages, f.URL)
		} else {
			contentURLs = append(contentURLs, f.URL)
		}
	}
	if len(contentURLs) != 500 || sum.Files != 500 || sum.Pages != len(pages) {
		t.Fatalf("manifest has %d files, %d pages; summary %+v", len(contentURLs), len(pages), sum)
	}
	linked := map[string]bool{}
	for _, p := range pages {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range hrefRE.FindAllSubmatch(b, -1) {
			u := string(m[1])
			if !strings.HasPrefix(u, "/") {
				t.Errorf("%s: relative link %q", p, u)
				continue
			}
			fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(u)))
			if err != nil || !fi.Mode().IsRegular() {
				t.Errorf("%s links to %q: %v", p, u, err)
			}
			linked[u] = true
			if p != "/index.html" {
				if parent := path.Dir(strings.TrimSuffix(u, "/index.html")); isPage(u) && parent != path.Dir(p) {
					t.Errorf("%s links to %s, not a child section", p, u)
				}
			}
		}
	}
	// Every content file and every section index page is reachable.
	for _, u := range append(contentURLs, pages...) {
		if u != "/index.html" && !linked[u] {
			t.Errorf("%s is not linked from any index page", u)
		}
	}
	// The root index alone links to every content file.
	root, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	for _, u := range contentURLs {
		if !bytes.Contains(root, []byte(`href="`+u+`"`)) {
			t.Errorf("root index does not link %s", u)
			break
		}
	}
	// The content store serves every manifest URL with the manifest's size.
	st, err := content.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		e, err := st.Lookup(f.URL)
		if err != nil || e.Size != f.Size {
			t.Errorf("content.Lookup(%s) = %v, %v; want size %d", f.URL, e, err, f.Size)
		}
	}
	if _, err := st.Lookup("/" + markerName); err == nil {
		t.Error("generation marker left behind")
	}
}

// TestSizeDistribution checks the default plan against bounds worked out by
// hand: 98 % lognormal(median 8 KiB, σ 0.8) + 2 % Pareto(α 1.1, 32 KiB…4 MiB).
//   - median: the tail (all above 8 KiB) moves it to the 0.5/0.98 quantile of
//     the body, 8192·e^(0.8·0.0256) ≈ 8361; its standard error at n = 3000 is
//     ≈ 1.25·0.8/√3000 ≈ 1.8 %, so [7600, 9200] is > 4 standard errors wide.
//   - tail count ~ Binomial(3000, 0.02): mean 60, sd 7.7 → [30, 90].
//   - total: body 2940·8192·e^0.32 ≈ 33 MB + tail 60·136 KiB ≈ 8 MB ≈ 41 MB.
//   - max: P(one tail file > 512 KiB) = 16^-1.1 ≈ 4.7 %, 60 tail files → a
//     file above 512 KiB with probability ≈ 94 %; fixed seed, so stable.
func TestSizeDistribution(t *testing.T) {
	cfg := Config{}.withDefaults()
	files := plan(cfg)
	if len(files) != DefaultFiles {
		t.Fatalf("plan has %d files", len(files))
	}
	var sizes []int64
	var total int64
	kinds := map[string]int{}
	for _, f := range files {
		sizes = append(sizes, f.size)
		total += f.size
		kinds[f.kind.ext]++
		if f.size < minSize || f.size > cfg.MaxSize {
			t.Errorf("%s: size %d outside [%d, %d]", f.url, f.size, minSize, cfg.MaxSize)
		}
	}
	slices.Sort(sizes)
	median, largest := sizes[len(sizes)/2], sizes[len(sizes)-1]
	t.Logf("median %d max %d total %d kinds %v", median, largest, total, kinds)
	sum := Summary{Files: 3000, Bytes: 39240340, Pages: 39, MedianSize: 8177, MaxSize: 1019734}
	if got, want := sum.String(), "3000 files, 39.2 MB (median 8.2 KB, max 1.0 MB) + 39 index pages"; got != want {
		t.Errorf("Summary.String() = %q, want %q", got, want)
	}
	if median < 7600 || median > 9200 {
		t.Errorf("median %d outside [7600, 9200]", median)
	}
	if largest < 512<<10 || largest > DefaultMaxSize {
		t.Errorf("max %d outside [512 KiB, 4 MiB]", largest)
	}
	if total < 24<<20 || total > DefaultMaxTotal {
		t.Errorf("total %d outside [24 MiB, 64 MiB]", total)
	}
	if n := kinds[".bin"]; n < 30 || n > 90 {
		t.Errorf("%d tail files, want 30..90", n)
	}
	for _, ext := range []string{".html", ".txt", ".css", ".js", ".png"} {
		if kinds[ext] < 50 {
			t.Errorf("only %d %s files", kinds[ext], ext)
		}
	}
	// The budget is honoured exactly when the draw exceeds it.
	small := Config{Files: 1000, MaxTotal: 2 << 20}.withDefaults()
	total = 0
	for _, f := range plan(small) {
		total += f.size
		if f.size < minSize {
			t.Errorf("scaled size %d below floor", f.size)
		}
	}
	if total > small.MaxTotal || total < small.MaxTotal-1000 {
		t.Errorf("scaled total %d, want (%d-1000, %d]", total, small.MaxTotal, small.MaxTotal)
	}
}

func TestRender(t *testing.T) {
	p := newPools(1)
	for _, k := range append(slices.Clone(kinds), tailKind) {
		for _, size := range []int64{minSize, 1000, poolSize + 12345} {
			f := planned{url: "/x/" + k.name + "-1" + k.ext, kind: k, size: size, off: poolSize - 7}
			b := render(nil, f, p)
			if int64(len(b)) != size {
				t.Errorf("%s size %d: rendered %d bytes", k.ext, size, len(b))
			}
			switch k.ext {
			case ".html":
				if !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.HasSuffix(b, []byte("</html>\n")) {
					t.Errorf("html %d: bad frame %q…%q", size, b[:20], b[len(b)-10:])
				}
			case ".png":
				if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
					t.Errorf("png %d: no signature", size)
				}
			}
		}
	}
}

func TestReuseAndRegenerate(t *testing.T) {
	cfg := Config{Files: 200, Seed: 5}
	dir, s1 := gen(t, cfg)
	if s1.Reused {
		t.Fatal("fresh site reported as reused")
	}
	files, _ := Manifest(dir)
	victim := filepath.Join(dir, filepath.FromSlash(files[len(files)/2].URL))
	old := mtime(t, victim)

	s2, err := Generate(dir, cfg)
	if err != nil || !s2.Reused {
		t.Fatalf("second Generate: reused=%v err=%v", s2.Reused, err)
	}
	if mtime(t, victim) != old {
		t.Error("reused site was rewritten")
	}
	s1.Reused = true
	if s1 != s2 {
		t.Errorf("reused summary %+v, want %+v", s2, s1)
	}

	// A missing file forces regeneration.
	os.Remove(victim)
	if s, err := Generate(dir, cfg); err != nil || s.Reused {
		t.Fatalf("after delete: reused=%v err=%v", s.Reused, err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("deleted file not regenerated: %v", err)
	}

	// An interrupted generation (marker left) is not reused.
	os.WriteFile(filepath.Join(dir, markerName), nil, 0o644)
	if s, err := Generate(dir, cfg); err != nil || s.Reused {
		t.Fatalf("after interruption: reused=%v err=%v", s.Reused, err)
	}

	// Another config replaces the site: nothing of the old one survives.
	want := hashTree(t, mustGen(t, Config{Files: 150, Seed: 6}))
	if _, err := Generate(dir, Config{Files: 150, Seed: 6}); err != nil {
		t.Fatal(err)
	}
	if got := hashTree(t, dir); got != want {
		t.Error("regenerated site differs from a fresh one with the same config")
	}

	// A directory with foreign files is refused and left untouched.
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "thesis.tex"), []byte("precious"), 0o644)
	if _, err := Generate(foreign, cfg); err == nil {
		t.Error("Generate into a foreign non-empty directory succeeded")
	}
	if b, _ := os.ReadFile(filepath.Join(foreign, "thesis.tex")); string(b) != "precious" {
		t.Error("foreign file touched")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Files: 1000, MaxTotal: 1000},
		{MedianSize: 1 << 20, MaxSize: 1 << 10},
		{MaxSize: 100},
	} {
		if _, err := Generate(t.TempDir(), cfg); err == nil {
			t.Errorf("Generate(%+v) succeeded", cfg)
		}
	}
}

func mustGen(t *testing.T, cfg Config) string {
	d, _ := gen(t, cfg)
	return d
}

func mtime(t *testing.T, p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime().UnixNano()
}
