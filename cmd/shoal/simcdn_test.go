package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimCDNCommandLine: `shoal sim cdn` on a small generated matrix and a
// Zipf workload prints one JSON object per run (cdnsim.Result), reads
// a matrix file by named columns, and refuses nonsense plainly.
func TestSimCDNCommandLine(t *testing.T) {
	out, errOut, code := shoal(t, "sim", "cdn", "--cities", "20", "--zipf-requests", "400", "--zipf-rate", "1",
		"--pops", "4", "--views", "mbpp,gossip", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (one per view): %s", len(lines), out)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"pops", "clients", "requests", "mbpp_round_s", "view_staleness_s", "mbpp_bytes_per_round",
			"mbpp_messages_per_round", "chord_hops_mean", "chord_hops_p99", "failure_detect_s", "client_rtt_ms_mean",
			"oracle_rtt_ms_mean", "random_rtt_ms_mean", "hit_ratio", "origin_fetch_ratio"} {
			if _, ok := m[k]; !ok {
				t.Errorf("no %q in %s", k, l)
			}
		}
		if m["pops"].(float64) != 4 || m["requests"].(float64) != 400 {
			t.Errorf("pops %v requests %v", m["pops"], m["requests"])
		}
	}
	// An origin whose responses are never stored: httpcache says so, and
	// every request goes to the origin.
	out, errOut, code = shoal(t, "sim", "cdn", "--cities", "20", "--zipf-requests", "400", "--zipf-rate", "1",
		"--pops", "4", "--views", "mbpp", "--cache-control", "1:no-store", "--json")
	var r struct {
		NotStored   float64 `json:"not_stored"`
		OriginRatio float64 `json:"origin_fetch_ratio"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.NotStored < 400 || r.OriginRatio != 1 {
		t.Errorf("no-store origin: exit %d %v, %+v %s", code, err, r, errOut)
	}
	dir := t.TempDir()
	mf := filepath.Join(dir, "m.csv")
	os.WriteFile(mf, []byte("rtt,a,b\n10,x,y\n20,x,z\n15,y,z\n12,x,w\n9,w,y\n30,w,z\n"), 0o600)
	if out, errOut, code := shoal(t, "sim", "cdn", "--rtt-matrix", mf, "--rtt-cols", "a,b,rtt", "--zipf-requests", "200",
		"--pops", "3", "--views", "mbpp", "--origin", "x"); code != 0 || !strings.Contains(out, "mbpp") {
		t.Fatalf("matrix file: exit %d %s %s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"sim", "cdn", "--pops", "500", "--cities", "20", "--zipf-requests", "10"},
		{"sim", "cdn", "--rtt-matrix", mf, "--rtt-cols", "a,b"},
		{"sim", "cdn", "--views", "carrier-pigeon", "--zipf-requests", "10", "--pops", "3"},
		{"sim", "cdn", "--cache-control", "max-age=60", "--zipf-requests", "10", "--pops", "3"},
	} {
		if _, errOut, code := shoal(t, args...); code == 0 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
