package admin

import (
	"embed"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/policy"
)

// The dashboard is three embedded files: a page, its script and
// its style sheet, served at GET /, /dashboard.js and /dashboard.css. The
// script polls GET /dashboard.json, same-origin, once a second and draws the
// figures and their recent history; nothing is fetched from anywhere else,
// which the Content-Security-Policy below enforces in the browser. The
// dashboard only reads, so it passes the same checks as any read (check):
// on a loopback address it needs no token; on a public one every read needs
// the token, which a page cannot send, so there the dashboard is refused
// like any other tokenless read (docs/admin.md: use an SSH tunnel).
//
//go:embed dashboard
var dashboardFS embed.FS

// dashboardCSP lets the page load its own script and style sheet and fetch
// from its own origin, and nothing else: no inline script or style, no
// other origin, no framing by other pages (clickjacking), no form posts.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// dashboardFiles maps each dashboard URL path to its embedded file and
// media type.
var dashboardFiles = map[string][2]string{
	"/":              {"dashboard/index.html", "text/html; charset=utf-8"},
	"/dashboard.js":  {"dashboard/dashboard.js", "text/javascript; charset=utf-8"},
	"/dashboard.css": {"dashboard/dashboard.css", "text/css; charset=utf-8"},
}

// secureHeaders sets the headers every dashboard response carries.
func secureHeaders(h http.Header) {
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// dashboardAsset serves one of dashboardFiles.
func (s *Server) dashboardAsset(w http.ResponseWriter, r *http.Request) {
	f, ok := dashboardFiles[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := dashboardFS.ReadFile(f[0])
	if err != nil { // cannot happen: the files are embedded
		writeErr(w, http.StatusInternalServerError, err)
		return
	}
	secureHeaders(w.Header())
	w.Header().Set("Content-Type", f[1])
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// Snapshot is what GET /dashboard.json serves: cumulative counters at one
// instant. The dashboard turns two snapshots into rates (requests/s, mean
// latency over the interval), so the server keeps no history.
type Snapshot struct {
	// Time is when the snapshot was taken, in Unix milliseconds.
	Time int64 `json:"time"`
	// Policy is the distribution policy's name.
	Policy string `json:"policy"`
	// Nodes is every node of the cluster.
	Nodes []NodeSnapshot `json:"nodes"`
	// Decisions counts policy decisions by outcome, as
	// shoal_policy_decisions_total: "node", "handoff", "none".
	Decisions map[string]uint64 `json:"decisions"`
	// Stats is what GET /stats serves, nil with no front attached.
	Stats *Stats `json:"stats"`
	// CDN is the PoP's content figures, nil unless the API serves a PoP.
	CDN *CDN `json:"cdn,omitempty"`
}

// NodeSnapshot is one node in a Snapshot: the control plane's view
// (control.NodeInfo), the node's own last report, and the front's latency
// histogram totals for it.
type NodeSnapshot struct {
	Index        int     `json:"index"`
	URL          string  `json:"url"`
	Up           bool    `json:"up"`
	Weight       int     `json:"weight"`
	Active       int     `json:"active"`    // requests in flight from the front
	Load         float64 `json:"load"`      // the policy's load figure
	Requests     int64   `json:"requests"`  // requests the front sent it
	Failures     int64   `json:"failures"`  // failed requests and checks
	HitRatio     float64 `json:"hit_ratio"` // from the node's report
	ByteHitRatio float64 `json:"byte_hit_ratio"`
	CacheBytes   int64   `json:"cache_bytes"`
	CPUPercent   float64 `json:"cpu_percent"`
	// LatencyCount and LatencySum (seconds) are the count and sum of
	// shoal_front_request_duration_seconds for this node.
	LatencyCount uint64  `json:"latency_count"`
	LatencySum   float64 `json:"latency_sum"`
}

// snapshot gathers a Snapshot; it reads the Prometheus collectors, not the
// request path, so it costs the front nothing.
func (s *Server) snapshot() Snapshot {
	snap := Snapshot{Time: time.Now().UnixMilli(), Nodes: []NodeSnapshot{}, Decisions: map[string]uint64{"node": 0, "handoff": 0, "none": 0}}
	s.cl.WithPolicy(func(p policy.Policy, _ *policy.Cluster) { snap.Policy = p.Name() })
	type lat struct {
		n   uint64
		sum float64
	}
	lats := map[string]lat{}
	if m := s.metrics; m != nil {
		collect(m.latency, func(labels map[string]string, d *dto.Metric) {
			if h := d.GetHistogram(); h != nil {
				l := lats[labels["node"]]
				lats[labels["node"]] = lat{l.n + h.GetSampleCount(), l.sum + h.GetSampleSum()}
			}
		})
		collect(m.decisions, func(labels map[string]string, d *dto.Metric) {
			snap.Decisions[labels["outcome"]] += uint64(d.GetCounter().GetValue())
		})
		if f := m.front.Load(); f != nil {
			st := FrontStats((*f)())
			snap.Stats = &st
		}
	}
	if f := s.cdn.Load(); f != nil {
		c := (*f)()
		snap.CDN = &c
	}
	for _, n := range s.cl.Nodes() {
		ns := nodeSnapshot(n)
		l := lats[strconv.Itoa(n.Index)]
		ns.LatencyCount, ns.LatencySum = l.n, l.sum
		snap.Nodes = append(snap.Nodes, ns)
	}
	return snap
}

func nodeSnapshot(n control.NodeInfo) NodeSnapshot {
	ns := NodeSnapshot{Index: n.Index, URL: n.URL, Up: n.Up, Weight: n.Weight, Active: n.Active, Load: n.Load,
		Requests: n.Requests, Failures: n.Failures, HitRatio: n.HitRatio}
	if st := n.Status; st != nil {
		ns.ByteHitRatio, ns.CacheBytes, ns.CPUPercent = st.ByteHitRatio, st.CacheBytes, st.CPUPercent
	}
	return ns
}

// collect calls fn with the labels and value of every series c holds.
func collect(c prometheus.Collector, fn func(labels map[string]string, d *dto.Metric)) {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		labels := map[string]string{}
		for _, lp := range d.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		fn(labels, &d)
	}
}

func (s *Server) dashboardData(w http.ResponseWriter, r *http.Request) {
	secureHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, s.snapshot())
}

// routeDashboard adds the dashboard's routes to the API's.
func (s *Server) routeDashboard() {
	for p := range dashboardFiles {
		if p == "/" {
			p = "/{$}" // "/" alone would match every unknown path
		}
		s.mux.HandleFunc("GET "+p, s.dashboardAsset)
	}
	s.mux.HandleFunc("GET /dashboard.json", s.dashboardData)
}
