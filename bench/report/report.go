package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Schema names the layout of the summary JSON (bench/results/latest.json).
// Bump the number when a key changes meaning, so old results are not misread.
const Schema = "shoal-bench-compare/1"

// Metrics a comparison is judged on. Each decides which way the per-run ratio
// points, so that in every row a ratio above 1 favours shoal.
const (
	// MetricRPS: ratio = shoal req/s ÷ peer req/s (same load, same core).
	MetricRPS = "rps"
	// MetricCPU: ratio = peer CPU µs/request ÷ shoal CPU µs/request, i.e.
	// how many more requests shoal serves per CPU second (seed 000 §3.1
	// states the handoff claim this way: capacity of the front).
	MetricCPU = "cpu"
)

// Sample is one side of one run (or, in a Row, the medians over runs).
// Optional numbers are pointers so that "not measured" is null in JSON,
// never a fake zero.
type Sample struct {
	Name  string   `json:"name"`             // e.g. "nginx", "shoal node"
	RPS   float64  `json:"rps"`              // requests per second
	P99Ms *float64 `json:"p99_ms,omitempty"` // 99th percentile latency, ms
	CPUUs *float64 `json:"cpu_us,omitempty"` // server CPU time per request, µs
	// Requests completed in the run; required by MetricCPU (see
	// MinCPURequests), optional otherwise.
	Requests int64 `json:"requests,omitempty"`
	// Errors the load generator counted (timeouts, resets, non-2xx). A run
	// where either side has more than MaxErrorFraction of its requests in
	// error does not count; in a Row, the sum over the runs kept.
	Errors int64 `json:"errors,omitempty"`
}

// MaxErrorFraction is the share of failed requests above which a run does
// not count: its numbers would be of a different workload (fast errors
// inflate req/s). A few wrk timeouts (2 s) among thousands of requests on
// an overloaded machine stay in, and the table shows their count.
const MaxErrorFraction = 0.01

func (s Sample) tooManyErrors() bool {
	return s.Errors > 0 && float64(s.Errors) > MaxErrorFraction*float64(s.Requests+s.Errors)
}

// MinCPURequests is the fewest requests a side must complete for its CPU
// time per request to count. CPU time comes from /proc in ticks of 1/HZ
// (10 ms): below 200 requests one tick is worth more than 50 µs per request,
// the size of the differences the CPU rows are meant to show; and a run
// that completes so few requests has stalled, which is a failure to report,
// not a cost to average.
const MinCPURequests = 200

// Run is one line of the JSON Lines the sub-scripts write when JSON_OUT is
// set: both sides of a comparison measured back to back (one round of the
// interleaved A B / B A schedule), so their ratio is a paired measurement.
type Run struct {
	Comparison string `json:"comparison"` // e.g. "node vs nginx"
	Size       string `json:"size"`       // object size label: "1k", "64k", "1m"
	Run        int    `json:"run"`        // 1-based round number
	Metric     string `json:"metric"`     // MetricRPS or MetricCPU
	// Layout names the core layout the round ran in, e.g. "servers 0,
	// load 1" (compare.sh runs every comparison in each layout); empty for
	// a sub-script run on its own.
	Layout string `json:"layout,omitempty"`
	Peer   Sample `json:"peer"`
	Shoal  Sample `json:"shoal"`
}

// Ratio is one run's shoal-favouring ratio (see MetricRPS, MetricCPU).
func (r Run) Ratio() (float64, error) {
	if r.Peer.tooManyErrors() || r.Shoal.tooManyErrors() {
		return 0, fmt.Errorf("%s %s run %d: over %g%% errors (%s %d of %d, %s %d of %d)", r.Comparison, r.Size, r.Run,
			100*MaxErrorFraction, r.Peer.Name, r.Peer.Errors, r.Peer.Requests+r.Peer.Errors,
			r.Shoal.Name, r.Shoal.Errors, r.Shoal.Requests+r.Shoal.Errors)
	}
	var num, den float64
	switch r.Metric {
	case MetricRPS:
		num, den = r.Shoal.RPS, r.Peer.RPS
	case MetricCPU:
		if r.Peer.CPUUs == nil || r.Shoal.CPUUs == nil {
			return 0, fmt.Errorf("%s %s run %d: metric cpu without cpu_us on both sides", r.Comparison, r.Size, r.Run)
		}
		if r.Peer.Requests < MinCPURequests || r.Shoal.Requests < MinCPURequests {
			return 0, fmt.Errorf("%s %s run %d: too few requests to time (%s %d, %s %d; want ≥ %d)", r.Comparison, r.Size, r.Run,
				r.Peer.Name, r.Peer.Requests, r.Shoal.Name, r.Shoal.Requests, MinCPURequests)
		}
		num, den = *r.Peer.CPUUs, *r.Shoal.CPUUs
	default:
		return 0, fmt.Errorf("%s %s run %d: unknown metric %q", r.Comparison, r.Size, r.Run, r.Metric)
	}
	if !(den > 0) || !(num >= 0) || math.IsInf(num, 0) || math.IsInf(den, 0) {
		return 0, fmt.Errorf("%s %s run %d: ratio %v/%v is undefined", r.Comparison, r.Size, r.Run, num, den)
	}
	return num / den, nil
}

// Spread is the minimum, median and maximum of the per-run ratios.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// Row summarises every run of one comparison at one size: medians of each
// side's numbers and the spread of the paired per-run ratios.
type Row struct {
	Comparison string `json:"comparison"`
	Size       string `json:"size"`
	Layout     string `json:"layout,omitempty"` // Run.Layout
	Metric     string `json:"metric"`
	Runs       int    `json:"runs"`              // runs summarised
	Dropped    int    `json:"dropped,omitempty"` // runs left out: undefined ratio
	Peer       Sample `json:"peer"`
	Shoal      Sample `json:"shoal"`
	Ratio      Spread `json:"ratio"`
}

// Label names a row's comparison for people (table and plot): the
// comparison as the sub-script spelt it, e.g. "shoal node vs nginx", and
// the core layout when there is one.
func (r Row) Label() string {
	if r.Layout == "" {
		return r.Comparison
	}
	return r.Comparison + " (" + r.Layout + ")"
}

// Report is the whole summary file. Meta carries free-form context the
// harness records (date, load average, knobs) so a table is never quoted
// without the conditions it was measured under.
type Report struct {
	Schema string            `json:"schema"`
	Meta   map[string]string `json:"meta,omitempty"`
	Rows   []Row             `json:"rows"`
	// Verdicts judge each comparison and size over every layout (Judge).
	Verdicts []Verdict `json:"verdicts,omitempty"`
}

// ReadRuns parses JSON Lines of Run; blank lines are skipped. Unknown keys
// are rejected so that a typo in a sub-script cannot silently drop a field.
func ReadRuns(r io.Reader) ([]Run, error) {
	var runs []Run
	err := eachLine(r, "runs", 1<<20, func(line string) error {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var run Run
		if err := dec.Decode(&run); err != nil {
			return err
		}
		if run.Comparison == "" || run.Size == "" {
			return errors.New("comparison and size are required")
		}
		runs = append(runs, run)
		return nil
	})
	return runs, err
}

// eachLine calls fn with every non-blank line of r (trimmed, at most max
// bytes long), naming what and the line's number in the error it returns.
func eachLine(r io.Reader, what string, max int, fn func(line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), max)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("%s line %d: %w", what, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", what, err)
	}
	return nil
}

// Summarize groups runs by (comparison, size, layout) in first-seen order and
// reduces each group to a Row. A run whose ratio is undefined (a side served
// nothing, a CPU time of zero) is left out of its row, counted in
// Row.Dropped and described in dropped, so the table says that a cell
// failed instead of hiding it; a group whose runs all failed has no row.
// Runs of one group that mix metrics are an error.
func Summarize(runs []Run) (rows []Row, dropped []string, err error) {
	type key struct{ c, s, l string }
	var order []key
	groups := map[key][]Run{}
	for _, r := range runs {
		k := key{r.Comparison, r.Size, r.Layout}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	rows = make([]Row, 0, len(order))
	for _, k := range order {
		all := groups[k]
		var ok []Run
		var ratios []float64
		for _, r := range all {
			if r.Metric != all[0].Metric {
				return nil, nil, fmt.Errorf("%s %s: runs mix metrics %q and %q", k.c, k.s, all[0].Metric, r.Metric)
			}
			v, err := r.Ratio()
			if err != nil {
				dropped = append(dropped, err.Error())
				continue
			}
			ok = append(ok, r)
			ratios = append(ratios, v)
		}
		if len(ok) == 0 {
			continue
		}
		sort.Float64s(ratios)
		rows = append(rows, Row{
			Comparison: k.c,
			Size:       k.s,
			Layout:     k.l,
			Metric:     all[0].Metric,
			Runs:       len(ok),
			Dropped:    len(all) - len(ok),
			Peer:       medianSample(ok, func(r Run) Sample { return r.Peer }),
			Shoal:      medianSample(ok, func(r Run) Sample { return r.Shoal }),
			Ratio:      Spread{Min: ratios[0], Median: median(ratios), Max: ratios[len(ratios)-1]},
		})
	}
	return rows, dropped, nil
}

// Verdict outcomes. A comparison is won only when every round of every
// core layout favours shoal, i.e. the ratio beats 1 by more than the
// spread of the rounds with the cores swapped too; lost likewise the other
// way; anything else is within the spread.
const (
	Won          = "won"
	Lost         = "lost"
	WithinSpread = "within spread"
	// OneLayout: measured in one layout only, so not judged.
	OneLayout = "one layout only"
)

// Verdict judges one comparison at one size over its layouts.
type Verdict struct {
	Comparison string `json:"comparison"`
	Size       string `json:"size"`
	Layouts    int    `json:"layouts"`
	// Min and Max are the lowest and highest per-round ratio in any layout.
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Outcome string  `json:"outcome"`
}

// Judge gives each (comparison, size) of rows its Verdict, in first-seen
// order. Rows without a layout count as one layout.
func Judge(rows []Row) []Verdict {
	type key struct{ c, s string }
	var order []key
	byKey := map[key]*Verdict{}
	for _, r := range rows {
		k := key{r.Comparison, r.Size}
		v := byKey[k]
		if v == nil {
			v = &Verdict{Comparison: r.Comparison, Size: r.Size, Min: r.Ratio.Min, Max: r.Ratio.Max}
			byKey[k] = v
			order = append(order, k)
		}
		v.Layouts++
		v.Min, v.Max = min(v.Min, r.Ratio.Min), max(v.Max, r.Ratio.Max)
	}
	out := make([]Verdict, 0, len(order))
	for _, k := range order {
		v := *byKey[k]
		switch {
		case v.Layouts < 2:
			v.Outcome = OneLayout
		case v.Min > 1:
			v.Outcome = Won
		case v.Max < 1:
			v.Outcome = Lost
		default:
			v.Outcome = WithinSpread
		}
		out = append(out, v)
	}
	return out
}

// medianSample takes the median of each field independently; an optional
// field is present only if every run measured it. Requests is the median
// too; Errors is the sum.
func medianSample(g []Run, side func(Run) Sample) Sample {
	s := Sample{Name: side(g[0]).Name}
	rps := make([]float64, 0, len(g))
	reqs := make([]float64, 0, len(g))
	var p99, cpu []float64
	for _, r := range g {
		x := side(r)
		rps = append(rps, x.RPS)
		reqs = append(reqs, float64(x.Requests))
		s.Errors += x.Errors
		if x.P99Ms != nil {
			p99 = append(p99, *x.P99Ms)
		}
		if x.CPUUs != nil {
			cpu = append(cpu, *x.CPUUs)
		}
	}
	s.RPS = median(rps)
	s.Requests = int64(median(reqs))
	if len(p99) == len(g) {
		v := median(p99)
		s.P99Ms = &v
	}
	if len(cpu) == len(g) {
		v := median(cpu)
		s.CPUUs = &v
	}
	return s
}

// median of a non-empty slice (the mean of the middle two for even length).
// It sorts a copy.
func median(xs []float64) float64 {
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

// ReadReport parses a summary file and checks its schema tag.
func ReadReport(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("reading report: %w", err)
	}
	if rep.Schema != Schema {
		return nil, fmt.Errorf("report schema %q, want %q", rep.Schema, Schema)
	}
	if len(rep.Rows) == 0 {
		return nil, errors.New("report has no rows")
	}
	return &rep, nil
}

// Markdown writes the ratio table: one line per comparison and size.
func Markdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| comparison | size | peer req/s | shoal req/s | ratio min / median / max | peer p99 ms | shoal p99 ms | peer CPU µs/req | shoal CPU µs/req |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		metric := ""
		if r.Metric == MetricCPU {
			metric = " (CPU)"
		}
		if r.Peer.Errors > 0 || r.Shoal.Errors > 0 {
			metric += fmt.Sprintf(" (errors %d / %d)", r.Peer.Errors, r.Shoal.Errors)
		}
		if r.Dropped > 0 {
			metric += fmt.Sprintf(" (%d of %d runs failed)", r.Dropped, r.Dropped+r.Runs)
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.2f / **%.2f** / %.2f%s | %s | %s | %s | %s |\n",
			r.Label(), r.Size, r.Peer.RPS, r.Shoal.RPS,
			r.Ratio.Min, r.Ratio.Median, r.Ratio.Max, metric,
			opt(r.Peer.P99Ms, "%.2f"), opt(r.Shoal.P99Ms, "%.2f"), opt(r.Peer.CPUUs, "%.1f"), opt(r.Shoal.CPUUs, "%.1f"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// VerdictMarkdown writes one line per comparison and size: the lowest and
// highest round over every layout and the verdict.
func VerdictMarkdown(w io.Writer, vs []Verdict) error {
	var b strings.Builder
	b.WriteString("| comparison | size | layouts | lowest / highest round | verdict |\n|---|---|---:|---:|---|\n")
	for _, v := range vs {
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f / %.2f | %s |\n", v.Comparison, v.Size, v.Layouts, v.Min, v.Max, v.Outcome)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func opt(v *float64, format string) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf(format, *v)
}
