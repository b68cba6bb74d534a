package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The regression guard. bench/compare.sh keeps its accepted results in the
// repository (bench/results/accepted.jsonl, one summary per line, oldest
// first) and checks every new run against the last of them: a comparison
// whose ratio falls outside what those runs measured is flagged, so a change
// that costs shoal its lead (or one that moves it past anything seen, which
// should then be accepted) does not go by unnoticed. Seen as it is on a
// shared machine, a flag is a prompt to look and rerun, not a verdict.

// DefaultGuardRuns is how many of the last accepted runs the guard reads.
const DefaultGuardRuns = 5

// MaxAcceptLoad is the highest 1-minute load average (before the run) at
// which `report accept` takes a run into the history without --force: a run
// on a busy machine would widen the spread until nothing is flagged.
const MaxAcceptLoad = 1.5

// Guard outcomes.
const (
	GuardOK       = "ok"
	GuardBelow    = "REGRESSION: below the spread"
	GuardAbove    = "above the spread (accept to raise the bar)"
	GuardNoRecord = "no accepted run"
)

// GuardFlag is the guard's finding for one comparison at one size.
type GuardFlag struct {
	Comparison string
	Size       string
	// Now is the lowest median of the new run's layouts (a regression in
	// any layout counts), NowHigh the highest.
	Now, NowHigh float64
	// Low and High are the lowest and highest round of the accepted runs
	// read (every layout), Medians their medians, newest last.
	Low, High float64
	Medians   []float64
	Outcome   string
}

// Guard compares rep with the last n entries of hist (oldest first): for
// each comparison and size of rep, the spread is the range of the per-round
// ratios of the accepted runs that measured it; a new median below its
// lowest round is a regression, one above its highest round is flagged too.
func Guard(rep *Report, hist []Report, n int) []GuardFlag {
	if n > 0 && len(hist) > n {
		hist = hist[len(hist)-n:]
	}
	type key struct{ c, s string }
	var order []key
	flags := map[key]*GuardFlag{}
	for _, r := range rep.Rows {
		k := key{r.Comparison, r.Size}
		f := flags[k]
		if f == nil {
			f = &GuardFlag{Comparison: r.Comparison, Size: r.Size, Now: r.Ratio.Median, NowHigh: r.Ratio.Median,
				Low: math.Inf(1), High: math.Inf(-1)}
			flags[k] = f
			order = append(order, k)
		}
		f.Now, f.NowHigh = min(f.Now, r.Ratio.Median), max(f.NowHigh, r.Ratio.Median)
	}
	for _, h := range hist {
		seen := map[key][]float64{}
		for _, r := range h.Rows {
			k := key{r.Comparison, r.Size}
			f := flags[k]
			if f == nil {
				continue
			}
			f.Low, f.High = min(f.Low, r.Ratio.Min), max(f.High, r.Ratio.Max)
			seen[k] = append(seen[k], r.Ratio.Median)
		}
		for k, ms := range seen {
			flags[k].Medians = append(flags[k].Medians, median(ms))
		}
	}
	out := make([]GuardFlag, 0, len(order))
	for _, k := range order {
		f := *flags[k]
		switch {
		case len(f.Medians) == 0:
			f.Outcome = GuardNoRecord
		case f.Now < f.Low:
			f.Outcome = GuardBelow
		case f.NowHigh > f.High:
			f.Outcome = GuardAbove
		default:
			f.Outcome = GuardOK
		}
		out = append(out, f)
	}
	return out
}

// Regressions counts the flags below the spread.
func Regressions(fs []GuardFlag) int {
	n := 0
	for _, f := range fs {
		if f.Outcome == GuardBelow {
			n++
		}
	}
	return n
}

// GuardMarkdown writes the guard's table: one line per comparison and size.
func GuardMarkdown(w io.Writer, fs []GuardFlag, runs int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| comparison | size | this run (median, lowest layout) | last %d accepted: rounds low – high | their medians | guard |\n", runs)
	b.WriteString("|---|---|---:|---:|---|---|\n")
	for _, f := range fs {
		if f.Outcome == GuardNoRecord {
			fmt.Fprintf(&b, "| %s | %s | %.2f | – | – | %s |\n", f.Comparison, f.Size, f.Now, f.Outcome)
			continue
		}
		ms := make([]string, len(f.Medians))
		for i, m := range f.Medians {
			ms[i] = strconv.FormatFloat(m, 'f', 2, 64)
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f – %.2f | %s | %s |\n", f.Comparison, f.Size, f.Now, f.Low, f.High,
			strings.Join(ms, ", "), f.Outcome)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ReadHistory parses the accepted runs: one summary (Report) per line,
// oldest first; blank lines are skipped.
func ReadHistory(r io.Reader) ([]Report, error) {
	var hist []Report
	err := eachLine(r, "history", 16<<20, func(line string) error {
		rep, err := ReadReport(strings.NewReader(line))
		if err != nil {
			return err
		}
		hist = append(hist, *rep)
		return nil
	})
	return hist, err
}

// AcceptLine is rep as one history line, or an error when its run was made
// on a machine busier than maxLoad (the first number of its
// loadavg_before) and force is not set.
func AcceptLine(rep *Report, maxLoad float64, force bool) ([]byte, error) {
	if !force {
		f := strings.Fields(rep.Meta["loadavg_before"])
		if len(f) == 0 {
			return nil, errors.New("the run records no loadavg_before: accept it with --force if it ran on a quiet machine")
		}
		l, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("loadavg_before %q: %w", rep.Meta["loadavg_before"], err)
		}
		if l >= maxLoad {
			return nil, fmt.Errorf("the run started at load average %g (≥ %g): its spread would hide regressions; rerun on a quiet machine or --force", l, maxLoad)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("encoding the accepted run: %w", err)
	}
	return append(b, '\n'), nil
}
