package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimCDNScenario: `shoal sim cdn --scenario` runs the WAN lab's
// scenario file: its five PoPs by name, each site sent to its nearest PoP
// (by the file's matrix), and the rows the lab compares; a broken file is
// refused with its reason.
func TestSimCDNScenario(t *testing.T) {
	file := filepath.Join("..", "..", "internal", "cdn", "scenario", "testdata", "lab5-short.json")
	out, errOut, code := shoal(t, "sim", "cdn", "--scenario", file, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		PoPs      int               `json:"pops"`
		Requests  int               `json:"requests"`
		ClientMs  float64           `json:"client_rtt_ms_mean"`
		PeerBytes uint64            `json:"peer_bytes"`
		Ingress   map[string]string `json:"ingress"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]string{"berlin": "ams", "paris": "fra", "boston": "nyc", "seattle": "sfo"}
	for s, p := range want {
		if r.Ingress[s] != p {
			t.Errorf("site %s sent to %q, want %s", s, r.Ingress[s], p)
		}
	}
	// The nearest site is 5 ms from its PoP, the origin 12 ms from the
	// nearest PoP: a mean under 5 ms or no PoP-to-PoP bytes is wrong.
	if r.PoPs != 5 || r.Requests != 150 || r.ClientMs < 5 || r.PeerBytes == 0 {
		t.Errorf("run %+v", r)
	}
	out, _, code = shoal(t, "sim", "cdn", "--scenario", file)
	if code != 0 || !strings.Contains(out, "pop of seattle") || !strings.Contains(out, "client_rtt_ms_mean") {
		t.Errorf("table (exit %d): %s", code, out)
	}
	if _, errOut, code = shoal(t, "sim", "cdn", "--scenario", "no-such.json"); code == 0 || !strings.Contains(errOut, "no-such.json") {
		t.Errorf("missing file: exit %d, %s", code, errOut)
	}
}
