package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func f(v float64) *float64 { return &v }

func TestRunRatio(t *testing.T) {
	cases := []struct {
		name    string
		run     Run
		want    float64
		wantErr bool
	}{
		{"rps: shoal over peer", Run{Metric: MetricRPS, Peer: Sample{RPS: 200}, Shoal: Sample{RPS: 150}}, 0.75, false},
		{"cpu: peer over shoal", Run{Metric: MetricCPU, Peer: Sample{CPUUs: f(30), Requests: 200}, Shoal: Sample{CPUUs: f(10), Requests: 5000}}, 3, false},
		{"cpu: a stalled side", Run{Metric: MetricCPU, Peer: Sample{CPUUs: f(30), Requests: 5000}, Shoal: Sample{CPUUs: f(20000), Requests: 199}}, 0, true},
		{"cpu: requests not given", Run{Metric: MetricCPU, Peer: Sample{CPUUs: f(30)}, Shoal: Sample{CPUUs: f(10)}}, 0, true},
		{"errors, requests unknown", Run{Metric: MetricRPS, Peer: Sample{RPS: 200}, Shoal: Sample{RPS: 150, Errors: 1}}, 0, true},
		{"1% errors pass", Run{Metric: MetricRPS, Peer: Sample{RPS: 200, Requests: 990, Errors: 10}, Shoal: Sample{RPS: 100, Requests: 1000}}, 0.5, false},
		{"over 1% errors fail", Run{Metric: MetricRPS, Peer: Sample{RPS: 200, Requests: 989, Errors: 11}, Shoal: Sample{RPS: 100, Requests: 1000}}, 0, true},
		{"cpu without numbers", Run{Metric: MetricCPU, Peer: Sample{CPUUs: f(30)}}, 0, true},
		{"peer served nothing", Run{Metric: MetricRPS, Peer: Sample{RPS: 0}, Shoal: Sample{RPS: 10}}, 0, true},
		{"shoal cpu zero", Run{Metric: MetricCPU, Peer: Sample{CPUUs: f(3)}, Shoal: Sample{CPUUs: f(0)}}, 0, true},
		{"unknown metric", Run{Metric: "latency", Peer: Sample{RPS: 1}, Shoal: Sample{RPS: 1}}, 0, true},
	}
	for _, c := range cases {
		got, err := c.run.Ratio()
		if (err != nil) != c.wantErr {
			t.Errorf("%s: err = %v, want error %v", c.name, err, c.wantErr)
			continue
		}
		if got != c.want {
			t.Errorf("%s: ratio = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

const sampleRuns = `
{"comparison":"shoal node vs nginx","size":"1k","run":1,"metric":"rps","peer":{"name":"nginx","rps":100,"p99_ms":2,"cpu_us":10},"shoal":{"name":"shoal node","rps":90,"p99_ms":3,"cpu_us":12,"errors":2,"requests":900}}
{"comparison":"shoal node vs nginx","size":"1k","run":2,"metric":"rps","peer":{"name":"nginx","rps":100,"p99_ms":4,"cpu_us":11},"shoal":{"name":"shoal node","rps":120,"p99_ms":1,"cpu_us":9,"errors":1,"requests":1200}}

{"comparison":"shoal node vs nginx","size":"1k","run":3,"metric":"rps","peer":{"name":"nginx","rps":200,"p99_ms":3,"cpu_us":12},"shoal":{"name":"shoal node","rps":200,"p99_ms":2}}
{"comparison":"front CPU: passfd vs relay, close","size":"1k","run":1,"metric":"cpu","peer":{"name":"relay","rps":1000,"cpu_us":100,"requests":3000},"shoal":{"name":"passfd","rps":900,"cpu_us":50,"requests":2700}}
{"comparison":"front CPU: passfd vs relay, close","size":"1k","run":2,"metric":"cpu","peer":{"name":"relay","rps":1000,"cpu_us":90,"requests":3000},"shoal":{"name":"passfd","rps":800,"cpu_us":60,"requests":2400}}
{"comparison":"shoal node vs nginx","size":"64k","run":1,"metric":"rps","peer":{"name":"nginx","rps":50},"shoal":{"name":"shoal node","rps":40}}
`

func TestSummarize(t *testing.T) {
	runs, err := ReadRuns(strings.NewReader(sampleRuns))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 6 {
		t.Fatalf("read %d runs, want 6 (blank lines skipped)", len(runs))
	}
	rows, dropped, err := Summarize(runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 0 {
		t.Errorf("dropped = %v", dropped)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	// First-seen order: node 1k, handoff 1k, node 64k.
	if rows[0].Size != "1k" || rows[1].Metric != MetricCPU || rows[2].Size != "64k" {
		t.Fatalf("row order: %+v", rows)
	}
	n := rows[0]
	// Per-run ratios 0.9, 1.2, 1.0 → min 0.9, median 1.0, max 1.2.
	if n.Runs != 3 || n.Ratio != (Spread{Min: 0.9, Median: 1, Max: 1.2}) {
		t.Errorf("node 1k ratio = %+v runs %d", n.Ratio, n.Runs)
	}
	if n.Peer.RPS != 100 || n.Shoal.RPS != 120 {
		t.Errorf("node 1k rps medians = %v, %v; want 100, 120", n.Peer.RPS, n.Shoal.RPS)
	}
	if n.Peer.P99Ms == nil || *n.Peer.P99Ms != 3 || n.Shoal.P99Ms == nil || *n.Shoal.P99Ms != 2 {
		t.Errorf("node 1k p99 medians = %v, %v; want 3, 2", n.Peer.P99Ms, n.Shoal.P99Ms)
	}
	if n.Peer.CPUUs == nil || *n.Peer.CPUUs != 11 {
		t.Errorf("node 1k peer cpu = %v, want 11", n.Peer.CPUUs)
	}
	if n.Shoal.Errors != 3 || n.Peer.Errors != 0 {
		t.Errorf("node 1k errors = %d / %d, want the sums 0 / 3", n.Peer.Errors, n.Shoal.Errors)
	}
	if n.Shoal.CPUUs != nil {
		t.Errorf("node 1k shoal cpu = %v, want nil (run 3 did not measure it)", *n.Shoal.CPUUs)
	}
	h := rows[1]
	// CPU ratios 100/50 = 2 and 90/60 = 1.5 → median 1.75.
	if h.Ratio != (Spread{Min: 1.5, Median: 1.75, Max: 2}) {
		t.Errorf("handoff ratio = %+v", h.Ratio)
	}
	if h.Peer.CPUUs == nil || *h.Peer.CPUUs != 95 || h.Shoal.RPS != 850 || h.Shoal.Requests != 2550 {
		t.Errorf("handoff medians = %+v / %+v", h.Peer, h.Shoal)
	}
	if rows[2].Ratio != (Spread{Min: 0.8, Median: 0.8, Max: 0.8}) || rows[2].Peer.P99Ms != nil {
		t.Errorf("node 64k = %+v", rows[2])
	}
}

func TestSummarizeErrors(t *testing.T) {
	mixed := []Run{
		{Comparison: "a", Size: "1k", Metric: MetricRPS, Peer: Sample{RPS: 1}, Shoal: Sample{RPS: 1}},
		{Comparison: "a", Size: "1k", Metric: MetricCPU, Peer: Sample{CPUUs: f(1)}, Shoal: Sample{CPUUs: f(1)}},
	}
	if _, _, err := Summarize(mixed); err == nil {
		t.Error("mixed metrics: no error")
	}
	// A failed run is left out of its row (and its medians), and counted.
	partly := []Run{
		{Comparison: "a", Size: "1k", Run: 1, Metric: MetricRPS, Peer: Sample{RPS: 0}, Shoal: Sample{RPS: 5}},
		{Comparison: "a", Size: "1k", Run: 2, Metric: MetricRPS, Peer: Sample{RPS: 10}, Shoal: Sample{RPS: 5}},
		{Comparison: "b", Size: "1k", Run: 1, Metric: MetricCPU, Peer: Sample{CPUUs: f(1), Requests: 900}, Shoal: Sample{CPUUs: f(0), Requests: 900}},
	}
	rows, dropped, err := Summarize(partly)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Runs != 1 || rows[0].Dropped != 1 || rows[0].Peer.RPS != 10 || rows[0].Ratio.Median != 0.5 {
		t.Errorf("rows = %+v, want only a/1k from run 2 with one dropped", rows)
	}
	if len(dropped) != 2 || !strings.Contains(dropped[0], "a 1k run 1") || !strings.Contains(dropped[1], "b 1k run 1") {
		t.Errorf("dropped = %q", dropped)
	}
	var b strings.Builder
	if err := Markdown(&b, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(1 of 2 runs failed)") {
		t.Errorf("table does not say a run failed:\n%s", b.String())
	}
}

func TestReadRunsRejects(t *testing.T) {
	for _, in := range []string{
		`{"comparison":"a","size":"1k","metric":"rps","peer":{"rps":1},"shoal":{"rps":1},"rsp":3}`, // typo'd key
		`{"size":"1k","metric":"rps","peer":{"rps":1},"shoal":{"rps":1}}`,                          // no comparison
		`{"comparison":"a","size":"1k",`,                                                           // cut short
		`{"comparison":"a","size":"1k","metric":"rps","peer":{"rps":"fast"},"shoal":{"rps":1}}`,    // not a number
	} {
		if _, err := ReadRuns(strings.NewReader(in)); err == nil {
			t.Errorf("ReadRuns(%s): no error", in)
		}
	}
}

// TestSchema pins the key names of the summary JSON that other tools (and
// the README) rely on.
func TestSchema(t *testing.T) {
	runs, err := ReadRuns(strings.NewReader(sampleRuns))
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := Summarize(runs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(Report{Schema: Schema, Meta: map[string]string{"date": "d"}, Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	if generic["schema"] != "shoal-bench-compare/1" {
		t.Errorf("schema = %v", generic["schema"])
	}
	row := generic["rows"].([]any)[0].(map[string]any)
	for _, k := range []string{"comparison", "size", "metric", "runs", "peer", "shoal", "ratio"} {
		if _, ok := row[k]; !ok {
			t.Errorf("row lacks key %q: %s", k, b)
		}
	}
	ratio := row["ratio"].(map[string]any)
	for _, k := range []string{"min", "median", "max"} {
		if _, ok := ratio[k]; !ok {
			t.Errorf("ratio lacks key %q", k)
		}
	}
	peer := row["peer"].(map[string]any)
	for _, k := range []string{"name", "rps", "p99_ms", "cpu_us"} {
		if _, ok := peer[k]; !ok {
			t.Errorf("peer lacks key %q", k)
		}
	}
	if _, ok := row["shoal"].(map[string]any)["cpu_us"]; ok {
		t.Error("unmeasured shoal cpu_us is present; want it left out")
	}
	rep, err := ReadReport(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 3 || rep.Rows[1].Ratio.Median != 1.75 {
		t.Errorf("round trip: %+v", rep.Rows)
	}
	if _, err := ReadReport(strings.NewReader(`{"schema":"other/9","rows":[{}]}`)); err == nil {
		t.Error("wrong schema accepted")
	}
	if _, err := ReadReport(strings.NewReader(`{"schema":"shoal-bench-compare/1","rows":[]}`)); err == nil {
		t.Error("empty report accepted")
	}
}

func TestMarkdown(t *testing.T) {
	rows := []Row{
		{Comparison: "shoal node vs nginx", Size: "1k", Metric: MetricRPS, Runs: 3,
			Peer:  Sample{Name: "nginx", RPS: 20000.4, P99Ms: f(3.456), CPUUs: f(40.04)},
			Shoal: Sample{Name: "shoal node", RPS: 18000.6, P99Ms: f(4)},
			Ratio: Spread{Min: 0.85, Median: 0.9, Max: 0.951}},
		{Comparison: "front CPU: passfd vs relay, close", Size: "1m", Metric: MetricCPU, Runs: 3,
			Peer: Sample{Name: "relay", RPS: 100, CPUUs: f(200)}, Shoal: Sample{Name: "passfd", RPS: 90, CPUUs: f(100)},
			Ratio: Spread{Min: 1.5, Median: 2, Max: 2.5}},
		{Comparison: "c", Size: "1k", Metric: MetricRPS, Runs: 2, Dropped: 1,
			Peer: Sample{Name: "p", RPS: 10, Errors: 3}, Shoal: Sample{Name: "s", RPS: 20},
			Ratio: Spread{Min: 2, Median: 2, Max: 2}},
	}
	var b strings.Builder
	if err := Markdown(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"| shoal node vs nginx | 1k | 20000 | 18001 | 0.85 / **0.90** / 0.95 | 3.46 | 4.00 | 40.0 | – |",
		"| front CPU: passfd vs relay, close | 1m | 100 | 90 | 1.50 / **2.00** / 2.50 (CPU) | – | – | 200.0 | 100.0 |",
		"| c | 1k | 10 | 20 | 2.00 / **2.00** / 2.00 (errors 3 / 0) (1 of 3 runs failed) | – | – | – | – |",
	}
	if len(lines) != 5 {
		t.Fatalf("%d lines, want header, rule and 3 rows:\n%s", len(lines), b.String())
	}
	for i, w := range want {
		if lines[i+2] != w {
			t.Errorf("row %d:\n got %s\nwant %s", i, lines[i+2], w)
		}
	}
}

func TestLayout(t *testing.T) {
	rows := []Row{
		{Comparison: "A", Size: "1k"}, {Comparison: "A", Size: "64k"}, {Comparison: "B", Size: "1k"},
	}
	bars, ticks, sizes := layout(rows)
	// A's bars at 0 and 1, a gap at 2, B's bar at 3.
	if len(bars) != 3 || bars[0].x != 0 || bars[1].x != 1 || bars[2].x != 3 {
		t.Errorf("bars = %+v", bars)
	}
	if len(ticks) != 2 || ticks[0].Value != 0.5 || ticks[0].Label != "A" || ticks[1].Value != 3 {
		t.Errorf("ticks = %+v", ticks)
	}
	if got := tickLabel("front CPU: passfd vs relay, close"); got != "front CPU:\npassfd vs relay\nclose" {
		t.Errorf("tickLabel = %q", got)
	}
	if strings.Join(sizes, ",") != "1k,64k" {
		t.Errorf("sizes = %v", sizes)
	}
}

// TestCLI runs summarize, table and plot on a small input, as compare.sh does.
func TestCLI(t *testing.T) {
	dir := t.TempDir()
	runsPath := filepath.Join(dir, "runs.jsonl")
	if err := os.WriteFile(runsPath, []byte(sampleRuns), 0o644); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(dir, "latest.json")
	var table strings.Builder
	err := run([]string{"summarize", "--runs", runsPath, "--out", js, "--meta", "date=2026-11-29 21:00 UTC", "--meta", "loadavg_before=1.0 1.0 1.0"}, &table)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "| shoal node vs nginx | 64k |") {
		t.Errorf("summarize printed:\n%s", table.String())
	}
	svg, png := filepath.Join(dir, "latest.svg"), filepath.Join(dir, "latest.png")
	if err := run([]string{"plot", "--in", js, "--out", svg, "--out", png}, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("shoal node vs nginx")) {
		t.Errorf("SVG lacks <svg or the comparison label (%d bytes)", len(b))
	}
	b, err = os.ReadFile(png)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("PNG lacks the PNG signature")
	}
	failed := filepath.Join(dir, "failed.jsonl")
	if err := os.WriteFile(failed, []byte(`{"comparison":"a","size":"1k","run":1,"metric":"rps","peer":{"rps":0},"shoal":{"rps":1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{
		{"summarize", "--runs", failed, "--out", filepath.Join(dir, "f.json")}, // every run failed
		{"plot", "--in", js, "--out", filepath.Join(dir, "x.gif")},
		{"plot", "--in", js},
		{"summarize", "--runs", runsPath, "--out", js, "--meta", "novalue"},
		{"table", "--in", filepath.Join(dir, "missing.json")},
		{"frobnicate"},
	} {
		if err := run(bad, io.Discard); err == nil {
			t.Errorf("run(%v): no error", bad)
		}
	}
}

// TestLayouts: rounds of two core layouts make two rows, and a comparison
// is won only when every round of both layouts is above 1 (the rule for
// calling a speed comparison won), lost when every round is below.
func TestLayouts(t *testing.T) {
	round := func(c, layout string, n int, peer, shoal float64) Run {
		return Run{Comparison: c, Size: "1k", Run: n, Metric: MetricRPS, Layout: layout,
			Peer: Sample{Name: "p", RPS: peer}, Shoal: Sample{Name: "s", RPS: shoal}}
	}
	a, b := "servers 0, load 1", "servers 1, load 0"
	runs := []Run{
		round("won", a, 1, 100, 110), round("won", a, 2, 100, 120), round("won", b, 1, 100, 105), round("won", b, 2, 100, 130),
		// A median above 1 in both layouts but one round below: not won.
		round("tie", a, 1, 100, 110), round("tie", a, 2, 100, 99), round("tie", b, 1, 100, 110), round("tie", b, 2, 100, 111),
		round("lost", a, 1, 100, 90), round("lost", b, 1, 100, 95),
		// Won in the one layout it ran in: not judged.
		round("one", a, 1, 100, 200),
	}
	rows, _, err := Summarize(runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7 {
		t.Fatalf("%d rows, want 7 (one per comparison and layout)", len(rows))
	}
	if rows[0].Label() != "won (servers 0, load 1)" || rows[1].Layout != b || rows[1].Ratio.Min != 1.05 {
		t.Errorf("first rows %+v, %+v", rows[0], rows[1])
	}
	want := []Verdict{
		{Comparison: "won", Size: "1k", Layouts: 2, Min: 1.05, Max: 1.3, Outcome: Won},
		{Comparison: "tie", Size: "1k", Layouts: 2, Min: 0.99, Max: 1.11, Outcome: WithinSpread},
		{Comparison: "lost", Size: "1k", Layouts: 2, Min: 0.9, Max: 0.95, Outcome: Lost},
		{Comparison: "one", Size: "1k", Layouts: 1, Min: 2, Max: 2, Outcome: OneLayout},
	}
	got := Judge(rows)
	if len(got) != len(want) {
		t.Fatalf("verdicts %+v, want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		g.Min, g.Max = math.Round(g.Min*100)/100, math.Round(g.Max*100)/100
		if g != want[i] {
			t.Errorf("verdict %d = %+v, want %+v", i, g, want[i])
		}
	}
	var md strings.Builder
	if err := VerdictMarkdown(&md, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| tie | 1k | 2 | 0.99 / 1.11 | within spread |") {
		t.Errorf("verdict table:\n%s", md.String())
	}
}
