package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"shoal/internal/base/sysmon"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/admin"
	"shoal/internal/base/logfile"
	"shoal/internal/cluster/node"
	"shoal/internal/cluster/peer"
	"shoal/internal/cluster/publish"
	"shoal/internal/config"
)

func init() {
	register("node", "run a back-end web server over a site directory", runNode)
}

// nodeFlags are the flags of `shoal node`.
type nodeFlags struct {
	root, listen, policy, accessLog, trusted, publishDir, tokenFile *string
	peerKey, peers, handoffSock, cfgFile                            *string
	cacheMB, maxKB                                                  *int64
	maxConns, maxRanges                                             *int
	readTO, idleTO, sendTO, shutdownTO, digestPeriod                *time.Duration
	vhosts, noPre, logHealth, watch, sysmonIdle, printConfig        *bool
	aliases                                                         aliasFlag
	origins                                                         originFlag
	data                                                            *string
	diskMB                                                          *int64
	memory                                                          sizeFlag
	logf                                                            *logFlags
	// logFile is the --access-log file, which SIGUSR1 and SIGHUP reopen;
	// nil when off or on stdout.
	logFile *logfile.File
	repair  *repairFlags
}

func addNodeFlags(fs *flag.FlagSet, def config.NodeServer) *nodeFlags {
	nf := &nodeFlags{
		root:      fs.String("root", "", "site root directory (required)"),
		listen:    fs.String("listen", def.Listen, "listen address"),
		cacheMB:   fs.Int64("cache-mb", def.CacheMB, "memory cache budget in MiB (0 disables; default: the memory cgroup's limit less the process's own, else 64)"),
		policy:    fs.String("cache", def.Cache, "cache replacement policy: lru, gdsf or cgdsf"),
		maxKB:     fs.Int64("max-object-kb", def.MaxObjectKB, "files above this size are never held in memory (sendfile; 0: an eighth of the cache, at least 500)"),
		readTO:    fs.Duration("read-timeout", def.ReadTimeout.Duration, "limit for reading one request head"),
		idleTO:    fs.Duration("idle-timeout", def.IdleTimeout.Duration, "limit for an idle keep-alive connection"),
		maxConns:  fs.Int("max-conns", def.MaxConns, "open client connections, handed-off ones included; idle ones are closed first at it (0: from RLIMIT_NOFILE, -1: no limit)"),
		sendTO:    fs.Duration("send-timeout", def.SendTimeout.Duration, "close a connection whose client takes no response bytes for this long"),
		maxRanges: fs.Int("max-ranges", def.MaxRanges, "a request for more byte ranges gets the whole file"),
		vhosts:    fs.Bool("vhosts", def.VHosts, "DIR holds one folder per host name (DIR/example.com/, DIR/_default/ for other hosts)"),
	}
	fs.Var(&nf.aliases, "alias", "with --vhosts: NAME=SITE serves host NAME from DIR/SITE (repeatable)")
	fs.Var(&nf.origins, "origin", "cache mode: be an HTTP cache in front of this origin instead of serving --root (URL, or HOST=URL for one host; repeatable)")
	nf.data = fs.String("data", def.Data, "cache mode: folder of the stored responses (default: a temporary one)")
	nf.diskMB = fs.Int64("disk-mb", def.DiskMB, "cache mode: bound of the stored responses on disk, MiB")
	fs.Var(&nf.memory, "memory", "the memory this node may use (e.g. 36MiB), which sizes its cache and the Go runtime's limit; default: its memory cgroup's limit")
	nf.noPre = fs.Bool("no-precompressed", def.NoPrecompressed, "never serve name.br / name.gz in place of name (see 'shoal compress')")
	nf.accessLog = fs.String("access-log", def.AccessLog, "Common Log Format access log file, or - for stdout (default off)")
	nf.trusted = fs.String("trusted-fronts", strings.Join(def.TrustedFronts, ","), "comma-separated addresses or CIDRs of fronts whose X-Forwarded-For names the client in the access log (default: none)")
	nf.logHealth = fs.Bool("log-health", def.LogHealth, "also log the front's health checks (GET /.shoal/status) in the access log")
	nf.shutdownTO = fs.Duration("shutdown-timeout", def.ShutdownTimeout.Duration, "on SIGTERM, how long requests in flight may finish before connections are cut")
	nf.publishDir = fs.String("publish-dir", def.PublishDir, "accept site versions published by the front from inside this folder (needs --admin-token-file; default off)")
	nf.tokenFile = fs.String("admin-token-file", def.AdminTokenFile, "the cluster's admin token (the front's admin_token_file), which a publish must carry")
	nf.sysmonIdle = fs.Bool("sysmon-idle", def.SysmonIdle, "run Go's monitor thread at SCHED_IDLE so its wake-ups do not preempt the serving thread (Linux)")
	nf.watch = fs.Bool("watch", def.Watch, "serve changes to --root as they happen (rescan once it is quiet for 500 ms); for a single node — a cluster publishes with shoal publish")
	nf.peerKey = fs.String("peer-key-file", def.Peer.KeyFile, "cluster key file shared by every node (mode 0600, ≥ 16 bytes): turns on fetching from peers' memories (with --peers)")
	nf.peers = fs.String("peers", strings.Join(def.Peer.Peers, ","), "comma-separated HTTP addresses of the cluster's nodes in the front's node order; the one equal to --listen is this node")
	nf.digestPeriod = fs.Duration("digest-period", def.Peer.DigestPeriod.Duration, "how often the node sends its cache digest (a Bloom filter, for cgdsf) to its peers")
	nf.logf = addLogFlags(fs)
	nf.repair = addRepairNodeFlags(fs)
	nf.handoffSock = addPassFDNodeFlag(fs)
	nf.cfgFile = fs.String("config", "", "TOML configuration file (flags given explicitly override it)")
	nf.printConfig = fs.Bool("print-config", false, "print a configuration file with every default and exit")
	return nf
}

func runNode(args []string) error {
	fs := newFlags("node", "--root DIR [--listen ADDR] [flags]", "Run a shoal node: an HTTP/1.1 static server with a memory cache over DIR.")
	nf := addNodeFlags(fs, config.DefaultNode())
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if *nf.printConfig {
		fmt.Print(config.NodeTemplate)
		return nil
	}
	if *nf.cfgFile != "" {
		nc, err := config.LoadNode(*nf.cfgFile)
		if err != nil {
			return err
		}
		if err := applyFile(fs, nodeFileFlags(nc)); err != nil { // configkeys.go
			return err
		}
		if nf.aliases.m == nil { // --alias given: the command line's list wins
			nf.aliases.m = nc.Aliases
		}
		if !nf.origins.set { // as for --alias
			nf.origins.def, nf.origins.hosts = nc.Origin, nc.Origins
		}
	}
	if *nf.root == "" && len(nf.origins.specs()) == 0 {
		fs.Usage()
		return errors.New("--root is required (or --origin, for a cache)")
	}
	if *nf.cacheMB < 0 || *nf.maxKB < 0 {
		return fmt.Errorf("--cache-mb %d, --max-object-kb %d: sizes cannot be negative (0 turns the cache off)", *nf.cacheMB, *nf.maxKB)
	}
	logger, err := nf.logf.logger(os.Stderr, "node", "", "")
	if err != nil {
		return err
	}
	// SIGHUP must not kill the node while it starts; once the signal loop
	// takes it, it rescans --root.
	stopHUP := sync.OnceFunc(ignoreHangup(func(msg string) { logger.Warn(msg) }))
	defer stopHUP()
	cfg, closeLog, err := nf.config(logger)
	if err != nil {
		return err
	}
	defer closeLog()
	nf.planMemory(fs, &cfg)
	srv, err := node.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *nf.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *nf.listen, err)
	}
	if err := startPassFDNode(srv, cfg.HandoffSocket, logger.Info); err != nil {
		ln.Close()
		return err
	}
	closeRepair, err := nf.repair.startNode(srv, logger.Info)
	if err != nil {
		ln.Close()
		return err
	}
	defer closeRepair()
	mem := []any{"cache_mb", float64(max(cfg.CacheBytes, 0)) / (1 << 20), "memory_limit_mb", cfg.Memory.Limit >> 20,
		"memory_source", cfg.Memory.Source, "go_limit_mb", cfg.Memory.GoLimit >> 20}
	return nf.serve(srv, ln, logger, stopHUP, mem)
}

// planMemory sizes the node's store and the Go runtime's limit from
// --memory or the memory cgroup's limit (memory.go); --cache-mb, given on
// the command line or in the configuration file, wins for the store.
func (nf *nodeFlags) planMemory(fs *flag.FlagSet, cfg *node.Config) {
	cacheSet, explicit := flagSet(fs, "cache-mb"), int64(0)
	if cacheSet {
		explicit = *nf.cacheMB << 20
	}
	cfg.Memory = planMemory(nf.memory, 1, explicit, cfg.Logger)
	if !cacheSet && cfg.Memory.Store > 0 {
		cfg.CacheBytes = cfg.Memory.Store // sized from the limit
	}
}

// config is the node's configuration from the flags; closeLog closes the
// access log file it opened.
func (nf *nodeFlags) config(logger *slog.Logger) (cfg node.Config, closeLog func(), err error) {
	closeLog = func() {}
	fronts, err := parsePrefixes(*nf.trusted)
	if err != nil {
		return cfg, closeLog, fmt.Errorf("--trusted-fronts: %w", err)
	}
	var publishToken string
	if *nf.publishDir != "" || *nf.tokenFile != "" {
		if *nf.publishDir == "" || *nf.tokenFile == "" || !filepath.IsAbs(*nf.publishDir) {
			return cfg, closeLog, fmt.Errorf("--publish-dir %q, --admin-token-file %q: publishing needs both, the folder as an absolute path", *nf.publishDir, *nf.tokenFile)
		}
		if publishToken, err = admin.LoadToken(*nf.tokenFile); err != nil {
			return cfg, closeLog, err
		}
	}
	cfg = node.Config{
		Root: *nf.root, CacheBytes: *nf.cacheMB << 20, CachePolicy: *nf.policy, MaxObject: *nf.maxKB << 10,
		ReadTimeout: *nf.readTO, IdleTimeout: *nf.idleTO, WriteTimeout: *nf.sendTO, MaxConns: *nf.maxConns,
		Logger: logger, TrustedFronts: fronts, LogHealth: *nf.logHealth, PublishToken: publishToken, PublishDir: *nf.publishDir,
		MaxRanges: *nf.maxRanges, NoPrecompressed: *nf.noPre, VHosts: *nf.vhosts, Aliases: nf.aliases.m,
	}
	if cfg.Peer, err = peerConfig(*nf.peerKey, *nf.peers, *nf.listen, *nf.digestPeriod); err != nil {
		return cfg, closeLog, err
	}
	if cfg.HandoffSocket, err = absSocket(*nf.handoffSock); err != nil {
		return cfg, closeLog, err
	}
	if *nf.cacheMB == 0 {
		cfg.CacheBytes = -1
	}
	if specs := nf.origins.specs(); len(specs) > 0 {
		up, err := node.ParseOrigins(specs)
		if err != nil {
			return cfg, closeLog, fmt.Errorf("--origin: %w", err)
		}
		cfg.Root = ""
		cfg.Edge = node.EdgeConfig{Upstream: up, DataDir: *nf.data, DiskBytes: *nf.diskMB << 20}
	}
	switch *nf.accessLog {
	case "":
	case "-":
		cfg.AccessLog = os.Stdout
	default:
		f, err := logfile.Open(*nf.accessLog, 0o644)
		if err != nil {
			return cfg, closeLog, fmt.Errorf("access log: %w", err)
		}
		cfg.AccessLog, nf.logFile = f, f
		closeLog = func() { f.Close() }
	}
	return cfg, closeLog, nil
}

// serve runs srv on ln until SIGTERM or SIGINT (then a graceful
// shutdown); SIGHUP, and with --watch a change under --root, rescans;
// SIGUSR1 reopens the access log (signals.go). mem, the memory plan's
// figures, goes on the start-up line.
func (nf *nodeFlags) serve(srv *node.Server, ln net.Listener, logger *slog.Logger, stopHUP func(), mem []any) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, sigReload, sigReopen)
	defer signal.Stop(sig)
	stopHUP() // SIGHUP and SIGUSR1 are ours now
	if *nf.sysmonIdle {
		if tid, err := sysmon.Idle(); err != nil {
			logger.Warn("sysmon thread left at normal priority", "err", err)
		} else {
			logger.Debug("sysmon thread at SCHED_IDLE", "tid", tid)
		}
	}
	// Logged once the signals are ours: a script that waits for this line
	// and then rotates the log must not meet the start-up handler.
	if specs := nf.origins.specs(); len(specs) > 0 {
		logger.Info("node caching", append([]any{"origin", strings.Join(specs, ","), "addr", ln.Addr().String(), "data", *nf.data, "disk_mb", *nf.diskMB}, mem...)...)
	} else {
		logger.Info("node serving", append([]any{"root", *nf.root, "addr", ln.Addr().String(), "cache", *nf.policy}, mem...)...)
	}
	if *nf.watch {
		wctx, wcancel := context.WithCancel(context.Background())
		defer wcancel()
		go func() {
			err := publish.Watch(wctx, *nf.root, 500*time.Millisecond, func() {
				if _, err := srv.Rescan(); err != nil {
					logger.Error("rescan after a change", "err", err)
				}
			})
			if err != nil {
				logger.Error("--watch stopped", "err", err)
			}
		}()
	}
wait:
	for {
		select {
		case err := <-errc:
			return err
		case s := <-sig:
			switch s {
			case sigReload:
				// Rescan --root (a "current" symlink is followed again)
				// and reopen the access log, as the front's does.
				nf.reopenLog(logger, "SIGHUP")
				logger.Info("SIGHUP: rescanning the site root", "root", *nf.root)
				if _, err := srv.Rescan(); err != nil {
					logger.Error("SIGHUP: rescan failed; the previous tree is still served", "err", err)
				}
				continue
			case sigReopen:
				srv.FlushLog() // the lines so far into the renamed file
				nf.reopenLog(logger, "SIGUSR1")
				continue
			}
			logger.Info("shutting down", "signal", s.String())
			break wait
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *nf.shutdownTO)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, node.ErrServerClosed) {
		return err
	}
	return nil
}

// reopenLog reopens the access log file at its path (logrotate renamed
// it); sig names the signal for the log line.
func (nf *nodeFlags) reopenLog(logger *slog.Logger, sig string) {
	if nf.logFile == nil {
		logger.Info(sig + ": no access log file to reopen")
		return
	}
	if err := nf.logFile.Reopen(); err != nil {
		logger.Error(sig+": access log not reopened; lines still go to the old file", "err", err)
		return
	}
	logger.Info(sig+": access log reopened", "file", nf.logFile.Path())
}

// parsePrefixes reads a comma-separated list of IP addresses and CIDR
// prefixes ("10.0.0.5,192.168.1.0/24"); an address stands for itself.
func parsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range splitList(list) {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR prefix", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// aliasFlag collects --alias NAME=SITE.
type aliasFlag struct{ m map[string]string }

func (a *aliasFlag) String() string { return "" }

func (a *aliasFlag) Set(v string) error {
	name, site, ok := strings.Cut(v, "=")
	if !ok || name == "" || site == "" {
		return fmt.Errorf("want NAME=SITE, got %q", v)
	}
	if a.m == nil {
		a.m = map[string]string{}
	}
	a.m[name] = site
	return nil
}

// peerConfig builds the node's peer links from its flags: off without a
// key file; this node is the entry of peers equal to listen. A key without
// peers is a node joining a running partitioned cluster: it learns the
// peers from the first version the front publishes to it.
func peerConfig(keyFile, list, listen string, digest time.Duration) (peer.Config, error) {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if keyFile == "" {
		if len(addrs) > 0 {
			return peer.Config{}, errors.New("--peers needs --peer-key-file (the cluster key)")
		}
		return peer.Config{}, nil
	}
	key, err := peer.LoadKey(keyFile)
	if err != nil {
		return peer.Config{}, err
	}
	pc := peer.Config{Key: key, Peers: addrs, Self: slices.Index(addrs, listen), DigestPeriod: digest}
	if pc.Self < 0 && len(addrs) > 0 {
		return peer.Config{}, fmt.Errorf("--peers %q does not list --listen %s: list every node, this one included, in the front's order", list, listen)
	}
	return pc, nil
}
