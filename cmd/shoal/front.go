package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/admin"
	"shoal/internal/base/content"
	"shoal/internal/base/vhost"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/placement"
	"shoal/internal/cluster/policy"
	"shoal/internal/cluster/publish"
	"shoal/internal/config"
	"shoal/internal/gateway"
)

func init() {
	register("front", "run the front-end dispatcher over a set of nodes", runFront)
}

// frontCmd is `shoal front` after its flags are parsed: the flag groups
// that are not keys of config.Front, and how the command line overrides
// the file.
type frontCmd struct {
	cfgFile  string
	override func(*config.Front)
	passfd   *passfdFrontFlags
	repair   *repairFlags
	tls      *tlsFlags
	logf     *logFlags
	set      map[string]bool
	usage    func()
}

func runFront(args []string) error {
	fs := newFlags("front", "--nodes URL,URL,… [--listen ADDR] [--policy NAME] [--admin ADDR [--admin-token-file FILE]] [--config FILE]",
		"Run the shoal front-end: route every request to a node by policy and relay (or redirect) it.")
	def := config.DefaultFront()
	flagged := def
	bindFrontKeys(fs, &flagged, def)
	cmd := &frontCmd{passfd: addPassFDFrontFlags(fs, def), repair: addRepairFrontFlags(fs, def.Repair), tls: addTLSFlags(fs), usage: fs.Usage}
	cfgFile := fs.String("config", "", "TOML configuration file (flags given explicitly override it)")
	printConfig := fs.Bool("print-config", false, "print a configuration file with every default and exit")
	cmd.logf = addLogFlags(fs)
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
	// loop takes it, it reloads (reload.go).
	stopHUP := sync.OnceFunc(ignoreHangup(func(msg string) { fmt.Fprintf(os.Stderr, "shoal front: %s\n", msg) }))
	defer stopHUP()
	cmd.cfgFile = *cfgFile
	fc, err := cmd.configure(fs, def)
	if err != nil {
		return err
	}
	rt, err := cmd.build(fc)
	if err != nil {
		return err
	}
	defer rt.close()
	return rt.run(stopHUP)
}

// configure reads the file, if any, and lays the command line over it.
func (cmd *frontCmd) configure(fs *flag.FlagSet, def config.Front) (config.Front, error) {
	fc := def
	if cmd.cfgFile != "" {
		var err error
		if fc, err = config.LoadFront(cmd.cfgFile); err != nil {
			return fc, err
		}
		// [hybrid] and [repair] reach their flags (configkeys.go).
		if err := applyFile(fs, frontFileFlags(fc)); err != nil {
			return fc, err
		}
	}
	cmd.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cmd.set[f.Name] = true })
	logf := cmd.logf
	keys := frontOverride(fs, def, cmd.cfgFile != "")
	cmd.override = func(fc *config.Front) {
		keys(fc)
		if logf.set("log-level") {
			fc.LogLevel = *logf.level
		}
		if logf.set("log-format") {
			fc.LogFormat = *logf.format
		}
		fc.NormalizeAdmin() // --admin off
	}
	cmd.override(&fc)
	if fc.PublishDir != "" && (fc.Admin == "" || fc.AdminTokenFile == "" || !filepath.IsAbs(fc.PublishDir)) {
		return fc, fmt.Errorf("--publish-dir %q: needs an absolute path, --admin and --admin-token-file (nodes take a publish only with the admin token)", fc.PublishDir)
	}
	if fc.Replicas < 0 || fc.Replicas > 0 && (fc.PublishDir == "" || fc.PublishFetchURL != "") {
		return fc, fmt.Errorf("--replicas %d: needs --publish-dir shared with the nodes (no --publish-fetch-url)", fc.Replicas)
	}
	return fc, nil
}

// build opens what fc names (logs, data path, listeners, certificates)
// and assembles the gateway over it; nothing serves yet.
func (cmd *frontCmd) build(fc config.Front) (*frontRuntime, error) {
	level := new(slog.LevelVar)
	logger, err := cmd.logf.loggerVar(os.Stderr, "front", fc.LogLevel, fc.LogFormat, level)
	if err != nil {
		return nil, err
	}
	alFormat, err := front.ParseAccessLogFormat(fc.AccessLogFormat)
	if err != nil {
		return nil, fmt.Errorf("--access-log-format: %w", err)
	}
	if err := cmd.tls.apply(&fc, cmd.set, cmd.cfgFile != ""); err != nil {
		return nil, err
	}
	if len(fc.Nodes) == 0 {
		cmd.usage()
		return nil, errors.New("no nodes: give --nodes or [[node]] entries in --config")
	}
	rt := &frontRuntime{cfgFile: cmd.cfgFile, override: cmd.override, fc: fc, level: level, log: logger}
	ok := false
	defer func() {
		if !ok {
			rt.close()
		}
	}()
	gc := gateway.Config{Front: fc, Logger: logger}
	if fc.Admin != "" {
		if gc.AdminConfig, err = admin.LoadConfig(fc.Admin, fc.AdminTokenFile); err != nil {
			return nil, err
		}
	}
	if fc.AccessLog != "" {
		if gc.AccessLog, err = front.OpenAccessLog(fc.AccessLog, alFormat); err != nil {
			return nil, err
		}
		rt.access = gc.AccessLog
	}
	if err := cmd.dataPath(&gc, rt); err != nil {
		return nil, err
	}
	if err := cmd.listen(&gc, rt); err != nil {
		return nil, err
	}
	rt.certs, rt.adminToken, rt.adminPublic = gc.Certs, gc.AdminConfig.Token, gc.AdminConfig.Public
	if rt.gw, err = gateway.New(gc); err != nil {
		return nil, err
	}
	if fc.Replicas > 0 {
		// The policy prefers the nodes that store a file (the placement
		// the publisher writes with; until the first publish every node
		// still has the whole site, and the preference costs nothing).
		showStorage(rt.gw.Control, &fc)
	}
	if err := rt.startPublisher(gc.AdminConfig.Token); err != nil {
		return nil, err
	}
	ok = true
	return rt, nil
}

// dataPath sets gc's data path from its Front.Path, and the site map,
// which depends on it.
func (cmd *frontCmd) dataPath(gc *gateway.Config, rt *frontRuntime) error {
	fc := gc.Front
	var err error
	switch fc.Path {
	case "passfd", "hybrid":
		if gc.Path, gc.Choose, gc.Hybrid, err = cmd.passfd.dataPath(fc.Path, fc.Health.Interval.Duration, fc); err != nil {
			return err
		}
		gc.Sizes = cmd.passfd.sizes // hybrid's sizes follow the site
	case "relay":
		gc.Path = front.Relay()
	case "redirect":
		gc.Path = front.Redirect()
	case "repair":
		rp, closeRepair, err := cmd.repair.frontPath(fc.Listen, gc.Logger)
		if err != nil {
			return err
		}
		rt.closers = append(rt.closers, closeRepair)
		gc.Path = rp
	default:
		return fmt.Errorf("--path %q: want one of %s", fc.Path, strings.Join(config.Paths, ", "))
	}
	if len(fc.VHosts) > 0 && fc.Path == "redirect" {
		// A 302 to the node's own address loses the Host, so the node
		// could not tell the sites apart.
		return errors.New("vhosts with path redirect: the redirect names the node's address, not the site; use relay, passfd, hybrid or repair")
	}
	if len(fc.VHosts) > 0 {
		if gc.VHosts, err = vhost.New(vhost.Config{Sites: fc.VHosts, Aliases: fc.VHostAliases}); err != nil {
			return err
		}
	}
	return nil
}

// listen opens the client listener (with its certificates) and the admin
// API's.
func (cmd *frontCmd) listen(gc *gateway.Config, rt *frontRuntime) error {
	fc := gc.Front
	ln, err := front.Listen(fc.Listen) // TCP_DEFER_ACCEPT, no keep-alive probes (listen.go)
	if err != nil {
		return err
	}
	rt.closers = append(rt.closers, func() { ln.Close() })
	gc.Listener = ln
	if gc.Certs, err = frontCerts(fc); err != nil { // Certs.Reload: the certificates' SIGHUP hook
		return err
	}
	if fc.Admin != "" {
		aln, err := net.Listen("tcp", fc.Admin)
		if err != nil {
			return fmt.Errorf("admin listen %s: %w", fc.Admin, err)
		}
		rt.closers = append(rt.closers, func() { aln.Close() })
		gc.AdminListener, rt.adminAddr = aln, aln.Addr().String()
	}
	return nil
}

// startPublisher serves `shoal publish` when the front has a publish
// folder: the nodes are driven through their publish endpoint with the
// admin token.
func (rt *frontRuntime) startPublisher(token string) error {
	fc := &rt.fc
	if fc.PublishDir == "" || fc.Admin == "" {
		return nil
	}
	cl := rt.gw.Control
	fetchFrom := ""
	if fc.PublishFetchURL != "" {
		fetchFrom = strings.TrimSuffix(fc.PublishFetchURL, "/") + "/publish/versions"
	}
	pub, err := publish.New(publish.Config{Versions: fc.PublishDir, Logger: rt.log, Nodes: func() []publish.Participant {
		var ps []publish.Participant
		for _, b := range cl.Backends() {
			ps = append(ps, publish.RemoteFetch(b.URL, token, fetchFrom, nil))
		}
		return ps
	}, Replicas: fc.Replicas, Place: placeByURL(fc.Nodes), Members: cl.Members, OnCommit: func(_ uint64, root string, d content.Diff) {
		rt.gw.Committed(root, d)
	}})
	if err != nil {
		return err
	}
	var rebalance func(context.Context, int) (publish.Result, error)
	if fc.Replicas > 0 {
		rebalance = func(ctx context.Context, joined int) (publish.Result, error) {
			return rt.gw.Rebalance(ctx, pub, joined, func() { showStorage(cl, fc) })
		}
	}
	rt.gw.SetPublisher(pub, true, rebalance)
	rt.log.Info("publishing on", "versions", fc.PublishDir)
	return nil
}

// run starts serving and handles signals until SIGTERM or SIGINT (then a
// graceful shutdown) or a server error; SIGHUP reloads, SIGUSR1 reopens
// the access log (signals.go).
func (rt *frontRuntime) run(stopHUP func()) error {
	fc, logger, gw := rt.fc, rt.log, rt.gw
	if err := gw.Start(); err != nil {
		return err
	}
	if rt.gw.Admin != nil {
		addr := rt.adminAddr
		if rt.adminToken == "" {
			logger.Info("admin API, read-only (no --admin-token-file)", "addr", addr)
		} else {
			logger.Info("admin API, writes need the bearer token", "addr", addr, "token_file", fc.AdminTokenFile, "reads_need_token", rt.adminPublic)
		}
	}
	// Signals are ours before "serving" is said: a supervisor that stops
	// the front as soon as it reads that line gets a graceful shutdown,
	// and a script that then rotates the log does not meet the start-up
	// handler.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, sigReload, sigReopen)
	defer signal.Stop(sig)
	stopHUP() // SIGHUP and SIGUSR1 are ours now
	maxc, perIP := gw.Server().ConnLimits()
	certs := rt.certs
	logger.Info("serving", "addr", gw.Listener().Addr().String(), "policy", fc.Policy, "path", fc.Path, "nodes", len(fc.Nodes),
		"max_conns", maxc, "max_conns_per_ip", perIP, "tls", certs != nil, "http2", certs != nil && *fc.Protocols.HTTP2,
		"h2c", fc.Protocols.H2C, "http3", gw.HTTP3Addr(), "proxy_protocol_from", fc.Protocols.ProxyProtocolFrom)
	if certs != nil && fc.Path != "relay" && fc.Path != "redirect" {
		logger.Warn("TLS connections are relayed: the handoff paths cannot move a TLS session without kTLS", "path", fc.Path)
	}
	for {
		select {
		case err := <-gw.Err():
			return err
		case s := <-sig:
			switch s {
			case sigReload:
				rt.hangup()
				continue
			case sigReopen:
				rt.reopenLogs("SIGUSR1")
				continue
			}
			logger.Info("shutting down", "signal", s.String(), "timeout", rt.fc.ShutdownTimeout.Duration)
			sctx, scancel := context.WithTimeout(context.Background(), rt.fc.ShutdownTimeout.Duration)
			defer scancel()
			if err := gw.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		}
	}
}

// hangup is SIGHUP: the access log reopened, the configuration file and
// the certificates read again. A front started without --config has no
// file to read: that is how it was started, not an error.
func (rt *frontRuntime) hangup() {
	if rt.cfgFile == "" {
		rt.reopenLogs("SIGHUP")
		rt.log.Info("SIGHUP: no --config, so no configuration to reload", "certificates", rt.certs != nil)
	} else {
		rt.log.Info("SIGHUP: reloading", "file", rt.cfgFile)
		if err := rt.reload(); err != nil {
			rt.log.Error("reload refused, nothing changed", "file", rt.cfgFile, "err", err)
		}
	}
	if rt.certs != nil { // renewed certificate files, same paths
		if err := rt.certs.Reload(); err != nil {
			rt.log.Error("certificates not reloaded, the old ones stay", "err", err)
		} else {
			rt.log.Info("certificates reloaded", "names", rt.certs.Names())
			rt.certs.LogExpiring(rt.log, time.Now())
		}
	}
}

// reopenLogs reopens the access log file at its path (logrotate renamed
// it), and nothing else; sig names the signal for the log line.
func (rt *frontRuntime) reopenLogs(sig string) { reopenAccessLog(rt.access, rt.log, sig) }

// close releases what build opened, last first: the access log after the
// server's Shutdown, so the last lines are in.
func (rt *frontRuntime) close() {
	for i := len(rt.closers) - 1; i >= 0; i-- {
		rt.closers[i]()
	}
	if rt.access != nil {
		rt.access.Close()
	}
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
