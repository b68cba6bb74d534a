// Package admin serves the front-end's admin API, Prometheus metrics and a
// live dashboard on an address of their own, apart from client traffic, as
// HAProxy's stats socket and nginx's status module are. It is a
// control-plane reader and writer of internal/cluster/control; it never sits on the
// request path. docs/admin.md describes every endpoint, body and key.
//
// Endpoints (JSON unless noted; request bodies are JSON, read strictly: an
// unknown field is an error):
//
//	GET    /                      the dashboard: an embedded page polling /dashboard.json (dashboard.go)
//	GET    /nodes                 every node: weight, health, active, load, requests, hit ratio
//	POST   /nodes                 add a node: {"url": "http://h:p", "weight": 1, "group": ""} (URL checked by control.ParseNodeURL);
//	                              a partitioned cluster rebalances first and answers {"index": i, "rebalance": {…}}
//	DELETE /nodes/{i}             remove node i (in-flight requests finish); no body; 204, or 200 with the rebalance
//	PUT    /nodes/{i}/weight      set node i's weight: 5 or {"weight": 5}; 0 drains it
//	GET    /tables?limit=N        the policy's tables (lard's target map, tbccrd's URL table)
//	GET    /stats                 the front's counters (Stats: snake_case keys, "status": {"2xx": n, …}, per data path, handoffs)
//	GET    /dashboard.json        what the dashboard draws (Snapshot): nodes, latency totals, decisions, /stats
//	GET    /metrics               Prometheus text format
//
// Access (Config, check; docs/security.md): every request that changes the
// cluster needs "Authorization: Bearer TOKEN", the token being the content
// of --admin-token-file (admin_token_file); without a token file the API is
// read-only. Reads need no token on a loopback address, and need it like
// writes when the API is bound anywhere else — and a non-loopback bind
// without a token refuses to start (CheckBind). Requests a browser makes for
// another site are refused (Origin not this API's, Sec-Fetch-Site other than
// same-origin or none), as are write bodies other than application/json
// (415) and open reads for a Host name that is not localhost (DNS
// rebinding). Refusals are counted in shoal_admin_refused_total{reason}.
//
//	curl -H "Authorization: Bearer $(cat TOKENFILE)" -H 'Content-Type: application/json' \
//	     -X PUT -d 0 http://127.0.0.1:9090/nodes/0/weight
//
// The dashboard only reads, so these rules hold for it unchanged: it needs
// no token on a loopback address, and a strict Content-Security-Policy keeps
// the page to its own origin.
//
// net/http is the right tool here: the admin API is low-rate and benefits
// from the standard library's routing and robustness more than from speed.
package admin

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"shoal/internal/base/cache"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
)

// Server is the admin API over one cluster.
type Server struct {
	cl       *control.Cluster
	metrics  *Metrics
	mux      *http.ServeMux
	cfg      Config
	tokenSum [sha256.Size]byte // of cfg.Token, compared in constant time
	// publisher serves POST /publish once set, versions GET
	// /publish/versions/{v} (publish.go).
	publisher atomic.Pointer[Publisher]
	versions  atomic.Pointer[VersionWriter]
	// rebalancer, once set, runs after POST /nodes and DELETE /nodes/{i}
	// (publish.go).
	rebalancer atomic.Pointer[Rebalancer]
	// cdn, once set, adds a PoP's figures to the dashboard (cdn.go).
	cdn atomic.Pointer[func() CDN]
}

// New builds a read-only admin API for cl (Config's zero value), exporting
// m's metrics at /metrics.
func New(cl *control.Cluster, m *Metrics) *Server { return NewConfig(cl, m, Config{}) }

// NewConfig builds the admin API for cl secured by cfg, exporting m's
// metrics at /metrics.
func NewConfig(cl *control.Cluster, m *Metrics, cfg Config) *Server {
	s := &Server{cl: cl, metrics: m, mux: http.NewServeMux(), cfg: cfg, tokenSum: sha256.Sum256([]byte(cfg.Token))}
	s.mux.HandleFunc("GET /nodes", s.listNodes)
	s.mux.HandleFunc("POST /nodes", s.addNode)
	s.mux.HandleFunc("DELETE /nodes/{i}", s.removeNode)
	s.mux.HandleFunc("PUT /nodes/{i}/weight", s.setWeight)
	s.mux.HandleFunc("GET /tables", s.tables)
	s.mux.HandleFunc("GET /stats", s.stats)
	s.mux.HandleFunc("POST /publish", s.publish)
	s.mux.HandleFunc("GET /publish/versions/{v}", s.version)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry(), promhttp.HandlerOpts{}))
	s.routeDashboard()
	return s
}

// ServeHTTP implements http.Handler: a request passes Config's checks
// (see check) before it is routed.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f := s.check(r); f != nil {
		s.refuse(w, f)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeErr(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.cl.Nodes())
}

// decode reads a small JSON body strictly: unknown fields are errors, so a
// typo in an admin call fails loudly instead of doing nothing.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

func (s *Server) addNode(w http.ResponseWriter, r *http.Request) {
	var spec struct {
		URL    string `json:"url"`
		Weight int    `json:"weight"`
		Group  string `json:"group"`
	}
	if err := decode(r, &spec); err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	i, err := s.cl.Add(control.NodeSpec{URL: spec.URL, Weight: spec.Weight, Group: spec.Group})
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	if s.rebalance(w, r, i, i, http.StatusCreated) {
		return
	}
	writeJSON(w, http.StatusCreated, map[string]int{"index": i})
}

func nodeIndex(w http.ResponseWriter, r *http.Request) (int, bool) {
	i, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || i < 0 {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("node index %q: want a number from GET /nodes", r.PathValue("i")))
		return 0, false
	}
	return i, true
}

func nodeErr(w http.ResponseWriter, err error) {
	code := http.StatusBadRequest
	if errors.Is(err, control.ErrNoNode) {
		code = http.StatusNotFound
	}
	writeErr(w, code, err)
}

func (s *Server) removeNode(w http.ResponseWriter, r *http.Request) {
	i, ok := nodeIndex(w, r)
	if !ok {
		return
	}
	if err := s.cl.Remove(i); err != nil {
		nodeErr(w, err)
		return
	}
	if s.rebalance(w, r, i, -1, http.StatusOK) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) setWeight(w http.ResponseWriter, r *http.Request) {
	i, ok := nodeIndex(w, r)
	if !ok {
		return
	}
	weight, err := decodeWeight(r)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	if err := s.cl.SetWeight(i, weight); err != nil {
		nodeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"index": i, "weight": weight})
}

func (s *Server) tables(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a count >= 0", v))
			return
		}
		limit = n
	}
	var out any
	name := ""
	s.cl.WithPolicy(func(p policy.Policy, _ *policy.Cluster) {
		name = p.Name()
		if t, ok := p.(policy.Tabler); ok {
			out = t.Tables(limit)
		}
	})
	writeJSON(w, http.StatusOK, map[string]any{"policy": name, "tables": out})
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	f := s.metrics.front.Load()
	if f == nil {
		writeErr(w, http.StatusNotFound, errors.New("no front-end attached"))
		return
	}
	writeJSON(w, http.StatusOK, FrontStats((*f)()))
}

// Metrics holds the front's Prometheus collectors on a registry of its own
// (no global registry: two fronts in one process, as tests run them, must
// not collide).
type Metrics struct {
	reg       *prometheus.Registry
	policy    string
	cl        *control.Cluster // for the current policy's name (policyName)
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	retries   prometheus.Counter
	health    *prometheus.CounterVec
	refused   *prometheus.CounterVec
	front     atomic.Pointer[func() front.Stats]
	series    sync.Map // seriesKey → *series
	// siteReqs counts requests per site (front.Config.VHosts) and status
	// class; its label values are bounded by the configured sites, since
	// the front maps every other host to "_default".
	siteReqs       *prometheus.CounterVec
	siteBytes      *prometheus.CounterVec
	siteSeries     sync.Map // siteKey → prometheus.Counter
	siteByteSeries sync.Map // site → prometheus.Counter
}

type siteKey struct {
	site  string
	class int
}

// WatchFront exports the front's own counters (requests per data path,
// handoffs, hybrid decisions, queueing, bytes) at scrape time and serves
// them at /stats, so the request path pays nothing for them.
func (m *Metrics) WatchFront(stats func() front.Stats) {
	if m.front.Swap(&stats) == nil {
		m.reg.MustRegister(&frontCollector{stats: stats})
	}
}

// NewMetrics registers the front's metrics for cluster cl running policy.
// Node gauges (health, weight, active, hit ratios from the nodes' status
// reports, and the cluster's aggregate hit ratio) are read from cl at scrape
// time.
func NewMetrics(cl *control.Cluster, policyName string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), policy: policyName, cl: cl}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shoal_front_requests_total",
		Help: "Requests relayed, by node, policy, data path and status class."}, []string{"node", "policy", "path", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "shoal_front_request_duration_seconds",
		Help:    "Time from request head read to response end, by node and policy.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 14)}, []string{"node", "policy"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shoal_policy_decisions_total",
		Help: "Policy decisions by outcome: node (relayed or redirected to a node), handoff (connection moved), none (no node: 503)."}, []string{"policy", "outcome"})
	m.retries = prometheus.NewCounter(prometheus.CounterOpts{Name: "shoal_front_retries_total",
		Help: "Idempotent requests retried on another node after their first node failed before answering."})
	m.health = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shoal_cluster_events_total",
		Help: "Control-plane changes: node up, down, weight, add, remove."}, []string{"node", "event"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shoal_admin_refused_total",
		Help: "Admin API requests refused, by reason: origin (Origin of another origin), fetch_site (Sec-Fetch-Site of another site), " +
			"read_only (no token configured: a write, or a read from another host), no_token, bad_token, host (an open read for a Host name other than localhost: DNS rebinding), " +
			"content_type (a write body not application/json)."}, []string{"reason"})
	for _, r := range refusedReasons {
		m.refused.WithLabelValues(r) // every reason shows, at 0 until it happens
	}
	m.siteReqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shoal_site_requests_total",
		Help: "Requests by site (virtual host; \"_default\" for hosts that are no configured site) and status class; only with virtual hosts."}, []string{"site", "code"})
	m.siteBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shoal_site_sent_bytes_total",
		Help: "Bytes the front sent to clients (heads and bodies) by site; a handed-off connection's bytes go from the node and are not counted. Only with virtual hosts."}, []string{"site"})
	m.reg.MustRegister(m.siteReqs, m.siteBytes, m.requests, m.latency, m.decisions, m.retries, m.health, m.refused,
		&nodeCollector{cl: cl}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cl.OnChange(func(e control.Event) { m.health.WithLabelValues(strconv.Itoa(e.Node), e.Kind).Inc() })
	return m
}

// Registry returns the registry /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Observe records one finished request (front.Observer): a count by node,
// policy, data path and status class, and the latency histogram.
func (m *Metrics) Observe(o front.Observation) {
	class := 0
	if o.Status >= 100 && o.Status < 600 {
		class = o.Status / 100
	}
	k := seriesKey{node: o.Node, path: o.Path, class: class, policy: m.policyName()}
	v, ok := m.series.Load(k)
	if !ok {
		v, _ = m.series.LoadOrStore(k, m.newSeries(k))
	}
	ser := v.(*series)
	ser.requests.Inc()
	ser.decision.Inc()
	if ser.latency != nil {
		ser.latency.Observe(o.Elapsed.Seconds())
	}
	if o.Retried {
		m.retries.Inc()
	}
	if o.Site != "" {
		sk := siteKey{o.Site, class}
		c, ok := m.siteSeries.Load(sk)
		if !ok {
			code := "none"
			if class > 0 {
				code = strconv.Itoa(class) + "xx"
			}
			c, _ = m.siteSeries.LoadOrStore(sk, m.siteReqs.WithLabelValues(o.Site, code))
		}
		c.(prometheus.Counter).Inc()
		if o.Bytes > 0 {
			b, ok := m.siteByteSeries.Load(o.Site)
			if !ok {
				b, _ = m.siteByteSeries.LoadOrStore(o.Site, m.siteBytes.WithLabelValues(o.Site))
			}
			b.(prometheus.Counter).Add(float64(o.Bytes))
		}
	}
}

// seriesKey names the metric series one observation updates.
type seriesKey struct {
	node   int
	path   string
	class  int    // status class 1–5, 0 when nothing was sent
	policy string // the policy now, which a SIGHUP reload may replace
}

// policyName is the cluster's current policy (policy.Switch after a
// reload), or the name given to NewMetrics.
func (m *Metrics) policyName() string {
	if m.cl != nil {
		if p := m.cl.Policy(); p != nil {
			return p.Name()
		}
	}
	return m.policy
}

// series holds the resolved children for one seriesKey, so the request path
// pays a map load instead of hashing label values (about 400 ns and an
// allocation per request otherwise).
type series struct {
	requests prometheus.Counter
	decision prometheus.Counter
	latency  prometheus.Observer // nil when no node was chosen
}

func (m *Metrics) newSeries(k seriesKey) *series {
	node := strconv.Itoa(k.node)
	code := "none"
	if k.class > 0 {
		code = strconv.Itoa(k.class) + "xx"
	}
	outcome := "node"
	switch {
	case k.node < 0:
		outcome = "none"
	case k.path != "relay" && k.path != "redirect":
		outcome = "handoff"
	}
	s := &series{
		requests: m.requests.WithLabelValues(node, k.policy, k.path, code),
		decision: m.decisions.WithLabelValues(k.policy, outcome),
	}
	if k.node >= 0 {
		s.latency = m.latency.WithLabelValues(node, k.policy)
	}
	return s
}

// nodeCollector exports per-node state at scrape time, so the request path
// never pays for gauges.
type nodeCollector struct{ cl *control.Cluster }

var (
	descUp       = prometheus.NewDesc("shoal_node_up", "1 if the node passes health checks.", []string{"node", "url"}, nil)
	descWeight   = prometheus.NewDesc("shoal_node_weight", "The node's current weight.", []string{"node", "url"}, nil)
	descActive   = prometheus.NewDesc("shoal_node_active_requests", "Requests in flight on the node.", []string{"node", "url"}, nil)
	descHit      = prometheus.NewDesc("shoal_node_cache_hit_ratio", "The node's object hit ratio from its status report.", []string{"node", "url"}, nil)
	descByteHit  = prometheus.NewDesc("shoal_node_cache_byte_hit_ratio", "The node's byte hit ratio from its status report.", []string{"node", "url"}, nil)
	descNodeReqs = prometheus.NewDesc("shoal_node_requests", "Requests the node reports having served.", []string{"node", "url"}, nil)
	descEffW     = prometheus.NewDesc("shoal_node_effective_weight",
		"The weight the policy schedules by: dfwrr's feedback-adjusted weight, else the configured one.", []string{"node", "url"}, nil)
	descLoad = prometheus.NewDesc("shoal_node_load",
		"The node's utilisation in [0,1] as the policies read it: CPU over its cores, or its own busy time when nodes share a process.", []string{"node", "url"}, nil)
	descHeld = prometheus.NewDesc("shoal_node_handed_off_connections",
		"Connections handed off to the node (passfd, repair) and not yet ended; counted in active requests.", []string{"node", "url"}, nil)
	descInService = prometheus.NewDesc("shoal_node_in_service", "Requests the node reports answering now.", []string{"node", "url"}, nil)
	descPeer      = prometheus.NewDesc("shoal_node_peer_total",
		"Peer cooperation from the node's status report (internal/cluster/peer): event=fetches (objects fetched from a peer's memory), fetch_bytes, "+
			"collapsed (requests that waited for another's fetch), failures (fetches that fell back to the local disk), "+
			"served, served_bytes, served_disk (objects sent to peers, read from disk first), refused (peer handshakes without the cluster key).",
		[]string{"node", "url", "event"}, nil)
	descDigest = prometheus.NewDesc("shoal_node_peer_digest",
		"The node's last cache digest (Bloom filter): what=bits, keys, fpr (expected false-positive rate), peers (peer digests held).",
		[]string{"node", "url", "what"}, nil)
	descServed = prometheus.NewDesc("shoal_node_served_bytes_total",
		"File body bytes the node answered (from=all) and those that came from a memory, its cache or a peer's (from=memory): "+
			"the byte hit ratio is memory/all (cache.Served).", []string{"node", "url", "from"}, nil)
	descAggByteHit = prometheus.NewDesc("shoal_cluster_byte_hit_ratio",
		"Aggregate byte hit ratio of the cluster: file bytes answered from a memory over all file bytes answered, summed over nodes.", nil, nil)
	descAggHit = prometheus.NewDesc("shoal_cluster_cache_hit_ratio",
		"Aggregate object hit ratio of the cluster: the nodes' hit ratios weighted by the requests each served.", nil, nil)
)

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descWeight, descActive, descHit, descByteHit, descNodeReqs, descAggHit,
		descEffW, descLoad, descHeld, descInService, descPeer, descDigest, descServed, descAggByteHit} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	var hits, reqs float64
	var served cache.Served
	for _, n := range c.cl.Nodes() {
		lv := []string{strconv.Itoa(n.Index), n.URL}
		up := 0.0
		if n.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, lv...)
		ch <- prometheus.MustNewConstMetric(descWeight, prometheus.GaugeValue, float64(n.Weight), lv...)
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(n.Active), lv...)
		ch <- prometheus.MustNewConstMetric(descEffW, prometheus.GaugeValue, float64(n.EffectiveWeight), lv...)
		ch <- prometheus.MustNewConstMetric(descLoad, prometheus.GaugeValue, n.Load, lv...)
		ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(n.Held), lv...)
		if s := n.Status; s != nil {
			ch <- prometheus.MustNewConstMetric(descInService, prometheus.GaugeValue, float64(s.InService), lv...)
			ch <- prometheus.MustNewConstMetric(descServed, prometheus.CounterValue, float64(s.ObjectBytes), append(lv, "all")...)
			ch <- prometheus.MustNewConstMetric(descServed, prometheus.CounterValue, float64(s.MemoryBytes), append(lv, "memory")...)
			served.ObjectBytes += s.ObjectBytes
			served.MemoryBytes += s.MemoryBytes
			if p := s.Peer; p != nil {
				for _, e := range []struct {
					name string
					v    uint64
				}{{"fetches", p.Fetches}, {"fetch_bytes", p.FetchBytes}, {"collapsed", p.Collapsed}, {"failures", p.Failures},
					{"served", p.Served}, {"served_bytes", p.ServedBytes}, {"served_disk", p.ServedDisk}, {"refused", p.Refused}} {
					ch <- prometheus.MustNewConstMetric(descPeer, prometheus.CounterValue, float64(e.v), append(lv, e.name)...)
				}
				for _, e := range []struct {
					name string
					v    float64
				}{{"bits", float64(p.DigestBits)}, {"keys", float64(p.DigestKeys)}, {"fpr", p.DigestFPR}, {"peers", float64(p.PeerDigests)}} {
					ch <- prometheus.MustNewConstMetric(descDigest, prometheus.GaugeValue, e.v, append(lv, e.name)...)
				}
			}
			ch <- prometheus.MustNewConstMetric(descHit, prometheus.GaugeValue, s.CacheHitRatio, lv...)
			ch <- prometheus.MustNewConstMetric(descByteHit, prometheus.GaugeValue, s.ByteHitRatio, lv...)
			ch <- prometheus.MustNewConstMetric(descNodeReqs, prometheus.GaugeValue, float64(s.Requests), lv...)
			hits += s.CacheHitRatio * float64(s.Requests)
			reqs += float64(s.Requests)
		}
	}
	agg := 0.0
	if reqs > 0 {
		agg = hits / reqs
	}
	ch <- prometheus.MustNewConstMetric(descAggHit, prometheus.GaugeValue, agg, nil...)
	ch <- prometheus.MustNewConstMetric(descAggByteHit, prometheus.GaugeValue, served.ByteHitRatio(), nil...)
}

// frontCollector turns front.Stats into Prometheus metrics at scrape time.
type frontCollector struct{ stats func() front.Stats }

var (
	descPath    = prometheus.NewDesc("shoal_front_path_requests_total", "Requests moved by each data path.", []string{"path"}, nil)
	descConns   = prometheus.NewDesc("shoal_front_connections_accepted_total", "Client connections accepted.", nil, nil)
	descActiveC = prometheus.NewDesc("shoal_front_connections_active", "Client connections open now.", nil, nil)
	descBytes   = prometheus.NewDesc("shoal_front_bytes_total", "Bytes read from (in) and written to (out) clients by the front itself.", []string{"dir"}, nil)
	descQueue   = prometheus.NewDesc("shoal_front_queue_total", "Node-queue events: queued, timeout (503), full (503).", []string{"event"}, nil)
	descBatch   = prometheus.NewDesc("shoal_front_node_head_batches_total",
		"Request heads written to nodes by the batcher: rounds (what=batches) and heads (what=heads); heads/batches is the mean batch; what=piped: heads that went in another request's write, on its node connection (pipelining).", []string{"what"}, nil)
	descHandoff = prometheus.NewDesc("shoal_front_handoff_total",
		"passfd handoff events: passed (fast_passed of them from the raw accept loop), returned, return_refused, redispatched, ended, lost; "+
			"tag mode (nodes move connections by the front's table): tag_served (requests the nodes routed), tag_moved (node-to-node moves), "+
			"tag_asked (connections handed back because the table could not tell), tag_rehomed (of those, passed to another node), "+
			"tag_notes, tag_stale, tag_refused, tag_ended, tag_pushes.", []string{"event"}, nil)
	descFallback = prometheus.NewDesc("shoal_front_fallbacks_total",
		"Requests a handoff path relayed instead, by reason: no_socket (node reported no handoff socket), send (the send failed), "+
			"socket_dir and socket_peer (the node's socket is not trusted), tls (a TLS client connection), "+
			"stream (an HTTP/2 or HTTP/3 stream), proxy (a client address from a PROXY header), "+
			"fast (the raw accept loop gave the connection to the normal path), fast_blocked (… because the node's socket was full).", []string{"reason"}, nil)
	descProto = prometheus.NewDesc("shoal_front_protocol_requests_total",
		"Requests by the protocol the client spoke: h1 (HTTP/1.1 and 1.0), h2, h3.", []string{"protocol"}, nil)
	descProtoConns = prometheus.NewDesc("shoal_front_protocol_connections_total",
		"Client connections that spoke HTTP/2 (h2: ALPN or the h2c preface) or HTTP/3 (h3: QUIC).", []string{"protocol"}, nil)
	descH2 = prometheus.NewDesc("shoal_front_http2_events_total",
		"HTTP/2 events: refused_streams (past max concurrent streams), glitches (streams the client reset or made fail), "+
			"goaway_errors (connections ended by GOAWAY with an error code).", []string{"event"}, nil)
	descProxy = prometheus.NewDesc("shoal_front_proxy_protocol_total",
		"PROXY protocol headers: accepted (from a trusted source), refused (a trusted source sent none or a malformed one), "+
			"untrusted (one from an address outside proxy_protocol_from: closed).", []string{"event"}, nil)
	descEvents = prometheus.NewDesc("shoal_front_events_total",
		"The front's request events: request_heads (parsed, dispatched or refused), retries (sent to a second node), "+
			"fresh_redials (stale pooled node connections replaced), node_dials (connections opened to nodes), "+
			"sent_4xx and sent_5xx (answers the front generated itself).", []string{"event"}, nil)
	descResponses = prometheus.NewDesc("shoal_front_responses_total",
		"Responses to clients by status class, relayed or generated.", []string{"class"}, nil)
	descCPU = prometheus.NewDesc("shoal_front_cpu_percent",
		"The front's CPU use at its last sample (100 = one core), when the hybrid rule samples it.", nil, nil)
	descSteered = prometheus.NewDesc("shoal_front_repair_steered_flows",
		"Flows the repair path steers to nodes now.", nil, nil)
	descRepair = prometheus.NewDesc("shoal_front_repair_total",
		"repair (TCP_REPAIR) handoff events: moved, fallback_freeze, fallback_node, lost, ended, dropped, refused_forged, refused_replayed, refused_stale, refused_malformed, left (tag mode: flows ended at their old holder's report), adopted (connections the nodes accepted themselves), move_reports (node-to-node moves reported).", []string{"event"}, nil)
	descHybrid = prometheus.NewDesc("shoal_front_hybrid_decisions_total",
		"Hybrid data-path decisions (seed 002): hand off for cpu, conns or size, or relay.", []string{"reason"}, nil)
	descLimit = prometheus.NewDesc("shoal_front_connection_limit_total",
		"Client connection limit events: refused_limit and refused_per_ip (503), idle_closed (shed near the limit).", []string{"event"}, nil)
	descAnswers = prometheus.NewDesc("shoal_front_answers_total",
		"Answers the front gave itself instead of a node's, by reason and status class: per_ip and conn_limit (connection limits), "+
			"queue_full, queue_timeout, no_node (503); node_timeout (504); node_error (502); not_implemented (501, 505); "+
			"header_timeout (408), bad_request (400, 431), internal_path (404). Their sums are sent_4xx and sent_5xx.", []string{"reason", "class"}, nil)
	descStream = prometheus.NewDesc("shoal_front_streaming_bodies",
		"Response bodies streaming now after giving back their node slot (slow readers show here).", nil, nil)
)

func (c *frontCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPath, descConns, descActiveC, descBytes, descQueue, descBatch, descHandoff, descFallback,
		descEvents, descResponses, descCPU, descSteered, descRepair, descHybrid, descLimit, descStream, descAnswers,
		descProto, descProtoConns, descH2, descProxy} {
		ch <- d
	}
}

// labelled is one value of a labelled front counter.
type labelled struct {
	label string
	v     uint64
}

func (c *frontCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	counters := func(d *prometheus.Desc, vs ...labelled) {
		for _, e := range vs {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(e.v), e.label)
		}
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	for path, n := range st.Paths {
		counters(descPath, labelled{path, n})
	}
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.CounterValue, float64(st.ConnsAccepted))
	gauge(descActiveC, float64(st.ConnsActive))
	gauge(descStream, float64(st.Streaming))
	counters(descBytes, labelled{"in", st.BytesIn}, labelled{"out", st.BytesOut})
	counters(descQueue, labelled{"queued", st.Queued}, labelled{"timeout", st.QueueTimeouts}, labelled{"full", st.QueueFull})
	counters(descLimit, labelled{"refused_limit", st.RefusedLimit}, labelled{"refused_per_ip", st.RefusedPerIP},
		labelled{"idle_closed", st.IdleShed})
	counters(descBatch, labelled{"batches", st.HeadBatches}, labelled{"heads", st.HeadsBatched}, labelled{"piped", st.HeadsPiped})
	counters(descEvents, labelled{"request_heads", st.Requests}, labelled{"retries", st.Retries},
		labelled{"fresh_redials", st.FreshRedials}, labelled{"node_dials", st.NodeDials},
		labelled{"sent_4xx", st.Sent4xx}, labelled{"sent_5xx", st.Sent5xx})
	for class := 1; class < len(st.Status); class++ {
		counters(descResponses, labelled{strconv.Itoa(class) + "xx", st.Status[class]})
	}
	for _, rc := range st.Answers.ByReason() {
		ch <- prometheus.MustNewConstMetric(descAnswers, prometheus.CounterValue, float64(rc.N), rc.Reason, strconv.Itoa(rc.Class)+"xx")
	}
	h := st.Handoff
	counters(descHandoff, labelled{"passed", h.Passed}, labelled{"fast_passed", h.FastPassed},
		labelled{"returned", h.Returned}, labelled{"return_refused", h.ReturnRefused},
		labelled{"redispatched", h.Redispatched}, labelled{"ended", h.Ended}, labelled{"lost", h.Lost},
		labelled{"tag_served", h.Tag.Served}, labelled{"tag_moved", h.Tag.Moved}, labelled{"tag_asked", h.Tag.Asked},
		labelled{"tag_rehomed", h.Tag.Rehomed}, labelled{"tag_notes", h.Tag.Notes}, labelled{"tag_stale", h.Tag.Stale},
		labelled{"tag_refused", h.Tag.Refused}, labelled{"tag_ended", h.Tag.Ended}, labelled{"tag_pushes", h.Tag.Pushes})
	counters(descFallback, labelled{"no_socket", h.FallbackNoSocket}, labelled{"send", h.FallbackSend},
		labelled{"socket_dir", h.RefusedSocketDir}, labelled{"socket_peer", h.RefusedSocketPeer},
		labelled{"tls", h.FallbackTLS}, labelled{"stream", h.FallbackStream}, labelled{"proxy", h.FallbackProxy},
		labelled{"fast", h.FastFallback}, labelled{"fast_blocked", h.FastBlocked})
	p := st.Protocols
	counters(descProto, labelled{"h1", p.H1Requests}, labelled{"h2", p.H2Requests}, labelled{"h3", p.H3Requests})
	counters(descProtoConns, labelled{"h2", p.H2Conns}, labelled{"h3", p.H3Conns})
	counters(descH2, labelled{"refused_streams", p.H2Refused}, labelled{"glitches", p.H2Glitches}, labelled{"goaway_errors", p.H2Errors})
	counters(descProxy, labelled{"accepted", p.ProxyAccepted}, labelled{"refused", p.ProxyRefused}, labelled{"untrusted", p.ProxyUntrusted})
	counters(descHybrid, labelled{"cpu", h.HybridCPU}, labelled{"conns", h.HybridConns},
		labelled{"size", h.HybridSize}, labelled{"relay", h.HybridRelay})
	gauge(descCPU, h.FrontCPUPercent)
	if r := st.Repair; r != nil {
		counters(descRepair, labelled{"moved", r.Moved}, labelled{"moved_fast", r.Fast},
			labelled{"fallback_freeze", r.FallbackFreeze}, labelled{"fallback_node", r.FallbackNode},
			labelled{"lost", r.Lost}, labelled{"ended", r.Ended}, labelled{"dropped", r.Dropped},
			labelled{"refused_forged", r.Forged}, labelled{"refused_replayed", r.Replayed},
			labelled{"refused_stale", r.Stale}, labelled{"refused_malformed", r.Malformed},
			labelled{"steered_early", r.Early}, labelled{"held", r.Held},
			labelled{"moved_by_nodes", r.Retagged}, labelled{"moves_stale", r.StaleMoves}, labelled{"left", r.Left},
			labelled{"adopted", r.Adopted}, labelled{"move_reports", r.MoveReports})
		gauge(descSteered, float64(r.Steered))
	}
}
