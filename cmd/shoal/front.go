package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/admin"
	"shoal/internal/base/content"
	"shoal/internal/base/sysmon"
	"shoal/internal/base/vhost"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/placement"
	"shoal/internal/cluster/policy"
	"shoal/internal/cluster/publish"
	"shoal/internal/config"
)

func init() {
	register("front", "run the front-end dispatcher over a set of nodes", runFront)
}

func runFront(args []string) error {
	fs := newFlags("front", "--nodes URL,URL,… [--listen ADDR] [--policy NAME] [--admin ADDR [--admin-token-file FILE]] [--config FILE]",
		"Run the shoal front-end: route every request to a node by policy and relay (or redirect) it.")
	def := config.DefaultFront()
	listen := fs.String("listen", def.Listen, "client-facing listen address")
	nodes := fs.String("nodes", "", "comma-separated node URLs, e.g. http://127.0.0.1:9001,http://127.0.0.1:9002")
	pol := fs.String("policy", def.Policy, "request-distribution policy: "+strings.Join(policy.Names(), ", "))
	path := fs.String("path", def.Path, "data path: relay, redirect, passfd (same-host handoff), hybrid (passfd when it pays) or repair")
	passfd := addPassFDFrontFlags(fs, def)
	adminAddr := fs.String("admin", "", "admin API and /metrics address (empty: off)")
	adminToken := fs.String("admin-token-file", def.AdminTokenFile, "file holding the admin API's bearer token (32+ random characters, mode 0600); "+
		"without it the admin API is read-only, and an --admin address other than loopback refuses to start")
	cfgFile := fs.String("config", "", "TOML configuration file (flags given explicitly override it)")
	maxConn := fs.Int("max-conn", def.Limits.MaxConnPerNode, "requests in flight per node before requests queue at the front (0: no limit)")
	queueTO := fs.Duration("queue-timeout", def.Limits.QueueTimeout.Duration, "longest wait in a node queue before 503")
	headerTO := fs.Duration("header-timeout", def.Limits.HeaderTimeout.Duration, "limit for receiving one request head (slowloris)")
	idleTO := fs.Duration("idle-timeout", def.Limits.IdleTimeout.Duration, "limit for an idle keep-alive client connection")
	maxHead := fs.Int("max-header-bytes", def.Limits.MaxHeaderBytes, "largest request head accepted (431 above)")
	sendTO := fs.Duration("send-timeout", def.Limits.SendTimeout.Duration, "close a client that takes no response bytes for this long (nginx send_timeout)")
	maxConns := fs.Int("max-conns", def.Limits.MaxConns, "open client connections; idle ones are closed first near it (0: from RLIMIT_NOFILE, -1: no limit)")
	maxPerIP := fs.Int("max-conns-per-ip", def.Limits.MaxConnsPerIP, "open client connections from one address (0: 256, -1: no limit)")
	repair := addRepairFrontFlags(fs)
	tlsf := addTLSFlags(fs)
	health := fs.Duration("health-interval", def.Health.Interval.Duration, "active health check interval on /.shoal/status (0: off, for non-shoal back-ends)")
	sysmonIdle := fs.Bool("sysmon-idle", *def.SysmonIdle, "run Go's monitor thread at SCHED_IDLE so its wake-ups do not preempt the relay (Linux)")
	vhostList := fs.String("vhosts", "", "comma-separated site host names: key tables and metrics by site + path (nodes run with --vhosts)")
	printConfig := fs.Bool("print-config", false, "print a configuration file with every default and exit")
	accessLog := fs.String("access-log", def.AccessLog, "access log file, - for stdout (default off)")
	accessLogFormat := fs.String("access-log-format", def.AccessLogFormat, "access log format: "+strings.Join(front.AccessLogFormats, ", ")+
		" (common replays with shoal sim and shoal trace; json adds node, policy, path and timings)")
	shutdownTO := fs.Duration("shutdown-timeout", def.ShutdownTimeout.Duration, "on SIGTERM, how long requests in flight may finish before connections are cut")
	publishDir := fs.String("publish-dir", def.PublishDir, "folder for site versions published with shoal publish; nodes must see it at the same path (default off)")
	replicas := fs.Int("replicas", def.Replicas, "nodes that store each published file (partitioned storage: placed by the nodes' disk_weight; the nodes need --peers and --peer-key-file); 0 = every node a full copy")
	publishFetch := fs.String("publish-fetch-url", def.PublishFetchURL, "the admin API's URL as nodes on other hosts reach it: they fetch each published version from there (default: nodes read --publish-dir)")
	logf := addLogFlags(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if *printConfig {
		t, err := config.FrontTemplate()
		if err != nil {
			return err
		}
		fmt.Print(t)
		return nil
	}
	// SIGHUP must not kill the front while it starts; once the signal
	// loop below takes it, it reloads (reload.go).
	stopHUP := sync.OnceFunc(ignoreHangup(func(msg string) { fmt.Fprintf(os.Stderr, "shoal front: %s\n", msg) }))
	defer stopHUP()
	fc := def
	if *cfgFile != "" {
		var err error
		if fc, err = config.LoadFront(*cfgFile); err != nil {
			return err
		}
	}
	if *cfgFile != "" {
		// [hybrid] and [repair] reach their flags (configkeys.go).
		if err := applyFile(fs, frontFileFlags(fc)); err != nil {
			return err
		}
	}
	// Flags set on the command line win over the file.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// override applies them to a configuration read from the file, at
	// start and again at each reload (reload.go).
	override := func(fc *config.Front) {
		if set["listen"] || *cfgFile == "" {
			fc.Listen = *listen
		}
		if set["policy"] || *cfgFile == "" {
			fc.Policy = *pol
		}
		if set["path"] || *cfgFile == "" {
			fc.Path = *path
		}
		if set["admin"] || *cfgFile == "" {
			fc.Admin = *adminAddr
		}
		if set["vhosts"] || *cfgFile == "" {
			fc.VHosts = splitList(*vhostList)
		}
		if set["admin-token-file"] || *cfgFile == "" {
			fc.AdminTokenFile = *adminToken
		}
		if set["nodes"] || *cfgFile == "" {
			fc.Nodes = nil
			for _, u := range splitList(*nodes) {
				fc.Nodes = append(fc.Nodes, config.Node{URL: u})
			}
		}
		if set["max-conn"] || *cfgFile == "" {
			fc.Limits.MaxConnPerNode = *maxConn
		}
		if set["queue-timeout"] || *cfgFile == "" {
			fc.Limits.QueueTimeout.Duration = *queueTO
		}
		if set["header-timeout"] || *cfgFile == "" {
			fc.Limits.HeaderTimeout.Duration = *headerTO
		}
		if set["idle-timeout"] || *cfgFile == "" {
			fc.Limits.IdleTimeout.Duration = *idleTO
		}
		if set["max-header-bytes"] || *cfgFile == "" {
			fc.Limits.MaxHeaderBytes = *maxHead
		}
		if set["send-timeout"] || *cfgFile == "" {
			fc.Limits.SendTimeout.Duration = *sendTO
		}
		if set["max-conns"] || *cfgFile == "" {
			fc.Limits.MaxConns = *maxConns
		}
		if set["max-conns-per-ip"] || *cfgFile == "" {
			fc.Limits.MaxConnsPerIP = *maxPerIP
		}
		if set["sysmon-idle"] || *cfgFile == "" {
			fc.SysmonIdle = sysmonIdle
		}
		if set["handoff-dir"] || *cfgFile == "" {
			fc.HandoffDir = *passfd.dir
		}
		if set["handoff-uid"] || *cfgFile == "" {
			fc.HandoffUID = passfd.uid
		}
		if set["health-interval"] || *cfgFile == "" {
			fc.Health.Interval.Duration = *health
		}
		if set["access-log"] || *cfgFile == "" {
			fc.AccessLog = *accessLog
		}
		if set["access-log-format"] || *cfgFile == "" {
			fc.AccessLogFormat = *accessLogFormat
		}
		if set["shutdown-timeout"] || *cfgFile == "" {
			fc.ShutdownTimeout.Duration = *shutdownTO
		}
		if set["publish-dir"] || *cfgFile == "" {
			fc.PublishDir = *publishDir
		}
		if set["publish-fetch-url"] || *cfgFile == "" {
			fc.PublishFetchURL = *publishFetch
		}
		if set["replicas"] || *cfgFile == "" {
			fc.Replicas = *replicas
		}
		if logf.set("log-level") {
			fc.LogLevel = *logf.level
		}
		if logf.set("log-format") {
			fc.LogFormat = *logf.format
		}
	}
	override(&fc)
	if fc.PublishDir != "" && (fc.Admin == "" || fc.AdminTokenFile == "" || !filepath.IsAbs(fc.PublishDir)) {
		return fmt.Errorf("--publish-dir %q: needs an absolute path, --admin and --admin-token-file (nodes take a publish only with the admin token)", fc.PublishDir)
	}
	if fc.Replicas < 0 || fc.Replicas > 0 && (fc.PublishDir == "" || fc.PublishFetchURL != "") {
		return fmt.Errorf("--replicas %d: needs --publish-dir shared with the nodes (no --publish-fetch-url)", fc.Replicas)
	}
	level := new(slog.LevelVar)
	logger, err := logf.loggerVar(os.Stderr, "front", fc.LogLevel, fc.LogFormat, level)
	if err != nil {
		return err
	}
	alFormat, err := front.ParseAccessLogFormat(fc.AccessLogFormat)
	if err != nil {
		return fmt.Errorf("--access-log-format: %w", err)
	}
	if err := tlsf.apply(&fc, set, *cfgFile != ""); err != nil {
		return err
	}
	if len(fc.Nodes) == 0 {
		fs.Usage()
		return errors.New("no nodes: give --nodes or [[node]] entries in --config")
	}
	var adminCfg admin.Config
	if fc.Admin != "" {
		var err error
		if adminCfg, err = admin.LoadConfig(fc.Admin, fc.AdminTokenFile); err != nil {
			return err
		}
	}

	var accessLogW *front.AccessLog
	if fc.AccessLog != "" {
		if accessLogW, err = front.OpenAccessLog(fc.AccessLog, alFormat); err != nil {
			return err
		}
		defer accessLogW.Close() // after the server's Shutdown: the last lines are in
	}
	p, err := policy.New(fc.Policy, fc.Tuning.Config())
	if err != nil {
		return err
	}
	specs := make([]control.NodeSpec, len(fc.Nodes))
	for i, n := range fc.Nodes {
		specs[i] = control.NodeSpec{URL: n.URL, Group: n.Group}
		if n.Weight != nil {
			specs[i].Weight = *n.Weight
		}
	}
	sw := policy.NewSwitch(p) // SIGHUP may replace the policy (reload.go)
	cl, err := control.New(sw, specs, control.Options{})
	if err != nil {
		return err
	}
	for i, n := range fc.Nodes {
		if n.Weight != nil && *n.Weight == 0 {
			cl.SetWeight(i, 0) // NodeSpec treats 0 as 1; the file means "start drained"
		}
	}
	if fc.Replicas > 0 {
		// The policy prefers the nodes that store a file (the placement
		// the publisher writes with; until the first publish every node
		// still has the whole site, and the preference costs nothing).
		showStorage(cl, &fc)
	}
	var dp front.DataPath
	var choose func(policy.Decision, *front.Exchange) front.DataPath
	var hybrid front.HybridConfig
	switch fc.Path {
	case "passfd", "hybrid":
		if dp, choose, hybrid, err = passfd.dataPath(fc.Path, fc.Health.Interval.Duration, fc); err != nil {
			return err
		}
	case "relay":
		dp = front.Relay()
	case "redirect":
		dp = front.Redirect()
	case "repair":
		rp, closeRepair, err := repair.frontPath(fc.Listen, logger)
		if err != nil {
			return err
		}
		defer closeRepair()
		dp = rp
	default:
		return fmt.Errorf("--path %q: want one of %s", fc.Path, strings.Join(config.Paths, ", "))
	}
	var metrics *admin.Metrics
	var observer front.Observer // stays a nil interface without --admin
	if fc.Admin != "" {
		metrics = admin.NewMetrics(cl, fc.Policy)
		observer = metrics
	}
	var vm *vhost.Map
	if len(fc.VHosts) > 0 && fc.Path == "redirect" {
		// A 302 to the node's own address loses the Host, so the node
		// could not tell the sites apart.
		return errors.New("vhosts with path redirect: the redirect names the node's address, not the site; use relay, passfd, hybrid or repair")
	}
	if len(fc.VHosts) > 0 {
		if vm, err = vhost.New(vhost.Config{Sites: fc.VHosts, Aliases: fc.VHostAliases}); err != nil {
			return err
		}
	}
	mk := func(fc config.Front) (*front.Server, error) {
		return front.New(cl, front.Config{
			VHosts:         vm,
			MaxHeadBytes:   fc.Limits.MaxHeaderBytes,
			HeaderTimeout:  fc.Limits.HeaderTimeout.Duration,
			IdleTimeout:    fc.Limits.IdleTimeout.Duration,
			WriteTimeout:   fc.Limits.SendTimeout.Duration,
			MaxClientConns: fc.Limits.MaxConns,
			MaxConnsPerIP:  fc.Limits.MaxConnsPerIP,
			MaxConn:        fc.Limits.MaxConnPerNode,
			QueueTimeout:   fc.Limits.QueueTimeout.Duration,
			Path:           dp,
			Choose:         choose,
			Hybrid:         hybrid,
			Observer:       observer,
			AccessLog:      accessLogW,
			Logger:         logger,
		})
	}
	srv, err := mk(fc)
	if err != nil {
		return err
	}
	rt := &frontRuntime{cfgFile: *cfgFile, override: override, fc: fc, cl: cl, sw: sw, mk: mk, level: level, log: logger, access: accessLogW, errc: make(chan error, 4)}
	rt.cur.Store(srv)
	stats := func() front.Stats { return rt.cur.Load().Stats() }
	if metrics != nil {
		metrics.WatchFront(stats)
	}
	ln, err := front.Listen(fc.Listen) // TCP_DEFER_ACCEPT, no keep-alive probes (listen.go)
	if err != nil {
		return err
	}
	ln, certs, err := frontTLS(ln, fc) // certs.Reload: the certificates' SIGHUP hook
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	front.LogEvents(ctx, cl, stats, logger, 0)
	rt.ln = ln
	rt.startHealth()
	defer func() {
		if rt.healthStop != nil {
			rt.healthStop()
		}
	}()
	var adminSrv *http.Server
	if fc.Admin != "" {
		aln, err := net.Listen("tcp", fc.Admin)
		if err != nil {
			ln.Close()
			return fmt.Errorf("admin listen %s: %w", fc.Admin, err)
		}
		as := admin.NewConfig(cl, metrics, adminCfg)
		if fc.PublishDir != "" {
			fetchFrom := ""
			if fc.PublishFetchURL != "" {
				fetchFrom = strings.TrimSuffix(fc.PublishFetchURL, "/") + "/publish/versions"
			}
			pub, err := publish.New(publish.Config{Versions: fc.PublishDir, Logger: logger, Nodes: func() []publish.Participant {
				var ps []publish.Participant
				for _, b := range cl.Backends() {
					ps = append(ps, publish.RemoteFetch(b.URL, adminCfg.Token, fetchFrom, nil))
				}
				return ps
			}, Replicas: fc.Replicas, Place: placeByURL(fc.Nodes), Members: cl.Members, OnCommit: func(_ uint64, root string, d content.Diff) {
				if passfd.sizes != nil { // hybrid's sizes follow the site
					passfd.sizes.Publish(root)
				}
				// The nodes dropped these from their caches: so does the
				// policy's placement and cache mirror.
				cl.Forget(append(slices.Clone(d.Changed), d.Removed...))
			}})
			if err != nil {
				aln.Close()
				ln.Close()
				return err
			}
			as.SetPublisher(func(ctx context.Context, dir string) (any, error) { return pub.Publish(ctx, dir) })
			as.SetVersions(pub.WriteVersion)
			if fc.Replicas > 0 {
				as.SetRebalancer(func(ctx context.Context, joined int) (any, error) { return rebalance(ctx, cl, pub, &fc, joined) })
			}
			logger.Info("publishing on", "versions", fc.PublishDir)
		}
		adminSrv = &http.Server{Handler: as, ReadHeaderTimeout: 10 * time.Second}
		go adminSrv.Serve(aln)
		if adminCfg.Token == "" {
			logger.Info("admin API, read-only (no --admin-token-file)", "addr", aln.Addr().String())
		} else {
			logger.Info("admin API, writes need the bearer token", "addr", aln.Addr().String(), "token_file", fc.AdminTokenFile,
				"reads_need_token", adminCfg.Public)
		}
	}
	if *fc.SysmonIdle {
		if tid, err := sysmon.Idle(); err != nil {
			logger.Warn("sysmon thread left at normal priority", "err", err)
		} else {
			logger.Debug("sysmon thread at SCHED_IDLE", "tid", tid)
		}
	}
	maxc, perIP := srv.ConnLimits()
	logger.Info("serving", "addr", ln.Addr().String(), "policy", fc.Policy, "path", fc.Path, "nodes", len(fc.Nodes),
		"max_conns", maxc, "max_conns_per_ip", perIP, "tls", certs != nil)
	if certs != nil && fc.Path != "relay" && fc.Path != "redirect" {
		logger.Warn("TLS connections are relayed: the handoff paths cannot move a TLS session without kTLS", "path", fc.Path)
	}

	go rt.serve(srv, ln)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	stopHUP() // SIGHUP is ours now
wait:
	for {
		select {
		case err := <-rt.errc:
			return err
		case s := <-sig:
			if s == syscall.SIGHUP {
				logger.Info("SIGHUP: reloading", "file", rt.cfgFile)
				if err := rt.reload(); err != nil {
					logger.Error("reload refused, nothing changed", "file", rt.cfgFile, "err", err)
				}
				if certs != nil { // renewed certificate files, same paths
					if err := certs.Reload(); err != nil {
						logger.Error("certificates not reloaded, the old ones stay", "err", err)
					} else {
						logger.Info("certificates reloaded", "names", certs.Names())
					}
				}
				continue
			}
			logger.Info("shutting down", "signal", s.String(), "timeout", rt.fc.ShutdownTimeout.Duration)
			break wait
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), rt.fc.ShutdownTimeout.Duration)
	defer scancel()
	if adminSrv != nil {
		adminSrv.Shutdown(sctx)
	}
	if err := rt.cur.Load().Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// showStorage tells the policy where the files are stored (partitioned
// storage): every node slot by its address and [[node]] disk_weight (1 for
// a node not in the file, added through the admin API), a removed one with
// weight 0, in the front's order.
func showStorage(cl *control.Cluster, fc *config.Front) {
	ms := cl.Members()
	ns := make([]placement.Node, len(ms))
	for i, id := range ms {
		ns[i] = placement.Node{ID: id, Weight: 1}
		for _, n := range fc.Nodes {
			if strings.TrimPrefix(strings.TrimSuffix(n.URL, "/"), "http://") == id && n.DiskWeight > 0 {
				ns[i].Weight = n.DiskWeight
			}
		}
		if id == "" {
			ns[i].Weight = 0
		}
	}
	cl.SetStorage(&policy.Storage{Nodes: ns, Replicas: fc.Replicas})
}

// rebalance places the served version again over the nodes after the
// admin API added node joined (-1: removed one): the newcomer is drained
// until it holds its share, and the policy learns the new placement.
func rebalance(ctx context.Context, cl *control.Cluster, pub *publish.Coordinator, fc *config.Front, joined int) (publish.Result, error) {
	if joined >= 0 {
		w := 1
		for _, n := range cl.Nodes() {
			if n.Index == joined {
				w = n.Weight
			}
		}
		cl.SetWeight(joined, 0)
		defer cl.SetWeight(joined, w)
	}
	res, err := pub.Rebalance(ctx)
	showStorage(cl, fc)
	if err != nil {
		return res, fmt.Errorf("rebalance: %w", err)
	}
	return res, nil
}

// placeByURL is the front publisher's placement of its nodes: each is
// known by its URL's host:port (the address its peers dial, --peers) and
// weighs its [[node]] disk_weight (1 when unset or not in the file).
func placeByURL(nodes []config.Node) func([]publish.Participant) []placement.Node {
	return func(ps []publish.Participant) []placement.Node {
		out := make([]placement.Node, len(ps))
		for i, p := range ps {
			out[i] = placement.Node{ID: strings.TrimPrefix(p.Name(), "http://"), Weight: 1}
			for _, n := range nodes {
				if strings.TrimSuffix(n.URL, "/") == p.Name() && n.DiskWeight > 0 {
					out[i].Weight = n.DiskWeight
				}
			}
		}
		return out
	}
}
