// Package gateway assembles one running front-end with everything around
// it: the control plane over the nodes (policy, weights, health checks),
// the data plane (front.Server) on its listener with TLS, limits and
// access log, the admin API with /metrics, and the publish wiring that
// keeps the policy's tables in step with each new site version. `shoal
// front`, `shoal up` (in-process nodes and node processes) and `shoal pop`
// (through internal/up) all start their front here, so a front option is
// wired once: a key of config.Front, mapped to front.Config in serverConfig.
//
// It imports downward only: the cluster tier, internal/admin and
// internal/config; the commands and internal/up import it.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shoal/internal/admin"
	"shoal/internal/base/accept"
	"shoal/internal/base/content"
	"shoal/internal/base/sysmon"
	"shoal/internal/base/vhost"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
	"shoal/internal/cluster/publish"
	"shoal/internal/config"
)

// Config is one front and its control plane. Front holds what a file or
// flags set (config.DefaultFront is every default); the other fields are
// what only a running process has: listeners, the data path it built,
// open files.
type Config struct {
	// Front is the front's configuration: policy, nodes, limits, health,
	// shutdown timeout, sysmon. Its Admin, TLS, Path and access-log keys
	// are read by the caller, which opens what they name (below).
	Front config.Front
	// PolicyConfig replaces Front.Tuning.Config() when set: `shoal up`
	// gives the policy's cache mirrors its nodes' budget.
	PolicyConfig *policy.Config
	// Control tunes the control plane (its learned sizes' bounds). Zero:
	// control's defaults.
	Control control.Options
	// Listener takes the clients. The caller opens it (front.Listen), so
	// that a busy port is reported with advice that fits the command.
	Listener net.Listener
	// Certs, when not nil, serves HTTPS on Listener (front.TLSListener);
	// its Reload is the caller's SIGHUP hook.
	Certs *front.Certs
	// AdminListener serves the admin API with AdminConfig's security; nil
	// turns the admin API off.
	AdminListener net.Listener
	AdminConfig   admin.Config
	// AdminLimits bound the admin API's connections and their time
	// (accept.Limits). Zero: admin.DefaultLimits().
	AdminLimits accept.Limits
	// AdminRoutes are more admin endpoints ("GET /pops" → handler), behind
	// the same token checks; Collectors more /metrics collectors.
	AdminRoutes map[string]http.Handler
	Collectors  []prometheus.Collector
	// Metrics observes the front even without an admin API (tests and
	// `shoal pop`'s sampling read them). Default: only with one.
	Metrics bool
	// Path, Choose and Hybrid are the data path (front.Config); nil Path
	// relays.
	Path   front.DataPath
	Choose func(policy.Decision, *front.Exchange) front.DataPath
	Hybrid front.HybridConfig
	// Sizes is hybrid's table of object sizes, moved to each version a
	// publish commits (Committed). Nil: none.
	Sizes *content.Store
	// VHosts keys the policies' tables by site + path; nil: one site.
	VHosts *vhost.Map
	// CacheKeys keys them by host + path + query, for nodes in cache mode
	// (front.Config.CacheKeys).
	CacheKeys bool
	// AccessLog, when not nil, receives a line per request; the caller
	// opens and closes it.
	AccessLog *front.AccessLog
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Report receives an error a server stops with (not a normal close).
	// Default: Err's channel.
	Report func(error)
}

// Gateway is a front, its control plane and its admin API.
type Gateway struct {
	// Control is the control plane: nodes, weights, health, policy.
	Control *control.Cluster
	// Metrics are the Prometheus metrics; nil without admin API unless
	// Config.Metrics.
	Metrics *admin.Metrics
	// Admin is the admin API's handler; nil when off.
	Admin *admin.Server

	cfg     Config
	sw      *policy.Switch
	cur     atomic.Pointer[front.Server]
	ln      net.Listener
	admin   *http.Server
	adminLn *accept.Listener
	errc    chan error
	cancel  context.CancelFunc

	healthMu   sync.Mutex
	healthStop context.CancelFunc

	h3   *front.HTTP3 // HTTP/3 on the listener's UDP port ([protocols] http3); nil when off
	h3pc net.PacketConn
}

// New builds the control plane, the admin API and the front's server;
// nothing listens or runs until Start, so the caller can hook a publisher
// (SetPublisher) onto the control plane first.
func New(cfg Config) (*Gateway, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pc := cfg.Front.Tuning.Config()
	if cfg.PolicyConfig != nil {
		pc = *cfg.PolicyConfig
	}
	p, err := policy.New(cfg.Front.Policy, pc)
	if err != nil {
		return nil, err
	}
	if cfg.Front.Protocols.HTTP3 && cfg.Certs == nil {
		return nil, errors.New("http3 needs TLS: QUIC carries TLS 1.3 itself (give [[tls]] or --tls-cert/--tls-key, or --tls for shoal up)")
	}
	g := &Gateway{cfg: cfg, sw: policy.NewSwitch(p), errc: make(chan error, 4)} // the switch: SIGHUP may replace the policy
	if g.Control, err = control.New(g.sw, NodeSpecs(cfg.Front.Nodes), cfg.Control); err != nil {
		return nil, err
	}
	for i, n := range cfg.Front.Nodes {
		if n.Weight != nil && *n.Weight == 0 {
			g.Control.SetWeight(i, 0) // NodeSpec treats 0 as 1; the file means "start drained"
		}
	}
	if cfg.Metrics || cfg.AdminListener != nil {
		g.Metrics = admin.NewMetrics(g.Control, cfg.Front.Policy)
		for _, c := range cfg.Collectors {
			g.Metrics.Registry().MustRegister(c)
		}
	}
	srv, err := g.NewServer(cfg.Front)
	if err != nil {
		return nil, err
	}
	g.cur.Store(srv)
	if g.Metrics != nil {
		g.Metrics.WatchFront(g.Stats)
	}
	if cfg.AdminListener != nil {
		g.Metrics.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shoal_admin_connections_refused_total",
			Help: "Admin API connections closed at once: over its connection bounds (total or per address)."}, func() float64 {
			if l := g.adminLn; l != nil {
				return float64(l.Refused.Load())
			}
			return 0
		}))
		if cfg.Certs != nil {
			g.Metrics.Registry().MustRegister(certCollector{cfg.Certs})
		}
		g.Admin = admin.NewConfig(g.Control, g.Metrics, cfg.AdminConfig)
		for pattern, h := range cfg.AdminRoutes {
			g.Admin.Handle(pattern, h)
		}
	}
	return g, nil
}

// NodeSpecs are the control plane's node specs for the file's [[node]]
// entries (or --nodes).
func NodeSpecs(nodes []config.Node) []control.NodeSpec {
	specs := make([]control.NodeSpec, len(nodes))
	for i, n := range nodes {
		specs[i] = control.NodeSpec{URL: n.URL, Group: n.Group}
		if n.Weight != nil {
			specs[i].Weight = *n.Weight
		}
	}
	return specs
}

// serverConfig maps a front configuration to the data plane's: the one
// place a config.Front key reaches front.Config.
func (g *Gateway) serverConfig(fc config.Front) front.Config {
	var obs front.Observer // a nil interface without metrics, not a nil *Metrics
	if g.Metrics != nil {
		obs = g.Metrics
	}
	h2 := front.DefaultH2Config()
	h2.MaxConcurrentStreams = uint32(fc.Protocols.MaxConcurrentStreams)
	proxyFrom, _ := front.ParsePrefixes(fc.Protocols.ProxyProtocolFrom) // checked by config.Front.Validate
	altSvc := ""
	if fc.Protocols.HTTP3 && g.cfg.Certs != nil && g.cfg.Listener != nil {
		if a, ok := g.cfg.Listener.Addr().(*net.TCPAddr); ok {
			altSvc = front.AltSvcH3(a.Port)
		}
	}
	return front.Config{
		HTTP2:          h2,
		NoHTTP2:        fc.Protocols.HTTP2 != nil && !*fc.Protocols.HTTP2,
		H2C:            fc.Protocols.H2C,
		AltSvc:         altSvc,
		ProxyFrom:      proxyFrom,
		VHosts:         g.cfg.VHosts,
		CacheKeys:      g.cfg.CacheKeys,
		MaxHeadBytes:   fc.Limits.MaxHeaderBytes,
		HeaderTimeout:  fc.Limits.HeaderTimeout.Duration,
		IdleTimeout:    fc.Limits.IdleTimeout.Duration,
		WriteTimeout:   fc.Limits.SendTimeout.Duration,
		MaxClientConns: fc.Limits.MaxConns,
		MaxConnsPerIP:  fc.Limits.MaxConnsPerIP,
		MaxConn:        fc.Limits.MaxConnPerNode,
		QueueTimeout:   fc.Limits.QueueTimeout.Duration,
		Path:           g.cfg.Path,
		Choose:         g.cfg.Choose,
		Hybrid:         g.cfg.Hybrid,
		Observer:       obs,
		AccessLog:      g.cfg.AccessLog,
		Logger:         g.cfg.Logger,
	}
}

// ServerConfig is the data plane's configuration as New built it.
func (g *Gateway) ServerConfig() front.Config { return g.serverConfig(g.cfg.Front) }

// NewServer builds a data plane over the control plane with fc's limits
// and the gateway's data path: New's, and a reload's replacement (Swap).
func (g *Gateway) NewServer(fc config.Front) (*front.Server, error) {
	return front.New(g.Control, g.serverConfig(fc))
}

// Server is the data plane serving now.
func (g *Gateway) Server() *front.Server { return g.cur.Load() }

// Stats are the serving data plane's counters.
func (g *Gateway) Stats() front.Stats { return g.cur.Load().Stats() }

// Start runs it all: the operational event log, health checks, the
// monitor thread's priority, the front on Listener (TLS with Certs) and
// the admin API.
func (g *Gateway) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	front.LogEvents(ctx, g.Control, g.Stats, g.cfg.Logger, 0)
	g.RestartHealth(g.cfg.Front.Health)
	if s := g.cfg.Front.SysmonIdle; s != nil && *s {
		if tid, err := sysmon.Idle(); err != nil {
			g.cfg.Logger.Warn("sysmon thread left at normal priority", "err", err)
		} else {
			g.cfg.Logger.Debug("sysmon thread at SCHED_IDLE", "tid", tid)
		}
	}
	g.ln = g.cfg.Listener
	if g.cfg.Certs != nil {
		g.ln = front.TLSListener(g.ln, g.cfg.Certs, front.ALPN(g.ServerConfig())...)
		g.cfg.Certs.LogExpiring(g.cfg.Logger, time.Now())
		if err := g.startHTTP3(); err != nil {
			return err
		}
	}
	go g.serve(g.cur.Load(), g.ln)
	if g.Admin != nil {
		l := g.cfg.AdminLimits
		if l == (accept.Limits{}) {
			l = admin.DefaultLimits()
		}
		g.adminLn = accept.Bound(g.cfg.AdminListener, l)
		g.admin = g.adminLn.HTTPServer(g.Admin)
		go func() { g.report(g.admin.Serve(g.adminLn)) }()
	}
	return nil
}

// startHTTP3 serves HTTP/3 on the UDP port of the TLS listener's address
// when [protocols] http3 asks for it; its requests go to whichever data
// plane serves now (a reload keeps the socket and the QUIC connections).
func (g *Gateway) startHTTP3() error {
	if !g.cfg.Front.Protocols.HTTP3 {
		return nil
	}
	pc, err := net.ListenPacket("udp", g.cfg.Listener.Addr().String())
	if err != nil {
		return fmt.Errorf("http3: %w (QUIC needs the UDP port of the listen address)", err)
	}
	g.h3pc = pc
	g.h3 = front.NewHTTP3(g.cfg.Certs, g.cur.Load)
	go func() { g.report(g.h3.Serve(pc)) }()
	return nil
}

// HTTP3Addr is the UDP address HTTP/3 is served on, "" when off.
func (g *Gateway) HTTP3Addr() string {
	if g.h3pc == nil {
		return ""
	}
	return g.h3pc.LocalAddr().String()
}

// Listener is the clients' listener as served (TLS-wrapped with Certs).
func (g *Gateway) Listener() net.Listener { return g.ln }

func (g *Gateway) serve(srv *front.Server, ln net.Listener) { g.report(srv.Serve(ln)) }

// report passes on an error other than a normal stop.
func (g *Gateway) report(err error) {
	if err == nil || errors.Is(err, front.ErrServerClosed) || errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return
	}
	if g.cfg.Report != nil {
		g.cfg.Report(err)
		return
	}
	g.errc <- err
}

// Err delivers the first error a server stops with when Config.Report is
// not set.
func (g *Gateway) Err() <-chan error { return g.errc }

// RestartHealth (re)starts the active health checks with h; an interval
// of 0 turns them off (back-ends that are not shoal nodes).
func (g *Gateway) RestartHealth(h config.Health) {
	g.healthMu.Lock()
	defer g.healthMu.Unlock()
	if g.healthStop != nil {
		g.healthStop()
		g.healthStop = nil
	}
	if h.Interval.Duration <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.healthStop = cancel
	go g.Control.Check(ctx, control.CheckConfig{Interval: h.Interval.Duration, Rise: h.Rise, Fall: h.Fall})
}

// SetPolicy replaces the policy under the control plane's lock.
func (g *Gateway) SetPolicy(p policy.Policy) {
	g.Control.WithPolicy(func(policy.Policy, *policy.Cluster) { g.sw.Set(p) })
}

// Swap makes srv the data plane on ln (a second listener on the same
// socket) and lets the old one finish its requests within grace: no
// connection attempt is refused during a reload.
func (g *Gateway) Swap(srv *front.Server, ln net.Listener, grace time.Duration) {
	old := g.cur.Swap(srv)
	g.ln = ln
	go g.serve(srv, ln)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		old.Shutdown(ctx) // closes its copy of the listener; the socket stays open in ln
	}()
}

// SetPublisher serves pub on the admin API (POST /publish; with versions,
// GET /publish/versions/{v} for nodes that fetch) and, when rebalance is
// set, places the site again after the admin API adds or removes a node.
func (g *Gateway) SetPublisher(pub *publish.Coordinator, versions bool, rebalance func(ctx context.Context, joined int) (publish.Result, error)) {
	if g.Admin == nil || pub == nil {
		return
	}
	g.Admin.SetPublisher(func(ctx context.Context, dir string) (any, error) { return pub.Publish(ctx, dir) })
	if versions {
		g.Admin.SetVersions(pub.WriteVersion)
	}
	if rebalance != nil {
		g.Admin.SetRebalancer(func(ctx context.Context, joined int) (any, error) { return rebalance(ctx, joined) })
	}
}

// Committed is a publisher's OnCommit tail: the nodes switched to the
// version at root and dropped d's changed and removed files from their
// caches, so hybrid's size table moves to root and the policy's placement
// and cache mirror forget those files.
func (g *Gateway) Committed(root string, d content.Diff) {
	if g.cfg.Sizes != nil {
		g.cfg.Sizes.Publish(root)
	}
	g.Control.Forget(append(slices.Clone(d.Changed), d.Removed...))
}

// Rebalance places the served version again with pub after the admin API
// added node joined (-1: removed one): the newcomer is drained until it
// holds its share; show then tells the policy the new placement.
func (g *Gateway) Rebalance(ctx context.Context, pub *publish.Coordinator, joined int, show func()) (publish.Result, error) {
	if joined >= 0 {
		w := 1
		for _, n := range g.Control.Nodes() {
			if n.Index == joined {
				w = n.Weight
			}
		}
		g.Control.SetWeight(joined, 0)
		defer g.Control.SetWeight(joined, w)
	}
	res, err := pub.Rebalance(ctx)
	show()
	if err != nil {
		return res, fmt.Errorf("rebalance: %w", err)
	}
	return res, nil
}

// Shutdown stops accepting, lets requests in flight finish until ctx
// ends, and stops the health checks and the event log.
func (g *Gateway) Shutdown(ctx context.Context) error {
	var h3err chan error
	if g.h3 != nil {
		h3err = make(chan error, 1)
		go func() { h3err <- g.h3.Shutdown(ctx) }() // GOAWAY, in parallel with the TCP side's
	}
	errs := []error{g.cur.Load().Shutdown(ctx)}
	if h3err != nil {
		errs = append(errs, <-h3err)
	}
	if g.admin != nil {
		errs = append(errs, g.admin.Shutdown(ctx))
	}
	g.RestartHealth(config.Health{})
	if g.cancel != nil {
		g.cancel()
	}
	return errors.Join(errs...)
}

// descCertExpiry is each TLS certificate's time left, for an alert ahead
// of its expiry (e.g. shoal_tls_certificate_expiry_seconds < 14 * 86400).
var descCertExpiry = prometheus.NewDesc("shoal_tls_certificate_expiry_seconds",
	"Seconds until the TLS certificate's notAfter (negative once expired; an expired file is never loaded).", []string{"cert"}, nil)

// certCollector exports the certificates' time left at each scrape.
type certCollector struct{ c *front.Certs }

func (cc certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descCertExpiry }

func (cc certCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range cc.c.Expiry(time.Now()) {
		ch <- prometheus.MustNewConstMetric(descCertExpiry, prometheus.GaugeValue, e.Left.Seconds(), e.File)
	}
}
