// Package up starts a whole shoal cluster on one machine: a site (generated,
// given, or written from an access log), N nodes on loopback ports, the
// control plane with health checks, the front-end and its admin API — the
// `shoal up` a newcomer runs first (SPEC §1 "up"). Start runs everything in
// one process (relay, redirect); StartProcs runs the front and the nodes as
// separate processes, because passfd and hybrid move sockets between them;
// StartRepair runs them in network namespaces joined to this host, because
// repair needs a virtual IP on several hosts. Each stops everything it
// started.
package up

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shoal/internal/admin"
	"shoal/internal/base/content"
	"shoal/internal/base/store"
	"shoal/internal/base/trace"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/node"
	"shoal/internal/cluster/peer"
	"shoal/internal/cluster/placement"
	"shoal/internal/cluster/policy"
	"shoal/internal/cluster/publish"
	"shoal/internal/config"
	"shoal/internal/gateway"
	"shoal/internal/tools/site"
)

// Config describes the cluster to start. Zero fields take the defaults shown.
type Config struct {
	// Listen is the front-end's client address. Default "127.0.0.1:8080".
	Listen string
	// Admin is the admin API and /metrics address. Default "127.0.0.1:9090";
	// "off" disables it.
	Admin string
	// AdminTokenFile holds the admin API's bearer token; it is created
	// (32 random bytes, hex, mode 0600) if missing and reused if present.
	// Default: DataDir/admin.token.
	AdminTokenFile string
	// Nodes is the number of nodes. Default 4.
	Nodes int
	// Site is the site root to serve; empty generates the sample site in
	// DataDir (or, with SiteFromTrace, a site matching the trace).
	Site string
	// SiteFromTrace, when set, writes a site whose files are the URLs of this
	// access log with their sizes (trace.Sizes), so the log can be replayed.
	SiteFromTrace string
	// DataDir holds generated sites. Default: the user's cache folder/shoal.
	DataDir string
	// CacheMB is each node's memory cache budget in MiB. Default 0: sized
	// from Memory or the memory cgroup's limit (memory.go), else
	// DefaultCacheMB.
	CacheMB int
	// Memory is the memory the whole cluster's processes may use, split
	// between the nodes' caches when CacheMB is 0. Default 0: the memory
	// cgroup's limit, if any.
	Memory int64
	// MemoryPlan is how the memory was planned (filled in by Start):
	// zero when CacheMB was given or no limit was known. Its GoLimit is
	// for in-process nodes' shared runtime.
	MemoryPlan store.Plan
	// Cache is the nodes' replacement policy: lru, gdsf or cgdsf. Default gdsf.
	Cache string
	// Policy is the front's distribution policy. Default DefaultPolicy.
	Policy string
	// Redirect makes Start's front answer each request with a 302 to the
	// chosen node's own URL (the redirect data path) instead of relaying.
	// Default false.
	Redirect bool
	// VHosts serves several sites from one cluster (internal/base/vhost): Site
	// is then a folder of site folders, and empty generates SampleSites.
	// Only with the relay and passfd paths. Default false.
	VHosts bool
	// DigestPeriod is how often each node sends its cache digest to the
	// others (peer.Config.DigestPeriod). Default 0: the nodes' default, 2 s.
	DigestPeriod time.Duration
	// HealthInterval is the active health-check period. Default 1 s.
	HealthInterval time.Duration
	// SendTimeout, MaxConns and MaxConnsPerIP are the front's client send
	// timeout and connection limits (front.Config WriteTimeout,
	// MaxClientConns, MaxConnsPerIP; zero takes the front's defaults,
	// derived from RLIMIT_NOFILE for MaxConns). The nodes of Start share
	// the process and its descriptors, and a relayed request holds three
	// (client, front to node, node side): there MaxConns defaults to half
	// the front's default, a quarter of the limit after the reserve, which
	// leaves room for refusals in flight.
	SendTimeout   time.Duration
	MaxConns      int
	MaxConnsPerIP int
	// IdleTimeout closes a keep-alive client connection idle this long
	// (front.Config.IdleTimeout). Default 0: the front's, 60 s.
	IdleTimeout time.Duration
	// TLS makes the front serve HTTPS with a self-signed certificate in
	// DataDir/tls (listenTLS). Default false.
	TLS bool
	// Protocols are the front's [protocols] keys (HTTP/2, h2c, HTTP/3,
	// PROXY protocol sources, stream limit); zero fields take
	// config.DefaultFront's. HTTP/3 needs TLS.
	Protocols config.Protocols
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// AccessLog, when set, is the front's access log (front.AccessLog);
	// the caller opens and closes it. Default nil: none.
	AccessLog *front.AccessLog
	// Replicas is how many nodes store each file of the site (partitioned
	// storage, internal/cluster/placement): each node's disk holds only its share
	// and it fetches the rest from the holders. Default 0: every node, a
	// full copy. With relay and redirect only so far.
	Replicas int
	// DiskWeights are the nodes' disk sizes in any one unit (placement
	// weights: a node's share of the files follows its weight). Default 1
	// each; a shorter list leaves the rest at 1.
	DiskWeights []float64
	// AdminRoutes are more admin API endpoints ("GET /pops" → handler),
	// behind its token checks, and Collectors more /metrics collectors:
	// `shoal pop` serves its rings' state beside the cluster's. Default none.
	AdminRoutes map[string]http.Handler
	Collectors  []prometheus.Collector
	// Edge, when set, runs every node in cache mode (an HTTP cache in
	// front of an upstream, node.EdgeConfig) with the configuration it
	// returns for node i, and the front keys its policies by host, path
	// and query (front.Config.CacheKeys): no site is generated or served.
	// Default nil: the nodes serve Site.
	Edge func(i int) node.EdgeConfig
}

// DefaultPolicy is the policy `shoal up` uses unless told otherwise:
// tbccrd (seed 000), which the simulator shows ahead on a trace shaped like
// the sample site once the working set exceeds one node's cache: lard's
// locality plus balancing by connections (README, "Choosing a policy").
const DefaultPolicy = "tbccrd"

// DefaultConfig returns `shoal up`'s defaults: Config's zero fields
// take these values.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:8080", Admin: "127.0.0.1:9090", Nodes: 4, Cache: "gdsf", Policy: DefaultPolicy,
		HealthInterval: config.DefaultFront().Health.Interval.Duration}
}

func (c *Config) fill() error {
	d := DefaultConfig()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.Admin == "" {
		c.Admin = d.Admin
	}
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.Nodes < 1 || c.Nodes > 64 {
		return fmt.Errorf("--nodes %d: want 1 to 64", c.Nodes)
	}
	c.planMemory()
	if c.CacheMB < 0 {
		return fmt.Errorf("--cache-mb %d: want a positive size", c.CacheMB)
	}
	if c.Cache == "" {
		c.Cache = d.Cache
	}
	if c.Policy == "" {
		c.Policy = d.Policy
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = d.HealthInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.DataDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		c.DataDir = filepath.Join(base, "shoal")
	}
	if c.AdminTokenFile == "" {
		c.AdminTokenFile = filepath.Join(c.DataDir, "admin.token")
	}
	if c.Replicas < 0 {
		return fmt.Errorf("--replicas %d: want 0 (every node) or a count of nodes", c.Replicas)
	}
	if len(c.DiskWeights) > c.Nodes {
		return fmt.Errorf("--disk-weights: %d weights for %d nodes", len(c.DiskWeights), c.Nodes)
	}
	for _, w := range c.DiskWeights {
		if !(w > 0) {
			return fmt.Errorf("--disk-weights: weight %v, want a positive number", w)
		}
	}
	return nil
}

// errPartitionedPath refuses --replicas on the paths whose nodes run in
// other processes or namespaces (their publisher does not place files yet).
var errPartitionedPath = errors.New("--replicas below --nodes works with --path relay or redirect so far")

// partitioned reports whether the site is spread over the nodes' disks
// rather than copied to every node.
func (c *Config) partitioned() bool { return c.Replicas > 0 && c.Replicas < c.Nodes }

// diskWeight is node i's placement weight.
func (c *Config) diskWeight(i int) float64 {
	if i < len(c.DiskWeights) {
		return c.DiskWeights[i]
	}
	return 1
}

// adminConfig makes or reads the admin token (Config.AdminTokenFile) and
// returns the admin API's security settings for addr, the address it will
// listen on, recording the token in the Cluster for its clients.
func (c *Cluster) adminConfig(addr string) (admin.Config, error) {
	tok, err := admin.LoadOrCreateToken(c.Config.AdminTokenFile)
	if err != nil {
		return admin.Config{}, err
	}
	c.AdminToken, c.AdminTokenFile = tok, c.Config.AdminTokenFile
	public, err := admin.CheckBind(addr, true)
	return admin.Config{Token: tok, Public: public}, err
}

// Cluster is a running cluster.
type Cluster struct {
	// URL is where to point a browser.
	URL string
	// AdminURL is the admin API's base URL, "" when off.
	AdminURL string
	// HTTP3Addr is the UDP address HTTP/3 is served on (Config.Protocols
	// HTTP3), "" when off.
	HTTP3Addr string
	// AdminTokenFile holds the bearer token the admin API wants for
	// changes (and, off loopback, for reads), "" when off.
	AdminTokenFile string
	// AdminToken is that token.
	AdminToken string
	// NodeURLs are the nodes' own URLs.
	NodeURLs []string
	// SiteInfo describes the site being served, for the status line.
	SiteInfo string
	// SiteRoot is the folder the site was served from at start (--site,
	// or the generated one): what SIGHUP publishes again.
	SiteRoot string
	// sites are the virtual hosts' names with VHosts (SiteURLs).
	sites []string
	// Config is the configuration with defaults filled in.
	Config Config

	// Certs is the front's certificate set under Config.TLS (its Reload
	// is the SIGHUP hook), TLSCert the certificate's file; nil and "" else.
	Certs   *front.Certs
	TLSCert string

	Front *front.Server
	// frontCfg is the front's configuration as started (for tests).
	frontCfg front.Config
	Control  *control.Cluster
	Metrics  *admin.Metrics
	// Publisher publishes new versions of the site to the nodes (`shoal
	// publish`, POST /publish); nil where the nodes cannot take part.
	Publisher *publish.Coordinator

	nodes  []*node.Server
	pubdir string // published version trees, removed at Shutdown
	// gone are the nodes that left (Leave): out of publishes.
	goneMu sync.Mutex
	gone   map[int]bool
	gw     *gateway.Gateway
	// closers close the listeners the gateway was given.
	closers []func()
	errc    chan error
}

// loopbackFronts is what in-process nodes trust for X-Forwarded-For: the
// front `shoal up` runs on loopback next to them.
var loopbackFronts = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// policyConfig is the front's policy configuration for nodes with c's
// caches: tbccrd's and weblins' mirrors of the node caches get the nodes'
// budget and evict in the nodes' order (policy.Config.NodeCache), as the
// simulator's mirrors follow its nodes.
func (c *Config) policyConfig() policy.Config {
	budget := int64(c.CacheMB) << 20
	pc := policy.Config{CacheBytes: budget, NodeCache: c.Cache, NoCacheAbove: store.Config{MemoryBytes: budget}.DefaultMaxObject(),
		NodeFootprint: func(size int64) int64 { return store.Footprint(size, 0) }}
	if c.Edge != nil {
		pc.MaxURLs, pc.MaxURLBytes = c.cacheFrontURLs()
	}
	return pc
}

// cacheFrontURLs bounds the per-URL tables of a front before nodes in
// cache mode (the policy's URL table, and the sizes the control plane
// learns) to as many URLs as the nodes' memory tiers hold objects of one
// page, and 128 bytes of URL text each: the URLs a cache is asked for are
// unbounded, and the front routes by what it remembers only to find a
// copy in a node's memory, so its memory follows the nodes' budget rather
// than the number of URLs. A URL it forgot goes where the policy sends a
// new one, and that node's miss asks its peers first.
func (c *Config) cacheFrontURLs() (urls int, text int64) {
	n := max(int64(c.CacheMB)<<20*int64(c.Nodes)/store.Footprint(1, 0), minCacheFrontURLs)
	return int(n), n * 128
}

// minCacheFrontURLs is the least cacheFrontURLs gives, for tiny budgets.
const minCacheFrontURLs = 4096

// Start brings the cluster up and returns once every listener is open.
func Start(cfg Config) (*Cluster, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if cfg.VHosts && cfg.Redirect {
		return nil, errors.New("--vhosts works with the relay and passfd paths")
	}
	if cfg.Edge != nil {
		return startEdge(cfg)
	}
	root, info, vm, err := prepareRoot(&cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Config: cfg, SiteInfo: info, SiteRoot: root, sites: siteNames(vm), errc: make(chan error, cfg.Nodes+2)}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()

	// The nodes' ports are opened first: each node knows its peers (peer
	// fetch, cache digests) by address, in the front's order.
	var lns []net.Listener
	var addrs []string
	for i := range cfg.Nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	key, err := peer.LoadOrCreateKey(clusterKeyFile(&cfg))
	if err != nil {
		for _, l := range lns {
			l.Close()
		}
		return nil, err
	}
	roots := make([]string, len(lns))
	for i := range roots {
		roots[i] = root
	}
	if cfg.partitioned() {
		if cfg.VHosts {
			for _, l := range lns {
				l.Close()
			}
			return nil, errors.New("--replicas with --vhosts: not supported yet")
		}
		if roots, err = c.seedPartitions(root, addrs); err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, err
		}
	}
	for i, ln := range lns {
		n, err := node.New(node.Config{Root: roots[i], VHosts: cfg.VHosts, CacheBytes: int64(cfg.CacheMB) << 20, CachePolicy: cfg.Cache, Memory: cfg.MemoryPlan,
			SharedProcess: true, Logger: cfg.Logger.With("node", i), TrustedFronts: loopbackFronts,
			Peer: peer.Config{Self: i, Peers: addrs, Key: key, DigestPeriod: cfg.DigestPeriod}})
		if err != nil {
			for _, l := range lns[i:] {
				l.Close()
			}
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		c.nodes = append(c.nodes, n)
		u := "http://" + ln.Addr().String()
		c.NodeURLs = append(c.NodeURLs, u)
		go c.watch(func() error { return n.Serve(ln) })
	}

	if err := c.startGateway(gateway.Config{Path: redirectPath(cfg.Redirect), VHosts: vm}, true); err != nil {
		return nil, err
	}
	c.showStorage()
	if c.Publisher == nil {
		if err := c.startPublisher(root); err != nil {
			return nil, err
		}
	}
	if err := c.serve(); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// redirectPath is Start's data path: the redirect path when asked for,
// else nil, the front's relay.
func redirectPath(redirect bool) front.DataPath {
	if redirect {
		return front.Redirect()
	}
	return nil
}

// frontConfig is the front's configuration for this cluster: `shoal
// front`'s defaults (config.DefaultFront, the one source of them) with
// the settings `shoal up` takes itself. sharedProcess says the nodes run
// in this process: they hold each relayed client three times (client,
// front→node, node side) and also pay for refusals in flight, so
// MaxConns defaults to half the front's own default, which leaves the
// reserve to the admin API.
func (c *Config) frontConfig(urls []string, sharedProcess bool) config.Front {
	fc := config.DefaultFront()
	fc.Listen, fc.Policy, fc.Admin = c.Listen, c.Policy, c.Admin
	for _, u := range urls {
		fc.Nodes = append(fc.Nodes, config.Node{URL: u})
	}
	fc.Health.Interval.Duration = c.HealthInterval
	if c.SendTimeout != 0 {
		fc.Limits.SendTimeout.Duration = c.SendTimeout
	}
	if c.IdleTimeout != 0 {
		fc.Limits.IdleTimeout.Duration = c.IdleTimeout
	}
	fc.Limits.MaxConns, fc.Limits.MaxConnsPerIP = c.MaxConns, c.MaxConnsPerIP
	if c.MaxConns == 0 && sharedProcess {
		fc.Limits.MaxConns = max(front.DefaultMaxClientConns(front.DescriptorLimit())/2, 1)
	}
	off := false // the nodes may share the process: its monitor thread is theirs too
	fc.SysmonIdle = &off
	p := c.Protocols
	if p.HTTP2 != nil {
		fc.Protocols.HTTP2 = p.HTTP2
	}
	if p.MaxConcurrentStreams != 0 {
		fc.Protocols.MaxConcurrentStreams = p.MaxConcurrentStreams
	}
	fc.Protocols.H2C, fc.Protocols.HTTP3, fc.Protocols.ProxyProtocolFrom = p.H2C, p.HTTP3, p.ProxyProtocolFrom
	return fc
}

// startGateway builds the front, its control plane over NodeURLs and the
// admin API (unless off) with gc's data path; serve starts them.
func (c *Cluster) startGateway(gc gateway.Config, sharedProcess bool) error {
	pc := c.Config.policyConfig()
	gc.Front, gc.PolicyConfig = c.Config.frontConfig(c.NodeURLs, sharedProcess), &pc
	gc.Metrics, gc.AccessLog, gc.Logger, gc.Report = true, c.Config.AccessLog, c.Config.Logger, c.report
	gc.AdminRoutes, gc.Collectors = c.Config.AdminRoutes, c.Config.Collectors
	fln, err := front.Listen(c.Config.Listen)
	if err != nil {
		return fmt.Errorf("front: %w (is another shoal running? try --listen 127.0.0.1:0)", err)
	}
	c.closers = append(c.closers, func() { fln.Close() })
	gc.Listener = fln
	c.URL = "http://" + fln.Addr().String() + "/"
	if gc.Certs, err = c.selfSigned(); err != nil {
		return err
	}
	if c.Config.Admin != "off" {
		if gc.AdminConfig, err = c.adminConfig(c.Config.Admin); err != nil {
			return err
		}
		aln, err := net.Listen("tcp", c.Config.Admin)
		if err != nil {
			return fmt.Errorf("admin: %w (use --admin off or another address)", err)
		}
		c.closers = append(c.closers, func() { aln.Close() })
		gc.AdminListener = aln
		c.AdminURL = "http://" + aln.Addr().String()
	}
	if c.gw, err = gateway.New(gc); err != nil {
		return err
	}
	c.Control, c.Metrics, c.Front, c.frontCfg = c.gw.Control, c.gw.Metrics, c.gw.Server(), c.gw.ServerConfig()
	return nil
}

// serve starts the gateway with the publisher on its admin API.
func (c *Cluster) serve() error {
	var rebalance func(context.Context, int) (publish.Result, error)
	if c.Config.partitioned() {
		rebalance = c.rebalance
	}
	c.gw.SetPublisher(c.Publisher, false, rebalance)
	if err := c.gw.Start(); err != nil {
		return err
	}
	c.HTTP3Addr = c.gw.HTTP3Addr()
	return nil
}

// prepareSite returns the site root to serve and a one-line description.
func prepareSite(cfg *Config) (root, info string, err error) {
	switch {
	case cfg.Site != "":
		if fi, err := os.Stat(cfg.Site); err != nil || !fi.IsDir() {
			return "", "", fmt.Errorf("--site %s: not a directory", cfg.Site)
		}
		return cfg.Site, "site " + cfg.Site, nil
	case cfg.SiteFromTrace != "":
		sizes, err := trace.Sizes(cfg.SiteFromTrace)
		if err != nil {
			return "", "", fmt.Errorf("--site-from-trace: %w", err)
		}
		name := strings.TrimSuffix(filepath.Base(cfg.SiteFromTrace), ".gz")
		root = filepath.Join(cfg.DataDir, "trace-"+name)
		n, skipped, err := site.FromSizes(root, sizes)
		if err != nil {
			return "", "", err
		}
		return root, fmt.Sprintf("%d files from %s (%d URLs skipped) in %s", n, filepath.Base(cfg.SiteFromTrace), skipped, root), nil
	default:
		root = filepath.Join(cfg.DataDir, "site")
		sum, err := site.Generate(root, site.Config{})
		if err != nil {
			return "", "", err
		}
		return root, sum.String(), nil
	}
}

// watch runs serve and reports an error other than a normal close on Err.
func (c *Cluster) watch(serve func() error) { c.report(serve()) }

// report passes an error other than a normal close on to Err.
func (c *Cluster) report(err error) {
	if err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) ||
		errors.Is(err, front.ErrServerClosed) || errors.Is(err, node.ErrServerClosed) {
		return
	}
	c.errc <- err
}

// Err delivers the first error a server stops with (nil errors are not sent).
func (c *Cluster) Err() <-chan error { return c.errc }

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// then closes everything.
func (c *Cluster) Shutdown(ctx context.Context) error {
	var errs []error
	if c.gw != nil {
		errs = append(errs, c.gw.Shutdown(ctx))
	}
	for _, f := range c.closers {
		f()
	}
	for _, n := range c.nodes {
		errs = append(errs, n.Shutdown(ctx))
	}
	if c.pubdir != "" {
		os.RemoveAll(c.pubdir)
	}
	return errors.Join(errs...)
}

// Close stops everything at once.
func (c *Cluster) Close() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.Shutdown(ctx)
}

// startPublisher sets up publishing for nodes that serve root: version
// trees go to a folder of this run under DataDir (a restarted `shoal up`
// serves its --site or sample site again, so old versions are not kept).
func (c *Cluster) startPublisher(root string) error {
	dir, err := c.publishDir()
	if err != nil {
		return err
	}
	pc := publish.Config{Versions: dir, Current: root, Nodes: c.participants, Logger: c.Config.Logger,
		OnCommit: func(_ uint64, root string, d content.Diff) { c.committed(root, d) }}
	if c.Config.partitioned() {
		pc.Replicas, pc.Place, pc.Members = c.Config.Replicas, c.place, c.members
	}
	c.Publisher, err = publish.New(pc)
	return err
}

// participants are the nodes of a publish: every node of the control
// plane that was not removed — an in-process node that has not left
// (Leave) is driven directly, any other (a `shoal node` added through the
// admin API's POST /nodes) through its publish control endpoint with the
// admin token, as `shoal front` drives its nodes. Before the control plane
// exists (the first version is seeded) they are the in-process nodes.
func (c *Cluster) participants() []publish.Participant {
	c.goneMu.Lock()
	defer c.goneMu.Unlock()
	var ps []publish.Participant
	if c.Control == nil {
		for i, n := range c.nodes {
			if !c.gone[i] {
				ps = append(ps, publish.Local(c.NodeURLs[i], n))
			}
		}
		return ps
	}
	for _, b := range c.Control.Backends() {
		switch k := slices.Index(c.NodeURLs, b.URL); {
		case k < 0:
			ps = append(ps, publish.Remote(b.URL, c.AdminToken, nil))
		case !c.gone[k]:
			ps = append(ps, publish.Local(b.URL, c.nodes[k]))
		}
	}
	return ps
}

// place gives each participant its placement identity: the node's
// address, which its peers know it by, and its disk weight (1 for a node
// added through the admin API).
func (c *Cluster) place(ps []publish.Participant) []placement.Node {
	ns := make([]placement.Node, len(ps))
	for k, p := range ps {
		ns[k] = placement.Node{ID: strings.TrimPrefix(p.Name(), "http://"), Weight: c.weightOf(p.Name())}
	}
	return ns
}

// weightOf is the disk weight of the node at url: its --disk-weights
// entry when it is one of the nodes started here, else 1.
func (c *Cluster) weightOf(url string) float64 {
	if i := slices.Index(c.NodeURLs, url); i >= 0 {
		return c.Config.diskWeight(i)
	}
	return 1
}

// members is the peer list every node's tree of a partitioned version
// carries (publish.Config.Members): each node slot's address in the
// front's order, "" for a node that was removed or left. Nil before the
// control plane exists: the seeded nodes start with their peers.
func (c *Cluster) members() []string {
	if c.Control == nil {
		return nil
	}
	ms := c.Control.Members()
	c.goneMu.Lock()
	defer c.goneMu.Unlock()
	for i := range c.gone {
		if i < len(ms) {
			ms[i] = ""
		}
	}
	return ms
}

// rebalance places the served version again over the current members
// after a node joined (joined, its index) or was removed (joined -1): the
// admin API's POST /nodes and DELETE /nodes/{i} call it before answering.
// A newcomer takes no request until it holds its share: it is drained
// (weight 0) during the rebalance and gets its weight back afterwards.
func (c *Cluster) rebalance(ctx context.Context, joined int) (publish.Result, error) {
	return c.gw.Rebalance(ctx, c.Publisher, joined, c.showStorage)
}

// seedPartitions writes the site's first version as one tree per node
// (each file on Replicas nodes, plus the manifest) before the nodes start,
// and returns the trees in node order.
func (c *Cluster) seedPartitions(root string, addrs []string) ([]string, error) {
	if err := c.startPublisher(root); err != nil {
		return nil, err
	}
	ns := make([]placement.Node, len(addrs))
	for i, a := range addrs {
		ns[i] = placement.Node{ID: a, Weight: c.Config.diskWeight(i)}
	}
	roots, res, err := c.Publisher.Seed(root, ns)
	if err != nil {
		return nil, err
	}
	if p := res.Partition; p != nil {
		c.SiteInfo += fmt.Sprintf("; each file on %d of %d nodes", p.Replicas, len(addrs))
	}
	return roots, nil
}

// Leave takes node i out of the cluster for good, alive or dead: the
// front stops sending it requests, the served version is placed again
// over the remaining nodes (each of its files copied from a surviving
// holder, so every file has Replicas copies again; publish.Rebalance), and
// the node is stopped. It returns the rebalance's result.
func (c *Cluster) Leave(ctx context.Context, i int) (publish.Result, error) {
	if i < 0 || i >= len(c.nodes) {
		return publish.Result{}, fmt.Errorf("leave: no node %d", i)
	}
	c.goneMu.Lock()
	if c.gone == nil {
		c.gone = map[int]bool{}
	}
	c.gone[i] = true
	c.goneMu.Unlock()
	if c.Control != nil {
		c.Control.SetWeight(i, 0) // drain: no new requests
	}
	var res publish.Result
	var err error
	if c.Publisher != nil {
		if res, err = c.Publisher.Rebalance(ctx); err != nil {
			return res, fmt.Errorf("leave node %d: %w", i, err)
		}
	}
	c.nodes[i].Shutdown(ctx)
	if c.Control != nil {
		c.Control.Remove(i)
	}
	c.showStorage()
	return res, nil
}

// JoinArgs are the `shoal node` flags, --listen aside, of a node that may
// join this partitioned cluster live (then POST /nodes with its URL): it
// starts on the served version (a full copy) and takes its share, and its
// peers, from the rebalance the admin API runs. Nil when the site is not
// partitioned or the admin API is off.
func (c *Cluster) JoinArgs() []string {
	if !c.Config.partitioned() || c.Publisher == nil || c.AdminURL == "" {
		return nil
	}
	return []string{"--root", filepath.Join(c.pubdir, publish.CurrentLink), "--publish-dir", c.pubdir,
		"--admin-token-file", c.AdminTokenFile, "--peer-key-file", clusterKeyFile(&c.Config), "--trusted-fronts", "127.0.0.0/8,::1"}
}

// showStorage gives the policy the nodes' placement (policy.Storage):
// each node slot by its address and disk weight, in the front's order, a
// node that was removed or left with weight 0. Nothing when every node
// holds the whole site.
func (c *Cluster) showStorage() {
	if c.Control == nil || !c.Config.partitioned() {
		return
	}
	ids := c.Control.Members()
	live := c.members()
	ns := make([]placement.Node, len(ids))
	for i, id := range ids {
		if i < len(c.NodeURLs) {
			id = strings.TrimPrefix(c.NodeURLs[i], "http://") // a removed slot keeps its ID
		}
		ns[i] = placement.Node{ID: id, Weight: c.weightOf("http://" + id)}
		if id == "" || i >= len(live) || live[i] == "" {
			ns[i].Weight = 0
		}
	}
	c.Control.SetStorage(&policy.Storage{Nodes: ns, Replicas: c.Config.Replicas})
}

// committed follows a publish in the front (gateway.Committed): the
// policy's tables forget what the nodes dropped from their caches.
func (c *Cluster) committed(root string, d content.Diff) {
	if c.gw != nil {
		c.gw.Committed(root, d)
	}
}

// publishDir makes (once) the folder of this run's published versions.
func (c *Cluster) publishDir() (string, error) {
	if c.pubdir != "" {
		return c.pubdir, nil
	}
	if err := os.MkdirAll(c.Config.DataDir, 0o755); err != nil {
		return "", fmt.Errorf("publish: %w", err)
	}
	dir, err := os.MkdirTemp(c.Config.DataDir, "published-")
	if err != nil {
		return "", fmt.Errorf("publish: %w", err)
	}
	c.pubdir = dir
	return dir, nil
}

// clusterKeyFile is where `shoal up` keeps the nodes' cluster key (peer
// fetch): DataDir/cluster.key, created on first use.
func clusterKeyFile(cfg *Config) string { return filepath.Join(cfg.DataDir, "cluster.key") }

// peerArgs are the node flags that make node processes cooperate: the
// cluster key and every node's address, and, when loopback is set,
// loopback as the trusted front (StartProcs runs the front in this process).
func (p *Procs) peerArgs(addrs []string, loopback bool) ([]string, error) {
	file := clusterKeyFile(&p.Config)
	if _, err := peer.LoadOrCreateKey(file); err != nil {
		return nil, err
	}
	args := []string{"--peer-key-file", file, "--peers", strings.Join(addrs, ",")}
	if loopback {
		args = append(args, "--trusted-fronts", "127.0.0.0/8,::1")
	}
	if p.Config.DigestPeriod != 0 {
		args = append(args, "--digest-period", p.Config.DigestPeriod.String())
	}
	return args, nil
}
