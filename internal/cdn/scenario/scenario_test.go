package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadShort(t *testing.T) {
	s, err := Load(filepath.Join("testdata", "lab5-short.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Names(), " "); got != "ams fra lon nyc sfo berlin paris boston seattle origin" {
		t.Fatalf("names %q", got)
	}
	if s.SiteLoc(2) != 7 || s.OriginLoc() != 9 {
		t.Fatalf("site 2 at %d, origin at %d; want 7 and 9", s.SiteLoc(2), s.OriginLoc())
	}
	// Each site's nearest PoP by the matrix (checked by hand).
	want := map[string]string{"198.51.0.0/24": "ams", "198.51.1.0/24": "fra", "198.51.2.0/24": "nyc", "198.51.3.0/24": "sfo"}
	for _, r := range s.Coverage() {
		if want[r.Prefix] != r.PoP {
			t.Errorf("coverage %s → %s, want %s", r.Prefix, r.PoP, want[r.Prefix])
		}
	}
	m, err := s.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	if m.RTT(5, 0) != 6 || m.RTT(9, 2) != 12 || m.Len() != 10 {
		t.Fatalf("matrix: berlin–ams %v, origin–lon %v, %d locations", m.RTT(5, 0), m.RTT(9, 2), m.Len())
	}
	w, err := s.BuildWorkload()
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Requests) != 150 {
		t.Fatalf("%d requests, want 150", len(w.Requests))
	}
	sites := map[int]bool{}
	for _, r := range w.Requests {
		if r.Client < 5 || r.Client > 8 {
			t.Fatalf("request from location %d: not a site", r.Client)
		}
		if r.Size > 12000 {
			t.Fatalf("size %d above max_size", r.Size)
		}
		sites[r.Client] = true
	}
	if len(sites) != 4 {
		t.Fatalf("requests from %d sites, want all 4", len(sites))
	}
	if cfg := s.SimConfig(); len(cfg.PoPLocs) != 5 || cfg.Origin != OriginName || !cfg.RouteCost || cfg.KillAt != 0 {
		t.Fatalf("sim config %+v", cfg)
	}
}

func TestValidate(t *testing.T) {
	ok := func() *Scenario {
		return &Scenario{PoPs: []string{"a"}, Sites: []Site{{Name: "s"}},
			RTTms:    [][]float64{{0, 5, 9}, {5, 0, 12}, {9, 12, 0}},
			Workload: Workload{Zipf: &Zipf{Requests: 1, Files: 1, Rate: 1, Clients: 1}}}
	}
	if err := ok().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		mutate func(*Scenario)
		want   string
	}{
		{"no site", func(s *Scenario) { s.Sites = nil }, "at least one"},
		{"dup name", func(s *Scenario) { s.Sites[0].Name = "a" }, "repeated"},
		{"origin name", func(s *Scenario) { s.PoPs[0] = OriginName }, "repeated"},
		{"bad prefix", func(s *Scenario) { s.Sites[0].Prefix = "10.1/99" }, "site"},
		{"short matrix", func(s *Scenario) { s.RTTms = s.RTTms[:2] }, "rows"},
		{"ragged", func(s *Scenario) { s.RTTms[1] = s.RTTms[1][:2] }, "entries"},
		{"asymmetric", func(s *Scenario) { s.RTTms[0][1] = 6 }, "symmetric"},
		{"negative", func(s *Scenario) { s.RTTms[2][2] = -1 }, "≥ 0"},
		{"two workloads", func(s *Scenario) { s.Workload.Trace = &Trace{Path: "x", Requests: 1} }, "exactly one"},
		{"no workload", func(s *Scenario) { s.Workload.Zipf = nil }, "exactly one"},
		{"zipf rate", func(s *Scenario) { s.Workload.Zipf.Rate = 0 }, "zipf"},
	} {
		s := ok()
		c.mutate(s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestTraceWorkload: a trace's first N served GETs, at sites, sizes
// capped, gaps divided by the speedup.
func TestTraceWorkload(t *testing.T) {
	dir := t.TempDir()
	log := `a - - [01/Aug/1995:00:00:00 -0400] "GET /x.html HTTP/1.0" 200 50000
b - - [01/Aug/1995:00:00:10 -0400] "GET /y.html HTTP/1.0" 404 -
c - - [01/Aug/1995:00:00:20 -0400] "GET /y.html HTTP/1.0" 200 300
d - - [01/Aug/1995:00:00:40 -0400] "GET /z.html HTTP/1.0" 200 400
`
	if err := os.WriteFile(filepath.Join(dir, "t.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Scenario{PoPs: []string{"a"}, Sites: []Site{{Name: "s"}, {Name: "u"}},
		RTTms:    [][]float64{{0, 5, 5, 9}, {5, 0, 5, 9}, {5, 5, 0, 9}, {9, 9, 9, 0}},
		Workload: Workload{Trace: &Trace{Path: "t.log", Requests: 2, MaxSize: 1000, Speedup: 10}}, dir: dir}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	w, err := s.BuildWorkload()
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Requests) != 2 {
		t.Fatalf("%d requests, want 2 (the first two served)", len(w.Requests))
	}
	r := w.Requests[1]
	if w.Requests[0].Size != 1000 || r.URL != "/y.html" || r.Size != 300 || r.At.Seconds() != 2 || r.Client < 1 || r.Client > 2 {
		t.Fatalf("requests %+v", w.Requests)
	}
}
