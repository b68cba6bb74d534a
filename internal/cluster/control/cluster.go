// Package control is the front-end's control plane: the table of back-end
// nodes, their health and reported load, and the one place where the
// request-distribution policy is consulted. The data plane (internal/cluster/front)
// asks Pick for a node and reports Done; it never touches the policy or the
// tables directly, so health checks, the admin API and the policy can change
// the cluster while requests flow (SPEC §1 "front").
//
// A policy is not safe for concurrent use, so every call into it happens
// under one mutex. A decision costs tens of nanoseconds, far below the
// microseconds a relayed request costs, so the lock is not a bottleneck at the
// request rates one front-end core reaches.
package control

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"shoal/internal/base/cache"
	"shoal/internal/cluster/peer"
	"shoal/internal/cluster/policy"
)

// NodeSpec describes a node as configured.
type NodeSpec struct {
	// URL is the node's base URL, e.g. "http://127.0.0.1:9001".
	URL string
	// Weight is the node's capacity weight; 0 means 1 (use SetWeight to drain).
	Weight int
	// Group is the node's capacity class for gwrr.
	Group string
}

// Backend is one node as the data plane sees it: where to dial and counters
// the data plane updates without taking the cluster lock.
type Backend struct {
	// Index is the node's stable slot in the policy's view.
	Index int
	// URL is the configured base URL.
	URL string
	// Addr is the host:port to dial.
	Addr string

	// Requests counts requests dispatched to this node.
	Requests atomic.Int64
	// Failures counts connect errors and resets reported through Failed.
	Failures atomic.Int64
	// InFlight is the number of requests currently dispatched and not Done.
	InFlight atomic.Int64
	// Held is the number of connections handed off to this node and not
	// yet reported ended or handed back (Hold); they count in the policy's
	// Active like requests in flight.
	Held atomic.Int64
	// downMarks counts every down-marking, by the checker or by a failed
	// request, so the checker restarts its good-check streak after any of
	// them (HAProxy: rise counts from the last failure, whatever saw it).
	downMarks atomic.Uint64
	// sizesFrom is 1 + the content version whose size index was learned
	// from this node (0: none yet).
	sizesFrom atomic.Uint64

	status atomic.Pointer[Status]
}

// Status is a node's last self-report from GET /.shoal/status, which the
// health checker stores and the admin API shows.
type Status struct {
	ActiveConnections int64   `json:"active_connections"`
	Requests          int64   `json:"requests"`
	BytesSent         int64   `json:"bytes_sent"`
	CacheObjects      int64   `json:"cache_objects"`
	CacheBytes        int64   `json:"cache_bytes"`
	CacheHitRatio     float64 `json:"cache_hit_ratio"`
	// CacheHits and CacheMisses count the node's cache lookups, its
	// peers' fetches from it included (CacheHitRatio is their ratio).
	CacheHits     int64   `json:"cache_hits"`
	CacheMisses   int64   `json:"cache_misses"`
	ByteHitRatio  float64 `json:"byte_hit_ratio"`
	CPUPercent    float64 `json:"cpu_percent"`
	RSSBytes      int64   `json:"rss_bytes"`
	Goroutines    int64   `json:"goroutines"`
	HandoffSocket string  `json:"handoff_socket"`
	// ContentVersion is the version of the node's content tree; when it
	// changes the health checker fetches the node's size index (sizes.go).
	ContentVersion uint64 `json:"content_version"`
	// InService is the number of requests the node is answering now;
	// BusyPercent the time it spent answering requests over the wall time
	// since its previous report (100 = one request in service all along);
	// CPUs the cores its process may use (GOMAXPROCS); SharedProcess that
	// it shares its process with other nodes (`shoal up`), so CPUPercent
	// is not its own. See nodeLoad.
	InService     int64   `json:"in_service"`
	BusyPercent   float64 `json:"busy_percent"`
	CPUs          int     `json:"cpus"`
	SharedProcess bool    `json:"shared_process"`
	// BusyNanos is the node's time spent answering requests since it
	// started (node.Status.BusyNanos).
	BusyNanos int64 `json:"busy_ns"`
	// Served is the node's answered file bytes and those from a memory
	// (object_bytes, memory_bytes inline; cache.Served).
	cache.Served
	// Peer is the node's peer-fetch report (internal/cluster/peer.Stats), nil
	// when the node does not cooperate with its peers.
	Peer *PeerStatus `json:"peer,omitempty"`
}

// PeerStatus is a node's peer counters as its status report carries them
// (peer.Stats, declared there once).
type PeerStatus = peer.Stats

// LastStatus returns the node's last status report, or nil before the first.
func (b *Backend) LastStatus() *Status { return b.status.Load() }

// Options tunes a Cluster. The zero value is usable.
type Options struct {
	// Clock returns monotonic time for policy.Request.Now; nil uses the real
	// clock measured from New. The simulator and tests pass their own.
	Clock func() time.Duration
	// MaxSizes bounds the URL → size table (sizes.go). Default
	// DefaultMaxSizes.
	MaxSizes int
	// MaxSizeBytes bounds the URL text in that table. Default
	// DefaultMaxSizeBytes.
	MaxSizeBytes int64
}

// Cluster holds the node table and the policy.
type Cluster struct {
	mu       sync.Mutex
	view     policy.Cluster
	pol      policy.Policy
	backends []*Backend
	clock    func() time.Duration
	// held maps a handed-off connection's id to the node holding it (Hold).
	held map[uint64]holdEntry
	// sizes is the URL → size table (sizes.go), at most maxSizes entries.
	sizes                   map[string]int64
	maxSizes                int
	sizeBytes, maxSizeBytes int64 // URL text in sizes, and its bound

	// events receives health and membership changes for metrics; optional.
	onChange atomic.Pointer[func(Event)]
}

// Event is a control-plane change worth counting (health flips, weight
// changes, membership changes).
type Event struct {
	Node int
	Kind string // "up", "down", "weight", "add", "remove", "panic" (a pick that ignored health: panicPick)
}

// ErrNoNode is returned for an index that does not name a live node.
var ErrNoNode = errors.New("no such node")

// New builds a cluster over specs with policy p. Every node starts up;
// the health checker (Checker) marks nodes down as it learns.
func New(p policy.Policy, specs []NodeSpec, opts Options) (*Cluster, error) {
	if p == nil {
		return nil, errors.New("cluster: nil policy")
	}
	c := &Cluster{pol: p, clock: opts.Clock, maxSizes: opts.MaxSizes}
	if c.maxSizes <= 0 {
		c.maxSizes = DefaultMaxSizes
	}
	if c.maxSizeBytes = opts.MaxSizeBytes; c.maxSizeBytes <= 0 {
		c.maxSizeBytes = DefaultMaxSizeBytes
	}
	if c.clock == nil {
		start := time.Now()
		c.clock = func() time.Duration { return time.Since(start) }
	}
	for _, s := range specs {
		if _, err := c.Add(s); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Policy returns the cluster's policy (for the admin API's table dumps; call
// its methods only through WithPolicy).
func (c *Cluster) Policy() policy.Policy { return c.pol }

// WithPolicy runs f with the policy and view under the cluster lock, for
// readers such as the admin API that dump policy tables.
func (c *Cluster) WithPolicy(f func(p policy.Policy, v *policy.Cluster)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c.pol, &c.view)
}

// OnChange adds a callback for control-plane events (metrics, the
// operational log); callbacks run in the order they were added, on the
// goroutine that caused the event, possibly under the cluster's lock, so
// they must be quick and must not call back into the Cluster.
func (c *Cluster) OnChange(f func(Event)) {
	for {
		old := c.onChange.Load()
		g := f
		if old != nil {
			prev := *old
			g = func(e Event) { prev(e); f(e) }
		}
		if c.onChange.CompareAndSwap(old, &g) {
			return
		}
	}
}

func (c *Cluster) emit(e Event) {
	if f := c.onChange.Load(); f != nil {
		(*f)(e)
	}
}

// Pick asks the policy for a node for r and records the dispatch. A Decision
// with Node == -1 means no node can take the request (answer 503), and the
// returned Backend is nil.
func (c *Cluster) Pick(r *policy.Request) (policy.Decision, *Backend) {
	return c.PickExcept(r, -1)
}

// PickExcept is Pick with node exclude taken out of consideration, for the one
// retry of an idempotent request whose first node failed before answering.
func (c *Cluster) PickExcept(r *policy.Request, exclude int) (policy.Decision, *Backend) {
	if r.Now == 0 {
		r.Now = c.clock()
	}
	c.mu.Lock()
	if r.Size < 0 {
		if n, ok := c.sizes[r.URL]; ok {
			r.Size = n // as the simulator passes the trace's size (sizes.go)
		}
	}
	var restore bool
	if exclude >= 0 && exclude < len(c.view.Nodes) && c.view.Nodes[exclude].Up {
		c.view.Nodes[exclude].Up = false
		c.view.Version++
		restore = true
	}
	d := c.pol.Pick(&c.view, r)
	panicked := false
	if d.Node < 0 {
		d, panicked = c.panicPick(r, exclude)
	}
	if restore {
		c.view.Nodes[exclude].Up = true
		c.view.Version++
	}
	if d.Node < 0 || d.Node >= len(c.backends) {
		c.mu.Unlock()
		return policy.None, nil
	}
	c.view.Start(d.Node)
	b := c.backends[d.Node]
	c.mu.Unlock()
	if panicked {
		c.emit(Event{Node: d.Node, Kind: "panic"})
	}
	b.Requests.Add(1)
	b.InFlight.Add(1)
	return d, b
}

// panicPick is the answer when the policy finds no node although some
// nodes with weight are only marked down by health checks: it asks the
// policy again as if they were up (Envoy's panic mode; nginx likewise tries
// its servers again when all are marked failed). A health checker that
// cannot reach overloaded nodes in time must not turn a slow cluster into a
// dead one; a node that is really gone fails the connect at once, and the
// front's one retry and passive marking handle that request. Drained
// (weight 0), removed and excluded nodes stay out. Called with c.mu held.
func (c *Cluster) panicPick(r *policy.Request, exclude int) (policy.Decision, bool) {
	var down []int
	for i := range c.view.Nodes {
		n := &c.view.Nodes[i]
		if !n.Up && !n.Removed && n.Weight > 0 && i != exclude {
			down = append(down, i)
		}
	}
	if len(down) == 0 {
		return policy.None, false
	}
	for _, i := range down {
		c.view.Nodes[i].Up = true
	}
	c.view.Version++
	d := c.pol.Pick(&c.view, r)
	for _, i := range down {
		c.view.Nodes[i].Up = false
	}
	c.view.Version++
	return d, d.Node >= 0
}

// Done records that the request r dispatched to b finished.
func (c *Cluster) Done(b *Backend, r *policy.Request) {
	b.InFlight.Add(-1)
	c.mu.Lock()
	c.view.Finish(b.Index)
	if r.Status == 200 && r.Size >= 0 {
		c.learnSize(r.URL, r.Size) // a relayed response's Content-Length
	}
	c.pol.Done(&c.view, b.Index, r)
	c.mu.Unlock()
}

// Failed reports a connect error or reset on b (passive health). The node is
// marked down at once; the active checker brings it back after Rise good
// checks.
func (c *Cluster) Failed(b *Backend, err error) {
	b.Failures.Add(1)
	c.SetUp(b.Index, false)
}

// CloseConn tells a policy that keeps per-connection state that the client
// connection conn has closed.
func (c *Cluster) CloseConn(conn uint64) {
	cc, ok := c.pol.(policy.ConnCloser)
	if !ok {
		return
	}
	c.mu.Lock()
	cc.CloseConn(conn)
	c.mu.Unlock()
}

// Backends returns the live (not removed) backends.
func (c *Cluster) Backends() []*Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Backend, 0, len(c.backends))
	for i, b := range c.backends {
		if !c.view.Nodes[i].Removed {
			out = append(out, b)
		}
	}
	return out
}

// Members returns every node slot's address (host:port) in index order,
// "" for a removed node: the peer list the nodes of a partitioned cluster
// need, whose indices are the front's (policy.Decision.Fetch, the
// Shoal-Fetch hint), since slots are never reused.
func (c *Cluster) Members() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.backends))
	for i, b := range c.backends {
		if !c.view.Nodes[i].Removed {
			out[i] = b.Addr
		}
	}
	return out
}

// NodeInfo is a snapshot of one node for the admin API.
type NodeInfo struct {
	Index  int    `json:"index"`
	URL    string `json:"url"`
	Weight int    `json:"weight"`
	Group  string `json:"group,omitempty"`
	Up     bool   `json:"up"`
	// Active is what the load-aware policies read: requests in flight
	// plus Held, the connections handed off to the node and not yet
	// ended (held.go).
	Active int `json:"active"`
	Held   int `json:"held"`
	// EffectiveWeight is the weight the policy schedules by, when it has
	// its own (dfwrr's feedback-adjusted weight); else Weight.
	EffectiveWeight int `json:"effective_weight"`
	// Load is the utilisation in [0,1] the policy reads (nodeLoad).
	Load     float64 `json:"load"`
	Requests int64   `json:"requests"`
	Failures int64   `json:"failures"`
	HitRatio float64 `json:"hit_ratio"`
	// Status is the node's last self-report, nil before the first check.
	Status *Status `json:"status,omitempty"`
}

// Nodes returns a snapshot of every live node.
func (c *Cluster) Nodes() []NodeInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]NodeInfo, 0, len(c.backends))
	var eff []int
	if w, ok := c.pol.(weighter); ok {
		eff = w.Weights()
	}
	for i, b := range c.backends {
		n := c.view.Nodes[i]
		if n.Removed {
			continue
		}
		info := NodeInfo{Index: i, URL: b.URL, Weight: n.Weight, Group: n.Group, Up: n.Up,
			Active: n.Active, Held: int(b.Held.Load()), EffectiveWeight: n.Weight,
			Load: n.Load, Requests: b.Requests.Load(), Failures: b.Failures.Load()}
		if i < len(eff) {
			info.EffectiveWeight = eff[i]
		}
		if s := b.status.Load(); s != nil {
			info.HitRatio = s.CacheHitRatio
			info.Status = s
		}
		out = append(out, info)
	}
	return out
}

// ParseNodeURL checks a node's base URL and returns the host:port to dial.
// It is the one check for every way a node enters the cluster — --nodes,
// [[node]] in a config file, POST /nodes on the admin API — so that a URL
// refused on the command line is refused at run time too.
// A node URL is http://HOST:PORT and nothing more: the front speaks plain
// HTTP/1.1 to nodes, never prefixes a path, never sends userinfo, and
// guessing a default port would hide typos; so a scheme other than http,
// userinfo, a path (even "/"), a query, a fragment, or a missing or
// out-of-range port are refused, each with the fix.
func ParseNodeURL(s string) (addr string, err error) {
	bad := func(format string, a ...any) (string, error) {
		return "", &NodeURLError{URL: s, Problem: fmt.Sprintf(format, a...)}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil && !strings.Contains(s, "://"):
		return bad("no scheme")
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad("not a URL (%v)", err)
	case u.Scheme == "":
		return bad("no scheme")
	case u.Scheme != "http":
		return bad("scheme %q is not http (nodes are spoken to in plain HTTP/1.1)", u.Scheme)
	case u.Opaque != "" || u.Hostname() == "":
		return bad("no host")
	case u.User != nil:
		return bad("has userinfo (user@), which would never be sent")
	case u.Path != "" || u.RawPath != "":
		return bad("has a path %q; a node URL names a server, and requests keep their own path", u.Path)
	case u.RawQuery != "" || u.ForceQuery:
		return bad("has a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return bad("has a fragment")
	case u.Port() == "":
		return bad("no port")
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
		return bad("port %q is not in 1–65535", u.Port())
	}
	return u.Host, nil
}

// NodeURLError is ParseNodeURL's refusal: the URL, what is wrong with it,
// and (in Error) how to write it, so a config file error can put the
// problem and the fix in their own places.
type NodeURLError struct {
	URL     string
	Problem string
}

// NodeURLFix is how to write a node URL, the fix every NodeURLError names.
const NodeURLFix = "write it as http://HOST:PORT, e.g. http://127.0.0.1:9001"

func (e *NodeURLError) Error() string {
	return fmt.Sprintf("node URL %q: %s; fix: %s", e.URL, e.Problem, NodeURLFix)
}

// Add puts a new node into the cluster and returns its index. Its URL must
// pass ParseNodeURL, and no live node may already have the same host:port.
func (c *Cluster) Add(s NodeSpec) (int, error) {
	addr, err := ParseNodeURL(s.URL)
	if err != nil {
		return -1, err
	}
	if err := checkWeight(s.Weight); err != nil {
		return -1, fmt.Errorf("node %s: %w", s.URL, err)
	}
	if s.Weight == 0 {
		s.Weight = 1
	}
	c.mu.Lock()
	for i, b := range c.backends {
		if strings.EqualFold(b.Addr, addr) && !c.view.Nodes[i].Removed {
			c.mu.Unlock()
			return -1, fmt.Errorf("node %s: already in the cluster", s.URL)
		}
	}
	i := len(c.backends)
	c.backends = append(c.backends, &Backend{Index: i, URL: s.URL, Addr: addr})
	c.view.Nodes = append(c.view.Nodes, policy.Node{Name: s.URL, Weight: s.Weight, Group: s.Group, Up: true})
	c.view.Version++
	c.mu.Unlock()
	c.emit(Event{Node: i, Kind: "add"})
	return i, nil
}

// Remove takes node i out of the cluster. Its slot stays (indices are
// stable for the policy's tables); in-flight requests finish.
func (c *Cluster) Remove(i int) error {
	if err := c.update(i, func(n *policy.Node) { n.Removed = true; n.Up = false }); err != nil {
		return err
	}
	c.emit(Event{Node: i, Kind: "remove"})
	return nil
}

// SetWeight changes node i's weight; 0 drains it.
func (c *Cluster) SetWeight(i, w int) error {
	if err := checkWeight(w); err != nil {
		return fmt.Errorf("node %d: %w", i, err)
	}
	if err := c.update(i, func(n *policy.Node) { n.Weight = w }); err != nil {
		return err
	}
	c.emit(Event{Node: i, Kind: "weight"})
	return nil
}

// checkWeight refuses a weight below 0 or above policy.MaxWeight.
func checkWeight(w int) error {
	switch {
	case w < 0:
		return fmt.Errorf("weight %d is negative (0 drains a node)", w)
	case w > policy.MaxWeight:
		return fmt.Errorf("weight %d is above the largest, %d", w, policy.MaxWeight)
	}
	return nil
}

// SetUp sets node i's health state.
func (c *Cluster) SetUp(i int, up bool) {
	if !up {
		c.mu.Lock()
		if i >= 0 && i < len(c.backends) {
			c.backends[i].downMarks.Add(1)
		}
		c.mu.Unlock()
	}
	changed := false
	_ = c.update(i, func(n *policy.Node) { changed = n.Up != up; n.Up = up })
	if changed {
		kind := "down"
		if up {
			kind = "up"
		}
		c.emit(Event{Node: i, Kind: kind})
	}
}

// SetStatus stores node i's status report and feeds its load (nodeLoad)
// into the policy view, where dfwrr reads it.
func (c *Cluster) SetStatus(i int, s *Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.backends) {
		return
	}
	c.backends[i].status.Store(s)
	c.view.Nodes[i].Load = nodeLoad(s)
}

func (c *Cluster) update(i int, f func(*policy.Node)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.view.Nodes) || c.view.Nodes[i].Removed {
		return fmt.Errorf("node %d: %w", i, ErrNoNode)
	}
	f(&c.view.Nodes[i])
	c.view.Version++
	return nil
}

// SetStorage tells the policy where the site's files are stored
// (partitioned storage; policy.Cluster.Storage): the placement of the
// version the nodes serve, index-aligned with the nodes. nil: every node
// stores every file. The owner of the publisher calls it when the
// placement changes (start, a publish, a node leaving).
func (c *Cluster) SetStorage(s *policy.Storage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.view.Storage = s
	c.view.Version++
}
