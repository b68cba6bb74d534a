// Package scenario reads a CDN scenario file: the PoPs, the client sites,
// the round-trip delays between every pair of them and the origin, and a
// workload. One file drives both the WAN lab (PoP processes and client
// namespaces on the userspace switch of internal/cdn/wan) and `shoal sim
// cdn --scenario`, so that the two can be compared row by row: the
// simulator must model what the live PoPs do.
//
// Locations are numbered in one order everywhere: the PoPs first, then
// the sites, then the origin (Names). In the lab, location i is the WAN
// switch's node i (address 10.77.0.(i+1)). A site stands for the clients
// behind one resolver: its address prefix (the EDNS client subnet its
// queries carry) belongs in the coverage table to its nearest PoP, as seed
// 003 §1 builds coverage zones from proximity.
package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"shoal/internal/base/trace"
	"shoal/internal/cdn/cdndns"
	"shoal/internal/cdn/cdnsim"
)

// OriginName is the origin's location name in Names.
const OriginName = "origin"

// Scenario is one scenario file (JSON).
type Scenario struct {
	// Comment is free text (JSON has no comments).
	Comment string `json:"comment,omitempty"`
	// PoPs are the PoPs' names (also their Chord IDs' source, so the lab
	// and the simulator agree on every key's home).
	PoPs []string `json:"pops"`
	// Sites are the client sites.
	Sites []Site `json:"sites"`
	// RTTms is the square matrix of round-trip times in ms over Names:
	// PoPs, then sites, then the origin.
	RTTms [][]float64 `json:"rtt_ms"`
	// Workload is what the sites' clients ask.
	Workload Workload `json:"workload"`
	// Redirect runs the PoPs with --redirect (and the simulator's
	// Redirect).
	Redirect bool `json:"redirect,omitempty"`

	dir string // the file's folder, for a relative trace path
}

// Site is a client site.
type Site struct {
	Name string `json:"name"`
	// Prefix is the site's address prefix, sent as the EDNS client
	// subnet; default 198.51.K.0/24 for site K (0-based).
	Prefix string `json:"prefix,omitempty"`
}

// Workload is a Zipf workload or a slice of a trace; exactly one is set.
type Workload struct {
	Zipf  *Zipf  `json:"zipf,omitempty"`
	Trace *Trace `json:"trace,omitempty"`
	// Seed places clients at sites (a seeded hash of the client's name).
	Seed uint64 `json:"seed,omitempty"`
}

// Zipf is trace.Synth's workload: Zipf popularity, SURGE sizes capped at
// MaxSize, Poisson arrivals at Rate, from Clients clients.
type Zipf struct {
	Requests int     `json:"requests"`
	Files    int     `json:"files"`
	Alpha    float64 `json:"alpha,omitempty"`
	Rate     float64 `json:"rate"`
	Clients  int     `json:"clients"`
	MaxSize  int64   `json:"max_size,omitempty"`
	Seed     int64   `json:"seed,omitempty"`
}

// Trace is the first Requests GETs (answered 2xx/304) of an access log,
// with sizes capped at MaxSize (0: as logged); Path is relative to the
// scenario file.
type Trace struct {
	Path     string `json:"path"`
	Requests int    `json:"requests"`
	MaxSize  int64  `json:"max_size,omitempty"`
	// Speedup divides the log's gaps (a day in minutes); default 1.
	Speedup float64 `json:"speedup,omitempty"`
}

// Load reads and checks a scenario file.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	var s Scenario
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	s.dir = filepath.Dir(path)
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return &s, nil
}

// Validate reports the first thing wrong with s, and fills in defaults.
func (s *Scenario) Validate() error {
	if len(s.PoPs) < 1 || len(s.Sites) < 1 {
		return errors.New("needs at least one PoP and one site")
	}
	seen := map[string]bool{OriginName: true}
	for i := range s.Sites {
		if s.Sites[i].Prefix == "" {
			s.Sites[i].Prefix = fmt.Sprintf("198.51.%d.0/24", i)
		}
		if _, err := netip.ParsePrefix(s.Sites[i].Prefix); err != nil {
			return fmt.Errorf("site %q: %w", s.Sites[i].Name, err)
		}
	}
	for _, n := range s.Names()[:len(s.PoPs)+len(s.Sites)] {
		if n == "" || seen[n] {
			return fmt.Errorf("name %q is empty, repeated or %q", n, OriginName)
		}
		seen[n] = true
	}
	n := len(s.Names())
	if n > 250 {
		return fmt.Errorf("%d locations: the WAN lab holds at most 250", n)
	}
	if len(s.RTTms) != n {
		return fmt.Errorf("rtt_ms has %d rows, want %d (PoPs, sites, origin)", len(s.RTTms), n)
	}
	for i, r := range s.RTTms {
		if len(r) != n {
			return fmt.Errorf("rtt_ms row %d has %d entries, want %d", i+1, len(r), n)
		}
		for j, v := range r {
			if v < 0 || v != s.RTTms[j][i] {
				return fmt.Errorf("rtt_ms[%d][%d] = %v: delays must be ≥ 0 and symmetric", i, j, v)
			}
		}
	}
	w := s.Workload
	switch {
	case (w.Zipf == nil) == (w.Trace == nil):
		return errors.New("workload: give exactly one of zipf and trace")
	case w.Zipf != nil && (w.Zipf.Requests < 1 || w.Zipf.Files < 1 || w.Zipf.Rate <= 0 || w.Zipf.Clients < 1):
		return errors.New("workload: zipf needs requests, files, rate and clients > 0")
	case w.Trace != nil && (w.Trace.Path == "" || w.Trace.Requests < 1):
		return errors.New("workload: trace needs a path and requests > 0")
	}
	return nil
}

// Names are the locations: PoPs, sites, then the origin.
func (s *Scenario) Names() []string {
	out := append([]string(nil), s.PoPs...)
	for _, x := range s.Sites {
		out = append(out, x.Name)
	}
	return append(out, OriginName)
}

// SiteLoc is site k's location; OriginLoc the origin's.
func (s *Scenario) SiteLoc(k int) int { return len(s.PoPs) + k }

// OriginLoc is the origin's location (the last).
func (s *Scenario) OriginLoc() int { return len(s.PoPs) + len(s.Sites) }

// Matrix is the delays as the simulator's matrix.
func (s *Scenario) Matrix() (*cdnsim.Matrix, error) { return cdnsim.NewMatrix(s.Names(), s.RTTms) }

// PoPLocs are the PoPs' locations (cdnsim.Config.PoPLocs).
func (s *Scenario) PoPLocs() []int {
	out := make([]int, len(s.PoPs))
	for i := range out {
		out[i] = i
	}
	return out
}

// Nearest is the PoP (index) nearest location loc, ties to the lower
// index: the PoP a site's anycast DNS query reaches and its coverage PoP.
func (s *Scenario) Nearest(loc int) int {
	best := 0
	for i := range s.PoPs {
		if s.RTTms[loc][i] < s.RTTms[loc][best] {
			best = i
		}
	}
	return best
}

// Coverage is the coverage table: each site's prefix → its nearest PoP.
func (s *Scenario) Coverage() []cdndns.Rule {
	out := make([]cdndns.Rule, len(s.Sites))
	for k, x := range s.Sites {
		out[k] = cdndns.Rule{Prefix: x.Prefix, PoP: s.PoPs[s.Nearest(s.SiteLoc(k))]}
	}
	return out
}

// BuildWorkload builds the workload: requests in time order, each client at a site
// (a seeded hash of its name), Client being the site's location.
func (s *Scenario) BuildWorkload() (*cdnsim.Workload, error) {
	if z := s.Workload.Zipf; z != nil {
		syn := trace.Synth{Files: z.Files, Requests: z.Requests, Alpha: z.Alpha, Rate: z.Rate, Seed: z.Seed, MaxSize: z.MaxSize}
		w, err := cdnsim.Zipf(syn, z.Clients, len(s.Sites), s.Workload.Seed)
		if err != nil {
			return nil, err
		}
		return s.atSites(w, 0, 1), nil
	}
	t := s.Workload.Trace
	p := t.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.dir, p)
	}
	r, err := trace.Open(p)
	if err != nil {
		return nil, fmt.Errorf("scenario trace: %w", err)
	}
	defer r.Close()
	w, err := cdnsim.FromSource(&firstN{src: r, n: t.Requests}, len(s.Sites), s.Workload.Seed, 0)
	if err != nil {
		return nil, err
	}
	return s.atSites(w, t.MaxSize, t.Speedup), nil
}

// atSites moves each request's client from site index to location, caps
// sizes and compresses time.
func (s *Scenario) atSites(w *cdnsim.Workload, maxSize int64, speedup float64) *cdnsim.Workload {
	if speedup <= 0 {
		speedup = 1
	}
	for i := range w.Requests {
		r := &w.Requests[i]
		r.Client = s.SiteLoc(r.Client)
		if maxSize > 0 {
			r.Size = min(r.Size, maxSize)
		}
		r.At = time.Duration(float64(r.At) / speedup)
	}
	return w
}

// Sizes are the workload's body sizes by URL (the origin's files).
func Sizes(w *cdnsim.Workload) map[string]int64 {
	out := map[string]int64{}
	for _, r := range w.Requests {
		out[r.URL] = r.Size
	}
	return out
}

// firstN stops a trace after n records that a CDN would serve.
type firstN struct {
	src trace.Source
	n   int
}

func (f *firstN) Next() (trace.Record, error) {
	if f.n <= 0 {
		return trace.Record{}, io.EOF
	}
	r, err := f.src.Next()
	if err == nil && r.Method == "GET" && (r.Status >= 200 && r.Status < 300 || r.Status == 304) {
		f.n--
	}
	return r, err
}

// SimConfig is the simulator's configuration for the scenario: its
// defaults (the live PoPs'), the PoPs at their places under their names,
// the origin's place, no PoP killed, Redirect, and the time a live miss
// spends before its fetch (RouteCost), which the lab's clients wait for.
func (s *Scenario) SimConfig() cdnsim.Config {
	cfg := cdnsim.DefaultConfig()
	cfg.PoPLocs, cfg.Origin, cfg.KillAt, cfg.Redirect, cfg.RouteCost = s.PoPLocs(), OriginName, 0, s.Redirect, true
	return cfg
}
