package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The crossover mode summarises bench/crossover.sh, seed 002's experiment:
// per concurrency level, relay against a handoff path through internal/cluster/l4's
// front — passfd (same host) or repair (across hosts, bench/crossover.sh
// with LAB=1) — and the first level at which the handoff's mean time per
// operation drops below relay's (the paper's crossover, 45 threads).

// CrossoverSchema tags crossover.json so a reader can refuse other files.
const CrossoverSchema = "shoal-crossover/2"

// XRun is one line of crossover-runs.jsonl: one path at one level, one run.
type XRun struct {
	Level           int     `json:"level"`
	Path            string  `json:"path"` // relay, and passfd or repair
	Run             int     `json:"run"`
	Ops             uint64  `json:"ops"`
	OpsPerSec       float64 `json:"ops_per_sec"`
	MeanMS          float64 `json:"mean_ms"`
	P50MS           float64 `json:"p50_ms"`
	P99MS           float64 `json:"p99_ms"`
	Errors          uint64  `json:"errors"`
	FrontCPUUSPerOp float64 `json:"front_cpu_us_per_op"`
}

// XSide is one path at one level over its runs: the spread of each number.
type XSide struct {
	OpsPerSec Spread `json:"ops_per_sec"`
	MeanMS    Spread `json:"mean_ms"`
	P99MS     Spread `json:"p99_ms"`
	// FrontCPUUS is the front's CPU time per operation in µs.
	FrontCPUUS Spread `json:"front_cpu_us_per_op"`
	Errors     uint64 `json:"errors"`
}

// XRow is one level: both paths and the paired per-run ratio of the
// handoff's ops/s to relay's (> 1: the handoff ahead).
type XRow struct {
	Level   int    `json:"level"`
	Runs    int    `json:"runs"`
	Relay   XSide  `json:"relay"`
	Handoff XSide  `json:"handoff"`
	Ratio   Spread `json:"handoff_over_relay_ops"`
	// HandoffWins: the handoff's median mean time per operation is below
	// relay's.
	HandoffWins bool `json:"handoff_wins"`
}

// XReport is crossover.json.
type XReport struct {
	Schema string            `json:"schema"`
	Meta   map[string]string `json:"meta"`
	// HandoffPath names the handoff side: passfd or repair.
	HandoffPath string `json:"handoff_path"`
	Rows        []XRow `json:"rows"`
	// Crossover is the first level at which the handoff wins, 0 for none.
	Crossover int `json:"crossover"`
	// WinsAbove: the handoff also wins at every level above Crossover.
	WinsAbove bool `json:"handoff_wins_at_every_higher_level"`
}

// ReadXRuns parses crossover-runs.jsonl.
func ReadXRuns(r io.Reader) ([]XRun, error) {
	var runs []XRun
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var x XRun
		if err := json.Unmarshal(b, &x); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if x.Path != "relay" && x.Path != "passfd" && x.Path != "repair" {
			return nil, fmt.Errorf("line %d: path %q (want relay, passfd or repair)", line, x.Path)
		}
		if x.Level <= 0 {
			return nil, fmt.Errorf("line %d: level %d", line, x.Level)
		}
		runs = append(runs, x)
	}
	return runs, sc.Err()
}

func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	return Spread{Min: c[0], Median: median(c), Max: c[len(c)-1]}
}

func sideOf(rs []XRun) XSide {
	var ops, mean, p99, cpu []float64
	var s XSide
	for _, r := range rs {
		ops, mean, p99, cpu = append(ops, r.OpsPerSec), append(mean, r.MeanMS), append(p99, r.P99MS), append(cpu, r.FrontCPUUSPerOp)
		s.Errors += r.Errors
	}
	s.OpsPerSec, s.MeanMS, s.P99MS, s.FrontCPUUS = spreadOf(ops), spreadOf(mean), spreadOf(p99), spreadOf(cpu)
	return s
}

// SummarizeCrossover groups runs by level and finds the crossover. The runs
// hold relay and one handoff path (passfd or repair, not both); a level
// needs at least one run of each; ratios pair runs by run number.
func SummarizeCrossover(runs []XRun) (*XReport, error) {
	type key struct {
		level int
		path  string
	}
	by := map[key][]XRun{}
	levels := map[int]bool{}
	hp := ""
	for _, r := range runs {
		if r.Path != "relay" {
			if hp != "" && r.Path != hp {
				return nil, fmt.Errorf("runs mix handoff paths %s and %s; summarise one against relay", hp, r.Path)
			}
			hp = r.Path
		}
		by[key{r.Level, r.Path}] = append(by[key{r.Level, r.Path}], r)
		levels[r.Level] = true
	}
	if hp == "" {
		hp = "passfd"
	}
	rep := &XReport{Schema: CrossoverSchema, Meta: map[string]string{}, HandoffPath: hp}
	for l := range levels {
		rel, pfd := by[key{l, "relay"}], by[key{l, hp}]
		if len(rel) == 0 || len(pfd) == 0 {
			return nil, fmt.Errorf("level %d: %d relay and %d %s runs; need both", l, len(rel), len(pfd), hp)
		}
		row := XRow{Level: l, Runs: min(len(rel), len(pfd)), Relay: sideOf(rel), Handoff: sideOf(pfd)}
		relByRun := map[int]float64{}
		for _, r := range rel {
			relByRun[r.Run] = r.OpsPerSec
		}
		var ratios []float64
		for _, p := range pfd {
			if d, ok := relByRun[p.Run]; ok && d > 0 {
				ratios = append(ratios, p.OpsPerSec/d)
			}
		}
		row.Ratio = spreadOf(ratios)
		row.HandoffWins = row.Handoff.MeanMS.Median < row.Relay.MeanMS.Median
		rep.Rows = append(rep.Rows, row)
	}
	sort.Slice(rep.Rows, func(i, j int) bool { return rep.Rows[i].Level < rep.Rows[j].Level })
	for i, r := range rep.Rows {
		if r.HandoffWins {
			rep.Crossover = r.Level
			rep.WinsAbove = true
			for _, q := range rep.Rows[i:] {
				rep.WinsAbove = rep.WinsAbove && q.HandoffWins
			}
			break
		}
	}
	return rep, nil
}

// CrossoverText is the verdict line under the table.
func CrossoverText(rep *XReport) string {
	switch {
	case rep.Crossover == 0:
		return "Crossover: none in range — relay has the lower mean time per operation at every level."
	case len(rep.Rows) > 0 && rep.Crossover == rep.Rows[0].Level && rep.WinsAbove:
		return fmt.Sprintf("Crossover: none in range — %s has the lower mean time per operation at every level, from %d (the lowest measured) up (the paper: relay ahead below 45).", rep.HandoffPath, rep.Crossover)
	case rep.WinsAbove:
		return fmt.Sprintf("Crossover: %d — %s has the lower mean time per operation from there on, relay below (the paper: 45).", rep.Crossover, rep.HandoffPath)
	default:
		return fmt.Sprintf("Crossover: %s first wins at %d but not at every level above it (the paper: 45); see the table.", rep.HandoffPath, rep.Crossover)
	}
}

// CrossoverMarkdown writes the table and the verdict.
func CrossoverMarkdown(w io.Writer, rep *XReport) error {
	var b strings.Builder
	h := rep.HandoffPath
	fmt.Fprintf(&b, "| threads | relay ops/s | %[1]s ops/s | %[1]s ÷ relay ops/s | relay mean ms/op | %[1]s mean ms/op | relay p99 ms | %[1]s p99 ms | front CPU µs/op relay | front CPU µs/op %[1]s | errors relay/%[1]s |\n", h)
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.Rows {
		win := ""
		if r.HandoffWins {
			win = " **"
		}
		fmt.Fprintf(&b, "| %d | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) | %s%.2f%s (%.2f–%.2f) | %.3f (%.3f–%.3f) | %.3f (%.3f–%.3f) | %.2f | %.2f | %.1f | %.1f | %d/%d |\n",
			r.Level,
			r.Relay.OpsPerSec.Median, r.Relay.OpsPerSec.Min, r.Relay.OpsPerSec.Max,
			r.Handoff.OpsPerSec.Median, r.Handoff.OpsPerSec.Min, r.Handoff.OpsPerSec.Max,
			strings.TrimSpace(win), r.Ratio.Median, strings.TrimSpace(win), r.Ratio.Min, r.Ratio.Max,
			r.Relay.MeanMS.Median, r.Relay.MeanMS.Min, r.Relay.MeanMS.Max,
			r.Handoff.MeanMS.Median, r.Handoff.MeanMS.Min, r.Handoff.MeanMS.Max,
			r.Relay.P99MS.Median, r.Handoff.P99MS.Median,
			r.Relay.FrontCPUUS.Median, r.Handoff.FrontCPUUS.Median,
			r.Relay.Errors, r.Handoff.Errors)
	}
	fmt.Fprintf(&b, "\nMedians of %s runs (min–max in brackets); bold ratio: %s has the lower median mean time per operation.\n\n%s\n",
		runsOf(rep), h, CrossoverText(rep))
	_, err := io.WriteString(w, b.String())
	return err
}

func runsOf(rep *XReport) string {
	if len(rep.Rows) == 0 {
		return "0"
	}
	return fmt.Sprint(rep.Rows[0].Runs)
}

// xPoints are one path's medians with min–max whiskers, for the plot.
type xPoints []struct{ x, y, lo, hi float64 }

func (p xPoints) Len() int                        { return len(p) }
func (p xPoints) XY(i int) (float64, float64)     { return p[i].x, p[i].y }
func (p xPoints) YError(i int) (float64, float64) { return p[i].y - p[i].lo, p[i].hi - p[i].y }

// CrossoverPlot draws the mean time per operation of both paths against
// the number of threads on log–log axes, min–max whiskers, and a dashed
// vertical line at the crossover, and saves it to each of outs.
func CrossoverPlot(rep *XReport, outs ...string) error {
	if len(rep.Rows) == 0 {
		return errors.New("plot: no rows")
	}
	p := plot.New()
	p.Title.Text = "Seed 002's experiment through internal/cluster/l4: mean time per operation (median, whiskers min–max)"
	if su := rep.Meta["setup"]; su != "" {
		p.Title.Text += "\n" + su
	}
	if d := rep.Meta["date"]; d != "" {
		p.Title.Text += "\n" + d + ", " + rep.Meta["bytes"] + " bytes each way, " + rep.Meta["duration"] + " × " + rep.Meta["runs"] + " runs per point"
	}
	p.X.Label.Text = "concurrent client threads"
	p.Y.Label.Text = "mean ms per operation"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	colors := map[string]color.Color{
		"relay":  color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff},
		"passfd": color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff},
		"repair": color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff},
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, path := range []string{"relay", rep.HandoffPath} {
		var pts xPoints
		for _, r := range rep.Rows {
			s := r.Relay.MeanMS
			if path != "relay" {
				s = r.Handoff.MeanMS
			}
			if s.Min <= 0 {
				continue // no completed operation: nothing to draw on a log axis
			}
			pts = append(pts, struct{ x, y, lo, hi float64 }{float64(r.Level), s.Median, s.Min, s.Max})
			lo, hi = min(lo, s.Min), max(hi, s.Max)
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("plot: %s: %w", path, err)
		}
		l.Color, sc.Color = colors[path], colors[path]
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return fmt.Errorf("plot: %s whiskers: %w", path, err)
		}
		eb.Color = colors[path]
		p.Add(l, sc, eb)
		p.Legend.Add(path, l, sc)
	}
	// A dotted line at the paper's 45 threads and a dashed one at the
	// measured crossover, unless that is just the lowest level measured
	// (the handoff ahead everywhere: there is no crossing to mark).
	marks := []struct {
		x      float64
		label  string
		dashes []vg.Length
	}{{45, "paper's crossover (45)", []vg.Length{vg.Points(1), vg.Points(2)}}}
	if rep.Crossover > 0 && rep.Crossover != rep.Rows[0].Level {
		marks = append(marks, struct {
			x      float64
			label  string
			dashes []vg.Length
		}{float64(rep.Crossover), fmt.Sprintf("measured crossover (%d)", rep.Crossover), []vg.Length{vg.Points(4), vg.Points(3)}})
	}
	for _, m := range marks {
		if math.IsInf(lo, 0) || m.x < float64(rep.Rows[0].Level) || m.x > float64(rep.Rows[len(rep.Rows)-1].Level) {
			continue
		}
		v, err := plotter.NewLine(plotter.XYs{{X: m.x, Y: lo}, {X: m.x, Y: hi}})
		if err != nil {
			return fmt.Errorf("plot: line at %v: %w", m.x, err)
		}
		v.Dashes = m.dashes
		v.Color = color.Gray{Y: 0x40}
		p.Add(v)
		p.Legend.Add(m.label, v)
	}
	if rep.Crossover == rep.Rows[0].Level && rep.WinsAbove {
		p.Title.Text += "\n" + rep.HandoffPath + " ahead at every level: no crossover in range"
	} else if rep.Crossover == 0 {
		p.Title.Text += "\nrelay ahead at every level: no crossover in range"
	}
	for _, out := range outs {
		switch filepath.Ext(out) {
		case ".svg", ".png", ".pdf":
		default:
			return fmt.Errorf("plot: %s: unknown format (want .svg, .png or .pdf)", out)
		}
		if err := p.Save(180*vg.Millimeter, 120*vg.Millimeter, out); err != nil {
			return fmt.Errorf("plot: save %s: %w", out, err)
		}
	}
	return nil
}

// runCrossover is the crossover mode: runs → JSON summary, Markdown table
// (stdout and --md) and plots.
func runCrossover(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("report crossover", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	runsPath := fs.String("runs", "", "per-run JSON Lines of bench/crossover.sh")
	out := fs.String("out", "", "summary JSON to write")
	md := fs.String("md", "", "also write the Markdown table here")
	var plots, meta list
	fs.Var(&plots, "plot", "image to write: .svg, .png or .pdf (repeatable)")
	fs.Var(&meta, "meta", "key=value recorded in the summary's meta (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *runsPath == "" || *out == "" {
		return errors.New("crossover needs --runs and --out")
	}
	runs, err := readRunsFile(*runsPath, ReadXRuns)
	if err != nil {
		return err
	}
	rep, err := SummarizeCrossover(runs)
	if err != nil {
		return fmt.Errorf("%s: %w", *runsPath, err)
	}
	if err := addMeta(rep.Meta, meta); err != nil {
		return err
	}
	if err := writeJSON(*out, rep); err != nil {
		return err
	}
	var tbl bytes.Buffer
	if err := CrossoverMarkdown(&tbl, rep); err != nil {
		return err
	}
	if *md != "" {
		if err := os.WriteFile(*md, tbl.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if len(plots) > 0 {
		if err := CrossoverPlot(rep, plots...); err != nil {
			return err
		}
	}
	_, err = stdout.Write(tbl.Bytes())
	return err
}
