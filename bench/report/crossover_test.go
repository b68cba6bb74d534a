package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func xrun(level int, path string, run int, ops, mean float64) string {
	return `{"level":` + itoa(level) + `,"path":"` + path + `","run":` + itoa(run) +
		`,"ops":10,"ops_per_sec":` + ftoa(ops) + `,"mean_ms":` + ftoa(mean) + `,"p99_ms":1,"front_cpu_us_per_op":5}` + "\n"
}

func itoa(i int) string     { return strconv.Itoa(i) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func TestCrossover(t *testing.T) {
	var in strings.Builder
	// relay wins at 1 and 8, passfd from 32 on; runs 1 and 2 per path.
	for _, c := range []struct {
		level            int
		relayMS, passfdM float64
	}{{1, 1, 2}, {8, 2, 3}, {32, 5, 4}, {64, 9, 6}} {
		for run := 1; run <= 2; run++ {
			in.WriteString(xrun(c.level, "relay", run, 1000/c.relayMS, c.relayMS))
			in.WriteString(xrun(c.level, "passfd", run, 1000/c.passfdM, c.passfdM))
		}
	}
	runs, err := ReadXRuns(strings.NewReader(in.String()))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := SummarizeCrossover(runs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Crossover != 32 || !rep.WinsAbove || len(rep.Rows) != 4 {
		t.Fatalf("crossover %d winsAbove %v rows %d, want 32 true 4", rep.Crossover, rep.WinsAbove, len(rep.Rows))
	}
	if r := rep.Rows[0].Ratio.Median; r < 0.49 || r > 0.51 {
		t.Errorf("level 1 ratio %v, want 0.5", r)
	}
	var md bytes.Buffer
	if err := CrossoverMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "Crossover: 32") {
		t.Errorf("verdict missing:\n%s", md.String())
	}
	dir := t.TempDir()
	if err := CrossoverPlot(rep, filepath.Join(dir, "x.svg")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "x.svg")); err != nil || fi.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}

	// A level with only one path is refused; a bad path is refused.
	if _, err := SummarizeCrossover(runs[:1]); err == nil {
		t.Error("level without passfd runs accepted")
	}
	if _, err := ReadXRuns(strings.NewReader(`{"level":1,"path":"nat"}`)); err == nil {
		t.Error("unknown path accepted")
	}
	// passfd never wins: no crossover.
	none, _ := SummarizeCrossover([]XRun{{Level: 1, Path: "relay", Run: 1, OpsPerSec: 2, MeanMS: 1}, {Level: 1, Path: "passfd", Run: 1, OpsPerSec: 1, MeanMS: 2}})
	if none.Crossover != 0 || !strings.Contains(CrossoverText(none), "none in range") {
		t.Errorf("crossover %d, text %q", none.Crossover, CrossoverText(none))
	}
	// The repair path is the handoff side of the lab's runs; it is named in
	// the table, and mixing it with passfd is refused.
	rr := []XRun{{Level: 1, Path: "relay", Run: 1, OpsPerSec: 2, MeanMS: 1}, {Level: 1, Path: "repair", Run: 1, OpsPerSec: 1, MeanMS: 2}}
	rep, err = SummarizeCrossover(rr)
	if err != nil || rep.HandoffPath != "repair" {
		t.Fatalf("repair runs: %v, handoff path %q", err, rep.HandoffPath)
	}
	md.Reset()
	CrossoverMarkdown(&md, rep)
	if !strings.Contains(md.String(), "repair mean ms/op") {
		t.Errorf("repair column missing:\n%s", md.String())
	}
	if _, err := SummarizeCrossover(append(rr, XRun{Level: 1, Path: "passfd", Run: 1, OpsPerSec: 1, MeanMS: 2})); err == nil {
		t.Error("runs mixing passfd and repair accepted")
	}
}
