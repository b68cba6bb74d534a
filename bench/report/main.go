// Command report turns the per-run JSON Lines written by the benchmark
// scripts under bench/ (JSON_OUT=FILE) into the side-by-side ratio table of
// bench/compare.sh: a summary JSON (bench/results/latest.json), a Markdown
// table, and a grouped bar plot of the ratios (SVG/PNG, gonum.org/v1/plot).
// SPEC §7: every performance claim is a ratio against a peer measured in
// the same run, quoted with its spread.
//
// Usage:
//
//	go run ./bench/report summarize --runs runs.jsonl --out latest.json [--meta k=v ...]
//	go run ./bench/report table --in latest.json
//	go run ./bench/report plot --in latest.json --out latest.svg [--out latest.png]
//	go run ./bench/report crossover --runs crossover-runs.jsonl --out crossover.json [--md F] [--plot F.svg]
//	go run ./bench/report guard --in latest.json --history accepted.jsonl [--last 5]
//	go run ./bench/report accept --in latest.json --history accepted.jsonl [--force]
//
// summarize and table print the Markdown table on stdout. guard prints the
// regression guard's table (guard.go) and exits with status 3 when a ratio
// fell below the spread of the last accepted runs; accept appends a run to
// those (refusing one made on a busy machine without --force).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const usage = `Usage: report <summarize|table|plot|crossover|guard|accept> [flags]

  summarize --runs FILE --out FILE [--meta key=value ...]   per-run JSON Lines → summary JSON + Markdown table
  table     --in FILE                                       summary JSON → Markdown table
  plot      --in FILE --out FILE.svg [--out FILE.png]       summary JSON → grouped bar plot of the ratios
  crossover --runs FILE --out FILE [--md FILE] [--plot FILE.svg ...] [--meta key=value ...]
            bench/crossover.sh's runs → seed 002 crossover table, summary JSON, curve plot
  guard     --in FILE --history FILE [--last N]             summary JSON against the last N accepted runs (exit 3: regression)
  accept    --in FILE --history FILE [--force] [--max-load L]  append the summary to the accepted runs
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "report: %v\n", err)
		if errors.Is(err, errRegression) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}

// errRegression is guard's error when a ratio fell below the spread.
var errRegression = errors.New("regression")

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("missing mode")
	}
	switch args[0] {
	case "crossover":
		return runCrossover(args[1:], stdout)
	case "guard", "accept":
		return runGuard(args[0], args[1:], stdout)
	}
	fs := flag.NewFlagSet("report "+args[0], flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	switch args[0] {
	case "summarize":
		runsPath := fs.String("runs", "", "per-run JSON Lines (the JSON_OUT of the bench scripts)")
		out := fs.String("out", "", "summary JSON to write")
		var meta list
		fs.Var(&meta, "meta", "key=value recorded in the summary's meta (repeatable)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *runsPath == "" || *out == "" {
			return errors.New("summarize needs --runs and --out")
		}
		runs, err := readRunsFile(*runsPath, ReadRuns)
		if err != nil {
			return err
		}
		rows, dropped, err := Summarize(runs)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return fmt.Errorf("%s: every run failed: %s", *runsPath, strings.Join(dropped, "; "))
		}
		rep := Report{Schema: Schema, Meta: map[string]string{}, Rows: rows, Verdicts: Judge(rows)}
		if len(dropped) > 0 {
			rep.Meta["dropped"] = strings.Join(dropped, "; ")
			fmt.Fprintf(os.Stderr, "report: left out %d failed runs: %s\n", len(dropped), rep.Meta["dropped"])
		}
		if err := addMeta(rep.Meta, meta); err != nil {
			return err
		}
		if err := writeJSON(*out, rep); err != nil {
			return err
		}
		return tables(stdout, &rep)
	case "table", "plot":
		in := fs.String("in", "", "summary JSON (from summarize)")
		var outs list
		if args[0] == "plot" {
			fs.Var(&outs, "out", "image to write: .svg, .png or .pdf (repeatable)")
		}
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *in == "" {
			return errors.New("--in is required")
		}
		rep, err := readReportFile(*in)
		if err != nil {
			return err
		}
		if args[0] == "table" {
			return tables(stdout, rep)
		}
		if len(outs) == 0 {
			return errors.New("plot needs at least one --out")
		}
		return Plot(rep, outs...)
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown mode %q", args[0])
}

// tables writes the ratio table and, below it, the verdicts.
func tables(w io.Writer, rep *Report) error {
	if err := Markdown(w, rep.Rows); err != nil {
		return err
	}
	if len(rep.Verdicts) == 0 {
		return nil
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	return VerdictMarkdown(w, rep.Verdicts)
}

// readRunsFile reads a JSON Lines file of runs with read (ReadRuns or
// ReadXRuns), refusing a file that holds none.
func readRunsFile[T any](path string, read func(io.Reader) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	runs, err := read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s: no runs", path)
	}
	return runs, nil
}

// addMeta adds each --meta key=value to m.
func addMeta(m map[string]string, kvs []string) error {
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--meta %q: want key=value", kv)
		}
		m[k] = v
	}
	return nil
}

// writeJSON writes v to path as indented JSON (the summary files).
func writeJSON(path string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encoding summary: %w", err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// runGuard is the guard and accept modes.
func runGuard(mode string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("report "+mode, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	in := fs.String("in", "", "summary JSON (from summarize)")
	histPath := fs.String("history", "", "the accepted runs, JSON Lines (bench/results/accepted.jsonl)")
	last := fs.Int("last", DefaultGuardRuns, "guard: how many of the last accepted runs to compare with")
	force := fs.Bool("force", false, "accept: take the run whatever the load it ran under")
	maxLoad := fs.Float64("max-load", MaxAcceptLoad, "accept: the highest 1-minute load average before the run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *histPath == "" {
		return fmt.Errorf("%s needs --in and --history", mode)
	}
	rep, err := readReportFile(*in)
	if err != nil {
		return err
	}
	if mode == "accept" {
		line, err := AcceptLine(rep, *maxLoad, *force)
		if err != nil {
			return err
		}
		hf, err := os.OpenFile(*histPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if _, err := hf.Write(line); err != nil {
			hf.Close()
			return fmt.Errorf("%s: %w", *histPath, err)
		}
		return hf.Close()
	}
	var hist []Report
	if hf, err := os.Open(*histPath); err == nil {
		hist, err = ReadHistory(hf)
		hf.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *histPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	flags := Guard(rep, hist, *last)
	if err := GuardMarkdown(stdout, flags, min(len(hist), *last)); err != nil {
		return err
	}
	if n := Regressions(flags); n > 0 {
		return fmt.Errorf("%d comparison(s) below the spread of the last accepted runs: %w", n, errRegression)
	}
	return nil
}

// readReportFile reads the summary (Report) at path.
func readReportFile(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep, err := ReadReport(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rep, nil
}
