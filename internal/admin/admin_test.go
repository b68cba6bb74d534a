package admin

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
)

// tablePolicy is a minimal policy with a table, to test /tables without
// depending on any real policy's internals.
type tablePolicy struct{ picks int }

func (*tablePolicy) Name() string { return "table" }
func (p *tablePolicy) Pick(c *policy.Cluster, r *policy.Request) policy.Decision {
	p.picks++
	return policy.Decision{Node: 0, Fetch: -1}
}
func (*tablePolicy) Done(*policy.Cluster, int, *policy.Request) {}
func (p *tablePolicy) Tables(limit int) any {
	return map[string]int{"picks": p.picks, "limit": limit}
}

func setup(t *testing.T) (*control.Cluster, *httptest.Server) {
	t.Helper()
	cl, err := control.New(&tablePolicy{}, []control.NodeSpec{{URL: "http://127.0.0.1:9001"}, {URL: "http://127.0.0.1:9002", Weight: 3}}, control.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewConfig(cl, NewMetrics(cl, "table"), Config{Token: testToken}))
	t.Cleanup(srv.Close)
	return cl, srv
}

// call makes an admin request as the operator would: with the token, and a
// JSON body.
func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	hdr := []string{"Authorization", "Bearer " + testToken}
	if body != "" {
		hdr = append(hdr, "Content-Type", "application/json")
	}
	code, b, _ := send(t, method, url, body, hdr...)
	return code, b
}

func TestNodesAPI(t *testing.T) {
	cl, srv := setup(t)
	code, body := call(t, "GET", srv.URL+"/nodes", "")
	var nodes []control.NodeInfo
	if err := json.Unmarshal([]byte(body), &nodes); code != 200 || err != nil {
		t.Fatalf("GET /nodes = %d %v %s", code, err, body)
	}
	if len(nodes) != 2 || nodes[1].Weight != 3 || !nodes[0].Up {
		t.Fatalf("nodes = %+v", nodes)
	}

	steps := []struct {
		method, path, body string
		code               int
		contains           string
	}{
		{"POST", "/nodes", `{"url":"http://127.0.0.1:9003","weight":2}`, 201, `"index": 2`},
		{"POST", "/nodes", `{"url":"http://127.0.0.1:9003"}`, 400, "already in the cluster"},
		{"POST", "/nodes", `{"url":"http://127.0.0.1:9004","wieght":2}`, 400, "unknown field"},
		{"PUT", "/nodes/0/weight", `{"weight":0}`, 200, `"weight": 0`},
		{"PUT", "/nodes/0/weight", `{}`, 400, `want N or {\"weight\": N}`},
		{"PUT", "/nodes/0/weight", `{"weight":-1}`, 400, "negative"},
		{"PUT", "/nodes/7/weight", `{"weight":1}`, 404, "no such node"},
		{"PUT", "/nodes/x/weight", `{"weight":1}`, 400, "want a number"},
		{"DELETE", "/nodes/1", "", 204, ""},
		{"DELETE", "/nodes/1", "", 404, "no such node"},
		{"GET", "/tables?limit=5", "", 200, `"limit": 5`},
		{"GET", "/tables?limit=-2", "", 400, "want a count"},
	}
	for _, s := range steps {
		code, body := call(t, s.method, srv.URL+s.path, s.body)
		if code != s.code || !strings.Contains(body, s.contains) {
			t.Errorf("%s %s %s = %d %q, want %d containing %q", s.method, s.path, s.body, code, body, s.code, s.contains)
		}
	}
	got := cl.Nodes()
	if len(got) != 2 || got[0].Weight != 0 || got[1].URL != "http://127.0.0.1:9003" || got[1].Weight != 2 {
		t.Errorf("cluster after API calls = %+v", got)
	}
}

func TestMetrics(t *testing.T) {
	cl, srv := setup(t)
	cl.SetStatus(0, &control.Status{CacheHitRatio: 0.5, Requests: 100, CPUPercent: 50, CPUs: 2})
	cl.SetStatus(1, &control.Status{CacheHitRatio: 1.0, Requests: 300, BusyPercent: 30, InService: 3, SharedProcess: true})
	if err := cl.SetWeight(1, 0); err != nil {
		t.Fatal(err)
	}
	code, body := call(t, "GET", srv.URL+"/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		"shoal_cluster_cache_hit_ratio 0.875", // (0.5·100 + 1.0·300) / 400
		`shoal_cluster_events_total{event="weight",node="1"} 1`,
		`shoal_node_weight{node="1",url="http://127.0.0.1:9002"} 0`,
		`shoal_node_up{node="0",url="http://127.0.0.1:9001"} 1`,
		`shoal_node_effective_weight{node="1",url="http://127.0.0.1:9002"} 0`,
		`shoal_node_effective_weight{node="0",url="http://127.0.0.1:9001"} 1`,
		`shoal_node_load{node="0",url="http://127.0.0.1:9001"} 0.25`,
		`shoal_node_load{node="1",url="http://127.0.0.1:9002"} 0.3`,
		`shoal_node_in_service{node="1",url="http://127.0.0.1:9002"} 3`,
		`shoal_node_handed_off_connections{node="0",url="http://127.0.0.1:9001"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestObserveCountsRequestsDecisionsRetries(t *testing.T) {
	cl, srv := setup(t)
	m := NewMetrics(cl, "table")
	srv.Config.Handler = New(cl, m)
	m.Observe(front.Observation{Node: 0, Path: "relay", Status: 200, Elapsed: 2 * time.Millisecond})
	m.Observe(front.Observation{Node: 1, Path: "passfd", Status: 200, Retried: true})
	m.Observe(front.Observation{Node: -1, Path: "relay", Status: 503})
	_, body := call(t, "GET", srv.URL+"/metrics", "")
	for _, want := range []string{
		`shoal_front_requests_total{code="2xx",node="0",path="relay",policy="table"} 1`,
		`shoal_front_requests_total{code="5xx",node="-1",path="relay",policy="table"} 1`,
		`shoal_policy_decisions_total{outcome="node",policy="table"} 1`,
		`shoal_policy_decisions_total{outcome="handoff",policy="table"} 1`,
		`shoal_policy_decisions_total{outcome="none",policy="table"} 1`,
		"shoal_front_retries_total 1",
		`shoal_front_request_duration_seconds_count{node="0",policy="table"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestStatsNeedsFront(t *testing.T) {
	cl, srv := setup(t)
	if code, _ := call(t, "GET", srv.URL+"/stats", ""); code != 404 {
		t.Errorf("/stats without a front = %d, want 404", code)
	}
	m := NewMetrics(cl, "table")
	m.WatchFront(func() front.Stats {
		return front.Stats{Requests: 7, Paths: map[string]uint64{"passfd": 5}, Handoff: front.HandoffStats{Passed: 5, HybridSize: 2}}
	})
	srv.Config.Handler = New(cl, m)
	code, body := call(t, "GET", srv.URL+"/stats", "")
	if code != 200 || !strings.Contains(body, `"requests": 7`) {
		t.Errorf("/stats = %d %s", code, body)
	}
	_, body = call(t, "GET", srv.URL+"/metrics", "")
	for _, want := range []string{`shoal_front_path_requests_total{path="passfd"} 5`, `shoal_front_handoff_total{event="passed"} 5`,
		`shoal_front_hybrid_decisions_total{reason="size"} 2`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestRepairMetrics: the repair path's counters appear in /stats and
// /metrics when the front runs it, and not otherwise.
func TestRepairMetrics(t *testing.T) {
	cl, srv := setup(t)
	m := NewMetrics(cl, "rr")
	repair := &front.RepairStats{Moved: 9, FallbackNode: 1, Forged: 2}
	m.WatchFront(func() front.Stats { return front.Stats{Paths: map[string]uint64{"repair": 10}, Repair: repair} })
	srv.Config.Handler = New(cl, m)
	if _, body := call(t, "GET", srv.URL+"/stats", ""); !strings.Contains(body, `"moved": 9`) {
		t.Errorf("/stats lacks the repair counters: %s", body)
	}
	_, body := call(t, "GET", srv.URL+"/metrics", "")
	for _, want := range []string{`shoal_front_repair_total{event="moved"} 9`, `shoal_front_repair_total{event="fallback_node"} 1`,
		`shoal_front_repair_total{event="refused_forged"} 2`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	repair = nil
	if _, body := call(t, "GET", srv.URL+"/metrics", ""); strings.Contains(body, "shoal_front_repair_total") {
		t.Error("/metrics reports repair counters without the repair path")
	}
}

// TestSiteMetrics: with virtual hosts the front reports each request's
// site, and /metrics counts them per site and status class.
func TestSiteMetrics(t *testing.T) {
	cl, srv := setup(t)
	m := NewMetrics(cl, "table")
	srv.Config.Handler = New(cl, m)
	m.Observe(front.Observation{Node: 0, Path: "relay", Status: 200, Site: "a.example", Bytes: 1000})
	m.Observe(front.Observation{Node: 0, Path: "relay", Status: 200, Site: "a.example", Bytes: 500})
	m.Observe(front.Observation{Node: 1, Path: "relay", Status: 404, Site: "_default"})
	m.Observe(front.Observation{Node: 1, Path: "relay", Status: 200}) // no vhosts: no site series
	_, body := call(t, "GET", srv.URL+"/metrics", "")
	for _, want := range []string{
		`shoal_site_requests_total{code="2xx",site="a.example"} 2`,
		`shoal_site_requests_total{code="4xx",site="_default"} 1`,
		`shoal_site_sent_bytes_total{site="a.example"} 1500`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Count(body, "shoal_site_requests_total{") != 2 {
		t.Errorf("site series: %d, want 2", strings.Count(body, "shoal_site_requests_total{"))
	}
}

// TestWeightBounded: a weight above policy.MaxWeight is refused (400) by
// PUT /nodes/{i}/weight and POST /nodes and leaves the node as it was:
// math.MaxInt64 under dfwrr or gwrr made every request 503 (their sums
// overflowed).
func TestWeightBounded(t *testing.T) {
	cl, srv := setup(t)
	for _, tc := range []struct{ method, path, body string }{
		{"PUT", "/nodes/0/weight", "9223372036854775807"},
		{"PUT", "/nodes/0/weight", `{"weight": 257}`},
		{"POST", "/nodes", `{"url": "http://127.0.0.1:9009", "weight": 9223372036854775807}`},
		{"POST", "/nodes", `{"url": "http://127.0.0.1:9009", "weight": 1000}`},
	} {
		if code, body := call(t, tc.method, srv.URL+tc.path, tc.body); code != 400 || !strings.Contains(body, "256") {
			t.Errorf("%s %s %s = %d %q, want 400 naming the bound", tc.method, tc.path, tc.body, code, body)
		}
	}
	if code, _ := call(t, "PUT", srv.URL+"/nodes/0/weight", "256"); code != 200 {
		t.Errorf("the largest weight refused: %d", code)
	}
	if got := cl.Nodes(); len(got) != 2 || got[0].Weight != 256 {
		t.Errorf("nodes after the refused calls: %+v", got)
	}
}
