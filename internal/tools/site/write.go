package site

import (
	"bufio"
	"fmt"
	"html"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

const (
	poolSize     = 1 << 20 // binary pool; files larger than this repeat it
	textPoolSize = 1 << 16
)

var words = strings.Fields(`shoal cluster node front cache object request reply
	byte budget frequency size cost clock victim replica ring finger token peer
	handoff relay redirect weight round robin load feedback health latency trace
	replay window segment server client socket kernel buffer header range entity
	tag modified version publish atomic table content tree index page image
	script style note video sample heavy tail body median pareto lognormal`)

// pools holds the content bytes every file is cut from.
type pools struct {
	bin, text []byte
}

func newPools(seed int64) pools {
	r := rand.New(rand.NewPCG(uint64(seed), 0x706f6f6c)) // "pool", independent of plan
	bin := make([]byte, poolSize)
	for i := 0; i < len(bin); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			bin[i+j] = byte(v >> (8 * j))
		}
	}
	text := make([]byte, 0, textPoolSize+16)
	for n := 0; len(text) < textPoolSize; n++ {
		text = append(text, words[r.IntN(len(words))]...)
		if n%12 == 11 {
			text = append(text, '\n')
		} else {
			text = append(text, ' ')
		}
	}
	return pools{bin: bin, text: text[:textPoolSize]}
}

// fill appends n bytes of src starting at off, wrapping around.
func fill(dst, src []byte, off, n int) []byte {
	off %= len(src)
	for n > 0 {
		c := min(n, len(src)-off)
		dst = append(dst, src[off:off+c]...)
		n -= c
		off = 0
	}
	return dst
}

// render builds the bytes of f into buf[:0]: a small type-appropriate header
// and footer around filler cut from the pools, exactly f.size bytes long.
func render(buf []byte, f planned, p pools) []byte {
	var head, foot string
	src := p.text
	switch f.kind.ext {
	case ".html":
		name := path.Base(f.url)
		head = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + name +
			"</title></head>\n<body><h1>" + name + "</h1>\n<p>"
		foot = "</p>\n<p><a href=\"/index.html\">home</a></p>\n</body></html>\n"
	case ".css":
		head, foot = "/* "+f.url+"\n", "\n*/\nbody { margin: 0 }\n"
	case ".js":
		head, foot = "// "+f.url+"\n/*\n", "\n*/\n"
	case ".png":
		head, src = "\x89PNG\r\n\x1a\n", p.bin // PNG signature, then noise
	case ".bin":
		src = p.bin
	}
	n := int(f.size)
	if len(head)+len(foot) > n {
		head, foot = "", ""
	}
	buf = append(buf[:0], head...)
	buf = fill(buf, src, f.off, n-len(head)-len(foot))
	return append(buf, foot...)
}

// write generates the site for cfg into the prepared dir. Files are written
// by GOMAXPROCS workers: on ext4 creating a file costs about a millisecond of
// kernel time (measured on the 2-core CI VM), which dominates generation, and
// creation in different directories scales with cores.
func write(dir string, cfg Config) (Summary, error) {
	files := plan(cfg)
	pl := newPools(cfg.Seed)
	made := map[string]bool{}
	for _, f := range files {
		d := filepath.Dir(filepath.Join(dir, filepath.FromSlash(f.url)))
		if !made[d] {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return Summary{}, err
			}
			made[d] = true
		}
	}
	workers := min(max(runtime.GOMAXPROCS(0), 1), 8)
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		errMu sync.Mutex
		first error
	)
	for range workers {
		wg.Go(func() {
			var buf []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				f := files[i]
				buf = render(buf, f, pl)
				if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(f.url)), buf, 0o644); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					next.Store(int64(len(files))) // stop the other workers
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return Summary{}, first
	}
	manifest := make([]File, 0, len(files)+64)
	for _, f := range files {
		manifest = append(manifest, File{URL: f.url, Size: f.size})
	}
	pages, err := writeIndexes(dir, files)
	if err != nil {
		return Summary{}, err
	}
	manifest = append(manifest, pages...)
	slices.SortFunc(manifest, func(a, b File) int { return strings.Compare(a.URL, b.URL) })
	if err := writeManifest(dir, cfg, manifest); err != nil {
		return Summary{}, err
	}
	if err := os.Remove(filepath.Join(dir, markerName)); err != nil {
		return Summary{}, err
	}
	return summarize(dir, manifest), nil
}

// writeIndexes writes one index.html per directory: the root's links to every
// section index and to every content file, the others to their children.
func writeIndexes(dir string, files []planned) ([]File, error) {
	kids := map[string][]string{} // dir URL → child URLs (files, and subdir index pages)
	seen := map[string]bool{"/": true}
	for _, f := range files {
		d := path.Dir(f.url)
		kids[d] = append(kids[d], f.url)
		for d != "/" && !seen[d] {
			seen[d] = true
			parent := path.Dir(d)
			kids[parent] = append(kids[parent], d+"/index.html")
			d = parent
		}
	}
	var all []string
	for _, f := range files {
		all = append(all, f.url)
	}
	var out []File
	for d, list := range kids {
		slices.Sort(list)
		var b strings.Builder
		title := "shoal sample site " + d
		b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.EscapeString(title) +
			"</title></head>\n<body><h1>" + html.EscapeString(title) + "</h1>\n<ul>\n")
		for _, u := range list {
			fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString(u), html.EscapeString(u))
		}
		b.WriteString("</ul>\n")
		if d == "/" {
			b.WriteString("<h2>All files</h2>\n<ul>\n")
			for _, u := range all {
				fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString(u), html.EscapeString(u))
			}
			b.WriteString("</ul>\n")
		}
		b.WriteString("</body></html>\n")
		u := path.Join(d, "index.html")
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(u)), []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		out = append(out, File{URL: u, Size: int64(b.Len())})
	}
	return out, nil
}

// writeManifest writes manifest.txt via a temporary file and rename, so a
// manifest on disk always describes a complete site.
func writeManifest(dir string, cfg Config, files []File) error {
	sum := summarize(dir, files)
	tmp := filepath.Join(dir, manifestName+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "%s\nconfig %s\n# files %d bytes %d pages %d page_bytes %d median %d max %d\n# <size> <url>\n",
		manifestHead, cfg, sum.Files, sum.Bytes, sum.Pages, sum.PageBytes, sum.MedianSize, sum.MaxSize)
	for _, fl := range files {
		fmt.Fprintf(w, "%d %s\n", fl.Size, fl.URL)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, manifestName))
}
