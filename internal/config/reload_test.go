package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestPlanReload: each kind of change is sorted right, and a change only a
// restart can make refuses the whole reload with the key named.
func TestPlanReload(t *testing.T) {
	base := `
policy = "wrr"
[[node]]
url = "http://127.0.0.1:9001"
[[node]]
url = "http://127.0.0.1:9002"
weight = 2
`
	old, err := ParseFront("old.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		want       string // Reload.String(), or the error's text
		err        bool
	}{
		{"same", base, "nothing", false},
		{"policy", strings.Replace(base, `"wrr"`, `"lard"`, 1), "policy", false},
		{"tuning", base + "[tuning]\nt_low = 10\n", "policy", false},
		{"weight", strings.Replace(base, "weight = 2", "weight = 5", 1), "1 weights", false},
		{"add and remove", strings.Replace(base, "9001", "9003", 1), "policy", false},
		{"limits", base + "[limits]\nmax_conn_per_node = 8\n", "limits", false},
		{"health", base + "[health]\ninterval = \"2s\"\n", "health", false},
		{"log level", "log_level = \"debug\"\n" + base, "log_level", false},
		{"listen", "listen = \"127.0.0.1:8081\"\n" + base, "listen: 127.0.0.1:8080 -> 127.0.0.1:8081: cannot change while the front runs", true},
		{"path", "path = \"redirect\"\n" + base, "path: relay -> redirect", true},
		{"group", strings.Replace(base, "weight = 2", "weight = 2\ngroup = \"big\"", 1), `group "" -> "big"`, true},
	} {
		nf, err := ParseFront("new.toml", []byte(tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r, err := PlanReload(old, nf)
		if tc.err {
			if err == nil || !errors.Is(err, ErrRestartNeeded) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if tc.name == "add and remove" {
			if len(r.Add) != 1 || r.Add[0].URL != "http://127.0.0.1:9003" || !slices.Equal(r.Remove, []string{"http://127.0.0.1:9001"}) {
				t.Errorf("%s: %+v", tc.name, r)
			}
			continue
		}
		if got := r.String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// A path other than relay or redirect keeps its limits.
	pf, _ := ParseFront("p.toml", []byte("path = \"passfd\"\n"+base))
	pf2, _ := ParseFront("p2.toml", []byte("path = \"passfd\"\n"+base+"[limits]\nidle_timeout = \"5s\"\n"))
	if _, err := PlanReload(pf, pf2); err == nil || !strings.Contains(err.Error(), "limits with path passfd") {
		t.Errorf("passfd limits change: %v", err)
	}
}
