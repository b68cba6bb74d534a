package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"shoal/internal/base/trace"
)

func init() {
	register("trace", "access-log tools: workload statistics and synthetic Zipf traces", runTrace)
}

const traceUsage = `Usage: shoal trace <mode> [flags]

Modes:
  stats FILE   requests, unique URLs and bytes, Zipf α, one-timers, bytes covering 90/95/99 % of requests
  gen          write a synthetic CLF trace (Zipf popularity, lognormal/Pareto sizes, fixed seed)

Run 'shoal trace <mode> --help' for the flags of one mode.
`

func runTrace(args []string) error {
	return runMode(args, traceUsage, map[string]func([]string) error{"stats": traceStats, "gen": traceGen})
}

func traceStats(args []string) error {
	fs := newFlags("trace stats", "[--json] FILE", "Summarise an access log (CLF or EPA, plain or gzip) for cache sizing")
	asJSON := fs.Bool("json", false, "print the summary as a JSON object")
	// Flags may come before or after FILE.
	var files []string
	for {
		if help, err := parseFlags(fs, args); help || err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 {
		fs.Usage()
		return errors.New("need exactly one trace file")
	}
	r, err := trace.Open(files[0])
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := trace.Stats(r)
	if err != nil {
		return fmt.Errorf("%s: %w", files[0], err)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	mib := func(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
	pct := func(n, of int64) string {
		if of == 0 {
			return ""
		}
		return fmt.Sprintf("(%.1f %%)", 100*float64(n)/float64(of))
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "requests\t%d\n", s.Requests)
	fmt.Fprintf(tw, "malformed lines\t%d\n", s.Malformed)
	if s.NoRequest > 0 {
		fmt.Fprintf(tw, "answers without a request\t%d (refused or timed out before a request; not replayed)\n", s.NoRequest)
	}
	fmt.Fprintf(tw, "unique URLs\t%d (%d with a 200 response)\n", s.UniqueURLs, s.SizedURLs)
	fmt.Fprintf(tw, "unique bytes\t%s\n", mib(s.UniqueBytes))
	fmt.Fprintf(tw, "transferred bytes\t%s\n", mib(s.TransferredBytes))
	fmt.Fprintf(tw, "one-timers\t%d %s\n", s.OneTimers, pct(int64(s.OneTimers), int64(s.UniqueURLs)))
	fmt.Fprintf(tw, "Zipf α (estimate)\t%.3f\n", s.ZipfAlpha)
	fmt.Fprintf(tw, "bytes for 90 %% of requests\t%s\n", mib(s.Cover90))
	fmt.Fprintf(tw, "bytes for 95 %% of requests\t%s\n", mib(s.Cover95))
	fmt.Fprintf(tw, "bytes for 99 %% of requests\t%s\n", mib(s.Cover99))
	if len(s.Sites) > 0 {
		fmt.Fprintf(tw, "\nsite\trequests\tunique URLs\ttransferred\n")
		for _, sc := range s.Sites {
			fmt.Fprintf(tw, "%s\t%d %s\t%d\t%s\n", sc.Site, sc.Requests, pct(sc.Requests, s.Requests), sc.UniqueURLs, mib(sc.TransferredBytes))
		}
	}
	return tw.Flush()
}

func traceGen(args []string) error {
	fs := newFlags("trace gen", "[--files N] [--alpha α] [--requests N] [--seed S] [--out FILE]",
		"Write a synthetic Common Log Format trace: Zipf(α) popularity over N files, lognormal body + Pareto tail sizes (SURGE), Poisson arrivals")
	var s trace.Synth
	fs.IntVar(&s.Files, "files", 10000, "distinct files")
	fs.Float64Var(&s.Alpha, "alpha", 0.8, "Zipf exponent α > 0")
	fs.IntVar(&s.Requests, "requests", 100000, "requests to write")
	fs.Int64Var(&s.Seed, "seed", 1, "random seed; equal seeds give identical traces")
	fs.Int64Var(&s.MeanSize, "mean-size", 11000, "mean of the lognormal size body, bytes")
	fs.Float64Var(&s.TailFraction, "tail", 0.07, "share of files in the Pareto tail (< 1)")
	fs.Float64Var(&s.Rate, "rate", 100, "mean requests per second (timestamps)")
	fs.IntVar(&s.Sites, "sites", 0, "spread the files over N virtual hosts (site1.example ...), written as a first field; 0 = one site")
	out := fs.String("out", "-", "output file (- = stdout)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if s.Sites < 0 {
		return fmt.Errorf("--sites %d: want 0 or more", s.Sites)
	}
	if s.Files <= 0 || s.Requests <= 0 || s.Alpha <= 0 || s.MeanSize <= 0 || s.Rate <= 0 || s.TailFraction <= 0 {
		return errors.New("--files, --requests, --alpha, --mean-size, --tail and --rate must be positive")
	}
	g, err := s.New()
	if err != nil {
		return err
	}
	var w io.Writer = os.Stdout
	var f *os.File
	if *out != "-" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	var line []byte
	for {
		rec, err := g.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		line = trace.AppendCLF(line[:0], rec)
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if f != nil {
		return f.Close()
	}
	return nil
}
