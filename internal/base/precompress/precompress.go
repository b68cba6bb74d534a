// Package precompress writes "name.br" and "name.gz" next to the text files
// of a site root, the precompressed variants a shoal node serves in place of
// "name" to clients that accept the coding (nginx's brotli_static and
// gzip_static). Compressing once at publish time with the best
// settings costs nothing per request, where on-the-fly compression would
// cost CPU on every response and break sendfile and the 0-allocation cache.
//
// A variant gets its source's modification time, so Last-Modified is the
// same for every encoding while the ETag (mtime and size) differs; the node
// ignores a variant older than its source, so a file edited after the last
// run is never shadowed by stale compressed bytes. Writes are atomic (a
// temporary file renamed into place), and a variant that would not be
// smaller than its source is not kept.
package precompress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
)

// Config selects what Dir compresses. Zero fields take the defaults.
type Config struct {
	// Extensions are the file extensions (with the dot, lower case) that
	// hold text worth compressing. Default DefaultExtensions.
	Extensions []string
	// MinSize skips files smaller than this many bytes, where the coding's
	// framing eats the gain. Default 256.
	MinSize int64
	// GzipLevel is the gzip level, 1..9. Default 9: compression happens
	// once, decompression speed does not depend on it.
	GzipLevel int
	// BrotliQuality is the brotli quality, 0..11. Default 11.
	BrotliQuality int
	// NoGzip and NoBrotli skip one of the codings.
	NoGzip, NoBrotli bool
}

// DefaultExtensions are the text types of the web (HTML, CSS, JavaScript,
// JSON, XML and SVG, plain text, source maps, manifests and feeds) — what
// nginx sites usually list in gzip_types.
var DefaultExtensions = []string{
	".html", ".htm", ".css", ".js", ".mjs", ".json", ".xml", ".svg", ".txt",
	".csv", ".md", ".map", ".webmanifest", ".rss", ".atom", ".ics", ".vtt",
}

// Defaults for Config.
const (
	DefaultMinSize       = 256
	DefaultGzipLevel     = 9
	DefaultBrotliQuality = 11
)

func (c *Config) withDefaults() {
	if c.Extensions == nil {
		c.Extensions = DefaultExtensions
	}
	if c.MinSize <= 0 {
		c.MinSize = DefaultMinSize
	}
	if c.GzipLevel == 0 {
		c.GzipLevel = DefaultGzipLevel
	}
	if c.BrotliQuality == 0 {
		c.BrotliQuality = DefaultBrotliQuality
	}
}

// Stats reports one run.
type Stats struct {
	Files   int   // text files considered
	Written int   // variants written
	Current int   // variants already up to date
	Dropped int   // variants not kept because they were not smaller
	InBytes int64 // bytes of the text files considered
	GzBytes int64 // bytes of their gzip variants (written or current)
	BrBytes int64 // bytes of their brotli variants
}

// Dir compresses every eligible regular file under root. Symbolic links
// are not followed, and existing .gz/.br files are never compressed again.
func Dir(root string, cfg Config) (Stats, error) {
	cfg.withDefaults()
	if cfg.GzipLevel < 1 || cfg.GzipLevel > 9 {
		return Stats{}, fmt.Errorf("precompress: gzip level %d not in 1..9", cfg.GzipLevel)
	}
	if cfg.BrotliQuality < 0 || cfg.BrotliQuality > 11 {
		return Stats{}, fmt.Errorf("precompress: brotli quality %d not in 0..11", cfg.BrotliQuality)
	}
	exts := map[string]bool{}
	for _, e := range cfg.Extensions {
		exts[strings.ToLower(e)] = true
	}
	var st Stats
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || !exts[strings.ToLower(filepath.Ext(p))] {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("precompress: %w", err)
		}
		if info.Size() < cfg.MinSize {
			return nil
		}
		st.Files++
		st.InBytes += info.Size()
		var src []byte // read once, on the first variant that needs it
		for _, v := range []struct {
			suffix string
			skip   bool
			total  *int64
			enc    func(w io.Writer, b []byte) error
		}{
			{".gz", cfg.NoGzip, &st.GzBytes, func(w io.Writer, b []byte) error { return gzipTo(w, b, cfg.GzipLevel) }},
			{".br", cfg.NoBrotli, &st.BrBytes, func(w io.Writer, b []byte) error { return brotliTo(w, b, cfg.BrotliQuality) }},
		} {
			if v.skip {
				continue
			}
			dst := p + v.suffix
			if vi, err := os.Lstat(dst); err == nil && vi.Mode().IsRegular() && vi.ModTime().Equal(info.ModTime()) {
				st.Current++
				*v.total += vi.Size()
				continue
			}
			if src == nil {
				if src, err = os.ReadFile(p); err != nil {
					return fmt.Errorf("precompress: %w", err)
				}
			}
			var buf bytes.Buffer
			if err := v.enc(&buf, src); err != nil {
				return fmt.Errorf("precompress: %s%s: %w", p, v.suffix, err)
			}
			if int64(buf.Len()) >= int64(len(src)) {
				st.Dropped++
				if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("precompress: %w", err)
				}
				continue
			}
			if err := writeAtomic(dst, buf.Bytes(), info.Mode().Perm(), info.ModTime()); err != nil {
				return err
			}
			st.Written++
			*v.total += int64(buf.Len())
		}
		return nil
	})
	return st, err
}

// gzipTo compresses b without a name or time in the header, so the same
// input always gives the same bytes (and the same size, hence ETag).
func gzipTo(w io.Writer, b []byte, level int) error {
	zw, err := gzip.NewWriterLevel(w, level)
	if err != nil {
		return err
	}
	if _, err := zw.Write(b); err != nil {
		return err
	}
	return zw.Close()
}

func brotliTo(w io.Writer, b []byte, quality int) error {
	bw := brotli.NewWriterLevel(w, quality)
	if _, err := bw.Write(b); err != nil {
		return err
	}
	return bw.Close()
}

// writeAtomic writes b to a temporary file next to dst, gives it the mode
// and modification time, and renames it over dst, so a node scanning the
// root never sees half a variant.
func writeAtomic(dst string, b []byte, perm fs.FileMode, mtime time.Time) error {
	f, err := os.CreateTemp(filepath.Dir(dst), ".precompress-*")
	if err != nil {
		return fmt.Errorf("precompress: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Chtimes(tmp, mtime, mtime)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		return fmt.Errorf("precompress: %s: %w", dst, err)
	}
	return nil
}
