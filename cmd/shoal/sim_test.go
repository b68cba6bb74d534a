package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSimTableLabels: `shoal sim` prints one label over each value (the
// table once had 12 labels over 15 values), checked on a real run: the
// header and every row have as many fields, and the last labels are the
// ones the last values belong to.
func TestSimTableLabels(t *testing.T) {
	f := filepath.Join(t.TempDir(), "t.log")
	if _, errOut, code := shoal(t, "trace", "gen", "--files", "200", "--requests", "2000", "--out", f); code != 0 {
		t.Fatalf("trace gen: %d %s", code, errOut)
	}
	out, errOut, code := shoal(t, "sim", "--trace", f, "--policies", "wrr,lard", "--nodes", "1,2")
	if code != 0 {
		t.Fatalf("sim: %d %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	labels := splitWide(lines[0]) // labels hold spaces ("byte miss")
	if want := len(simColumns); len(labels) != want {
		t.Fatalf("header has %d labels, want %d: %q", len(labels), want, lines[0])
	}
	rows := 0
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		rows++
		if n := len(strings.Fields(l)); n != len(labels) {
			t.Errorf("row has %d values under %d labels: %q", n, len(labels), l)
		}
	}
	if rows != 4 {
		t.Errorf("%d rows, want 4 (2 policies × 2 node counts):\n%s", rows, out)
	}
	if got := labels[len(labels)-4:]; strings.Join(got, "|") != "hit|byte hit|peer fetch B/req|moves/req" {
		t.Errorf("last labels %q, want hit, byte hit, peer fetch B/req, moves/req", got)
	}
}

// splitWide splits a right-aligned table line into its cells: cells are
// separated by two spaces or more, a label may hold one.
func splitWide(line string) []string {
	var out []string
	for _, c := range strings.Split(line, "  ") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}
