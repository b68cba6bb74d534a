package main

import (
	"bytes"
	"strings"
	"testing"
)

// row is a summary row with the given per-round spread.
func row(cmp, size, layout string, lo, med, hi float64) Row {
	return Row{Comparison: cmp, Size: size, Layout: layout, Metric: MetricRPS, Runs: 3, Ratio: Spread{Min: lo, Median: med, Max: hi}}
}

// TestGuard: hand-made histories and new runs, and what the guard must say
// about each comparison.
func TestGuard(t *testing.T) {
	hist := []Report{
		{Schema: Schema, Rows: []Row{ // the oldest: read only with n = 3
			row("node", "1k", "a", 0.50, 0.60, 0.70),
		}},
		{Schema: Schema, Rows: []Row{
			row("node", "1k", "a", 1.30, 1.40, 1.50),
			row("node", "1k", "b", 1.25, 1.35, 1.45),
			row("front", "1k", "a", 0.95, 1.02, 1.08),
		}},
		{Schema: Schema, Rows: []Row{
			row("node", "1k", "a", 1.28, 1.38, 1.48),
			row("front", "1k", "a", 0.98, 1.03, 1.07),
		}},
	}
	cases := []struct {
		name string
		rows []Row
		n    int
		want map[string]string // comparison → outcome
		low  float64           // node's lowest round read
	}{
		{"inside", []Row{row("node", "1k", "a", 1.3, 1.40, 1.5), row("node", "1k", "b", 1.3, 1.36, 1.5), row("front", "1k", "a", 1, 1.0, 1.1)},
			2, map[string]string{"node": GuardOK, "front": GuardOK}, 1.25},
		{"one layout below", []Row{row("node", "1k", "a", 1.3, 1.40, 1.5), row("node", "1k", "b", 1.0, 1.20, 1.3)},
			2, map[string]string{"node": GuardBelow}, 1.25},
		{"above", []Row{row("front", "1k", "a", 1.1, 1.15, 1.2)}, 2, map[string]string{"front": GuardAbove}, 0},
		{"new comparison", []Row{row("passfd", "1m", "a", 9, 10, 11)}, 2, map[string]string{"passfd": GuardNoRecord}, 0},
		// With the oldest run read too, 1.20 is inside its wider spread.
		{"older run widens", []Row{row("node", "1k", "a", 1.0, 1.20, 1.3)}, 3, map[string]string{"node": GuardOK}, 0.50},
	}
	for _, c := range cases {
		flags := Guard(&Report{Schema: Schema, Rows: c.rows}, hist, c.n)
		if len(flags) != len(c.want) {
			t.Fatalf("%s: %d flags, want %d: %+v", c.name, len(flags), len(c.want), flags)
		}
		for _, f := range flags {
			if f.Outcome != c.want[f.Comparison] {
				t.Errorf("%s: %s: %q, want %q (%+v)", c.name, f.Comparison, f.Outcome, c.want[f.Comparison], f)
			}
			if f.Comparison == "node" && f.Low != c.low {
				t.Errorf("%s: node's spread starts at %v, want %v", c.name, f.Low, c.low)
			}
		}
	}
	// The medians listed are per accepted run (layouts' median), oldest first.
	f := Guard(&Report{Schema: Schema, Rows: []Row{row("node", "1k", "a", 1, 1.4, 2)}}, hist, 2)[0]
	if len(f.Medians) != 2 || f.Medians[0] != 1.375 || f.Medians[1] != 1.38 {
		t.Errorf("medians %v, want [1.375 1.38]", f.Medians)
	}
	if n := Regressions(Guard(&Report{Schema: Schema, Rows: []Row{row("node", "1k", "a", 0.9, 1.0, 1.1)}}, hist, 2)); n != 1 {
		t.Errorf("Regressions = %d, want 1", n)
	}
}

// TestAcceptRefusesBusyRuns: a run made at a load average of 1.5 or more
// is not taken without force; one at 0.4 is, and reads back.
func TestAcceptRefusesBusyRuns(t *testing.T) {
	rep := &Report{Schema: Schema, Meta: map[string]string{"loadavg_before": "2.49 2.58 2.73"}, Rows: []Row{row("node", "1k", "", 1, 1.4, 2)}}
	if _, err := AcceptLine(rep, MaxAcceptLoad, false); err == nil || !strings.Contains(err.Error(), "load average 2.49") {
		t.Errorf("busy run accepted: %v", err)
	}
	if _, err := AcceptLine(rep, MaxAcceptLoad, true); err != nil {
		t.Errorf("forced: %v", err)
	}
	rep.Meta["loadavg_before"] = "0.40 0.30 0.20"
	line, err := AcceptLine(rep, MaxAcceptLoad, false)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := ReadHistory(bytes.NewReader(append(line, line...)))
	if err != nil || len(hist) != 2 || hist[1].Rows[0].Ratio.Median != 1.4 {
		t.Fatalf("read back %d runs, %v: %+v", len(hist), err, hist)
	}
	delete(rep.Meta, "loadavg_before")
	if _, err := AcceptLine(rep, MaxAcceptLoad, false); err == nil {
		t.Error("a run without its load average was accepted")
	}
}
