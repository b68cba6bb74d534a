package site

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"shoal/internal/base/content"
)

// FromSizes writes a site whose files are exactly the URLs of sizes, each
// with its size in bytes, so that a real access log (trace.Sizes) can be
// replayed against a live cluster and hit real files: the NASA trace served
// by `shoal up --site-from-trace`. Each file is named by content.ObjectKey
// (the key the simulator and the front use too): a URL ending in "/"
// becomes that directory's index.html, a query is dropped. URLs that cannot
// be files are skipped and counted: ones content.ObjectKey refuses, hidden names, zero sizes, and a file whose
// name is also a directory prefix of another URL (the directory wins, since
// it holds more of the trace). Existing files of the right size are kept, so
// a second run is fast. Like Generate, it refuses a non-empty directory that
// it did not write.
func FromSizes(dir string, sizes map[string]int64) (written, skipped int, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, fmt.Errorf("site %s: %w", dir, err)
	}
	mark := filepath.Join(dir, traceMarker)
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		if _, err := os.Stat(mark); err != nil {
			return 0, 0, fmt.Errorf("site %s: directory is not empty and holds no trace site; refusing to write into it", dir)
		}
	}
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		return 0, 0, fmt.Errorf("site %s: %w", dir, err)
	}

	files := map[string]int64{}
	dirs := map[string]bool{"/": true}
	for raw, size := range sizes {
		u, ok := content.ObjectKey(raw)
		if !ok || size <= 0 || strings.Contains(u, "/.") {
			skipped++
			continue
		}
		files[u] = max(files[u], size)
		for d := path.Dir(u); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	urls := make([]string, 0, len(files))
	for u := range files {
		if dirs[u] {
			skipped++
			continue
		}
		urls = append(urls, u)
	}
	slices.Sort(urls)
	pattern := bytes.Repeat([]byte("shoal trace-replay filler 0123456789\n"), 1<<10)
	for _, u := range urls {
		p := filepath.Join(dir, filepath.FromSlash(u))
		if fi, err := os.Stat(p); err == nil && fi.Size() == files[u] {
			written++
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return written, skipped, fmt.Errorf("site %s: %w", dir, err)
		}
		if err := writeSized(p, files[u], pattern); err != nil {
			return written, skipped, fmt.Errorf("site %s: %w", dir, err)
		}
		written++
	}
	if written == 0 {
		return 0, skipped, errors.New("site: no URL of the trace could be written as a file")
	}
	return written, skipped, nil
}

// traceMarker marks a directory written by FromSizes. It is a dot-file, so
// the content store never serves it.
const traceMarker = ".shoal-trace-site"

func writeSized(p string, size int64, pattern []byte) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	for left := size; left > 0; {
		n := min(left, int64(len(pattern)))
		if _, err := f.Write(pattern[:n]); err != nil {
			f.Close()
			return err
		}
		left -= n
	}
	return f.Close()
}
