package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"shoal/internal/base/precompress"
)

func init() {
	register("compress", "write name.br and name.gz next to a site's text files (served by nodes to clients that accept them)", runCompress)
}

func runCompress(args []string) error {
	fs := newFlags("compress", "[flags] DIR", "Precompress the text files of a site root: nodes serve name.br / name.gz in place of name\nto clients that accept the coding, like nginx's brotli_static and gzip_static")
	var cfg precompress.Config
	exts := fs.String("ext", strings.Join(precompress.DefaultExtensions, ","), "comma-separated file extensions to compress")
	fs.Int64Var(&cfg.MinSize, "min-size", precompress.DefaultMinSize, "skip files smaller than this many bytes")
	fs.IntVar(&cfg.GzipLevel, "gzip-level", precompress.DefaultGzipLevel, "gzip level, 1..9")
	fs.IntVar(&cfg.BrotliQuality, "brotli-quality", precompress.DefaultBrotliQuality, "brotli quality, 0..11")
	fs.BoolVar(&cfg.NoGzip, "no-gzip", false, "do not write .gz files")
	fs.BoolVar(&cfg.NoBrotli, "no-brotli", false, "do not write .br files")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want exactly one DIR (see 'shoal compress --help')")
	}
	for _, e := range splitList(*exts) {
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		cfg.Extensions = append(cfg.Extensions, e)
	}
	if cfg.Extensions == nil {
		cfg.Extensions = []string{}
	}
	st, err := precompress.Dir(fs.Arg(0), cfg)
	if err != nil {
		return err
	}
	pct := func(n int64) string {
		if st.InBytes == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(st.InBytes))
	}
	fmt.Fprintf(os.Stdout, "%d text files, %d bytes: %d variants written, %d current, %d not smaller (dropped); gzip %d bytes (%s), brotli %d bytes (%s)\n",
		st.Files, st.InBytes, st.Written, st.Current, st.Dropped, st.GzBytes, pct(st.GzBytes), st.BrBytes, pct(st.BrBytes))
	return nil
}
