package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"shoal/internal/admin"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/policy"
	"shoal/internal/config"
	"shoal/internal/up"
)

func init() {
	register("up", "start a whole cluster on this machine with a sample site", runUp)
}

// upFlags are the flags of `shoal up` that are not fields of up.Config.
type upFlags struct {
	diskWeights, path, accessLog, accessLogFormat, state, moves, accept *string
	verbose, loopback                                                   *bool
	shutdownTO                                                          *time.Duration
	pops                                                                *int
	origin                                                              *string
	logf                                                                *logFlags
	memory                                                              sizeFlag
	protocols                                                           protocolKeys
}

// addUpFlags defines the flags of `shoal up` on fs, those of up.Config
// bound to c with up.DefaultConfig's values as their defaults.
func addUpFlags(fs *flag.FlagSet, c *up.Config) *upFlags {
	d := up.DefaultConfig()
	fs.StringVar(&c.Listen, "listen", d.Listen, "front-end address to point a browser at")
	fs.StringVar(&c.Admin, "admin", d.Admin, "admin API and /metrics address (\"off\" disables it)")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", "", "the admin API's bearer token, made (32 random bytes, mode 0600) if missing (default: admin.token in the --data folder)")
	fs.IntVar(&c.Nodes, "nodes", d.Nodes, "number of nodes")
	fs.StringVar(&c.Site, "site", "", "serve this directory instead of the generated sample site")
	fs.StringVar(&c.SiteFromTrace, "site-from-trace", "", "serve a site whose files are the URLs of this access log (CLF, .gz ok), to replay it")
	fs.StringVar(&c.DataDir, "data", "", "folder for generated sites (default: your cache folder/shoal)")
	fs.IntVar(&c.CacheMB, "cache-mb", d.CacheMB, "memory cache per node, MiB (0: split --memory or the memory cgroup's limit between the nodes, else 64)")
	fs.StringVar(&c.Cache, "cache", d.Cache, "node cache replacement: lru, gdsf or cgdsf")
	fs.DurationVar(&c.DigestPeriod, "digest-period", 0, "how often each node sends its cache digest (cgdsf) to the others (0: the nodes' default, 2s)")
	fs.IntVar(&c.Replicas, "replicas", 0, "nodes that store each file (partitioned storage; the others fetch it from a holder); 0 = every node a full copy")
	uf := &upFlags{diskWeights: fs.String("disk-weights", "", "the nodes' disk sizes in any common unit, comma-separated (placement weights with --replicas; default 1 each)")}
	fs.StringVar(&c.Policy, "policy", d.Policy, "request distribution policy: "+strings.Join(policy.Names(), ", "))
	uf.path = fs.String("path", "relay", "data path: relay (all in one process), redirect (302 to the node's own URL), passfd / hybrid (nodes as separate processes that take client connections over Unix sockets), "+
		"or repair (root only: front and nodes in network namespaces joined to this host, connections moved with TCP_REPAIR; "+
		"the front listens on the lab's virtual IP at --listen's port, the admin API on the front's lab address at --admin's port)")
	fs.BoolVar(&c.VHosts, "vhosts", false, "serve several sites by Host: two sample sites (a.localhost, b.localhost), or --site as a folder of site folders; relay or passfd path")
	def := config.DefaultFront()
	fs.DurationVar(&c.SendTimeout, "send-timeout", def.Limits.SendTimeout.Duration, "close a client that takes no response bytes for this long (nginx send_timeout)")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "open client connections at the front; idle ones are closed first near it (0: from RLIMIT_NOFILE, -1: no limit)")
	fs.IntVar(&c.MaxConnsPerIP, "max-conns-per-ip", 0, "open client connections from one address (0: 256, -1: no limit)")
	fs.BoolVar(&c.TLS, "tls", false, "serve HTTPS with a self-signed certificate for localhost and 127.0.0.1 kept in the --data folder (clients: curl -k, shoal bench http --insecure); "+
		"with passfd or hybrid every request is relayed")
	uf.accept = fs.String("repair-accept", "front", "--path repair under tbccrd: front (the front accepts each new connection and hands it over) or nodes (the nodes accept new connections themselves; the front leaves the connection path)")
	uf.moves = fs.String("moves", "nodes", "--path passfd under a policy that shares its URL table (tbccrd): nodes (they move a connection to the node its next request belongs to, by the table) or front (every later request goes back to the front, which passes it on)")
	uf.verbose = fs.Bool("v", false, "--path repair: print each ip command that builds the lab")
	uf.accessLog = fs.String("access-log", "", "the front's access log file, - for stdout (default off)")
	uf.accessLogFormat = fs.String("access-log-format", def.AccessLogFormat, "access log format: "+strings.Join(front.AccessLogFormats, ", "))
	uf.shutdownTO = fs.Duration("shutdown-timeout", def.ShutdownTimeout.Duration, "on Ctrl-C or SIGTERM, how long requests in flight may finish before connections are cut")
	uf.logf = addLogFlags(fs)
	bindProtocols(fs, &c.Protocols, def.Protocols, &uf.protocols)
	uf.pops = fs.Int("pops", 0, "start this many PoPs of the CDN tier on loopback instead of one cluster (see shoal pop)")
	uf.state = fs.String("state", "", "--pops: write a JSON file naming every PoP's listeners and process id")
	uf.loopback = fs.Bool("loopback", false, "--pops: stay on loopback even as root (root runs the PoPs in a WAN lab with unequal delays)")
	uf.origin = fs.String("origin", "", "--pops: the CDN's origin (URL, or HOST=URL,...); empty starts one, a node serving the sample site")
	fs.Var(&uf.memory, "memory", "the memory the cluster may use (e.g. 144MiB), split between the nodes' caches and the Go runtime; default: the memory cgroup's limit")
	return uf
}

func runUp(args []string) error {
	fs := newFlags("up", "[flags]", "Start a whole shoal cluster on this machine: nodes, front-end and admin API.\n"+
		"Without --site it generates a deterministic sample site in your cache folder.")
	var c up.Config
	uf := addUpFlags(fs, &c)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if err := uf.check(&c); err != nil {
		return err
	}
	c.Memory = uf.memory.n
	if *uf.pops > 0 {
		r := popsRun{n: *uf.pops, state: *uf.state, dataDir: c.DataDir, nodes: c.Nodes, cacheMB: c.CacheMB, origin: *uf.origin}
		if os.Geteuid() == 0 && !*uf.loopback {
			return runUpPopsWAN(r)
		}
		return runUpPops(r)
	}
	logger, err := uf.logf.logger(os.Stderr, "up", "", "")
	if err != nil {
		return err
	}
	c.Logger = logger
	alFormat, err := front.ParseAccessLogFormat(*uf.accessLogFormat)
	if err != nil {
		return fmt.Errorf("--access-log-format: %w", err)
	}
	if *uf.accessLog != "" {
		al, err := front.OpenAccessLog(*uf.accessLog, alFormat)
		if err != nil {
			return err
		}
		defer al.Close() // after shutdown below: the last lines are in
		c.AccessLog = al
	}
	// Signals are caught from here on: one that arrives while the cluster
	// starts (the repair lab takes seconds) stops it as soon as it is up,
	// instead of killing this process and leaving children and namespaces.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, sigReload, sigReopen)
	defer signal.Stop(sig)
	cl, lab, shutdown, err := uf.start(c)
	if err != nil {
		return err
	}
	if *uf.path == "relay" || *uf.path == "redirect" {
		applyGoPlan(&cl.Config.MemoryPlan) // in-process nodes: one runtime for all
	}
	printUp(cl, lab, *uf.path)
	var runErr error
wait:
	for {
		select {
		case s := <-sig:
			switch s {
			case sigReload:
				reloadUp(cl, cl.Config.AccessLog, logger)
				continue
			case sigReopen: // logrotate: the log, and nothing else
				reopenAccessLog(cl.Config.AccessLog, logger, "SIGUSR1")
				continue
			}
			fmt.Fprintf(os.Stderr, "shoal up: %v, stopping\n", s)
			break wait
		case runErr = <-cl.Err():
			break wait
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *uf.shutdownTO)
	defer cancel()
	shutdown(ctx)
	return runErr
}

// check reads --disk-weights and the [protocols] flags into c and refuses
// combinations that cannot work.
func (uf *upFlags) check(c *up.Config) error {
	uf.protocols.convert(&c.Protocols, func(string) bool { return true })
	if err := checkProtocols(c.Protocols, c.TLS); err != nil {
		return err
	}
	for _, w := range strings.Split(*uf.diskWeights, ",") {
		if w = strings.TrimSpace(w); w == "" {
			continue
		}
		f, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return fmt.Errorf("--disk-weights %q: %w", *uf.diskWeights, err)
		}
		c.DiskWeights = append(c.DiskWeights, f)
	}
	path := *uf.path
	if !slices.Contains(config.Paths, path) {
		return fmt.Errorf("--path %q: want one of %s", path, strings.Join(config.Paths, ", "))
	}
	if c.TLS && path == "repair" {
		return errors.New("--tls with --path repair: the repair path cannot move a TLS connection (no kTLS), so it would relay every request; use --path relay")
	}
	if c.VHosts && path != "relay" && path != "passfd" {
		return fmt.Errorf("--vhosts with --path %s: virtual hosts work with --path relay or passfd so far", path)
	}
	if c.Nodes < 1 || c.CacheMB < 0 {
		return fmt.Errorf("--nodes %d, --cache-mb %d: want at least one node and a cache size of 0 or more", c.Nodes, c.CacheMB)
	}
	return nil
}

// start brings the cluster up on --path: in this process, as node
// processes, or in the repair lab (lab is then set).
func (uf *upFlags) start(c up.Config) (cl *up.Cluster, lab *up.Repair, shutdown func(context.Context) error, err error) {
	switch *uf.path {
	case "relay", "redirect":
		c.Redirect = *uf.path == "redirect"
		if cl, err = up.Start(c); err == nil {
			shutdown = cl.Shutdown
		}
	case "repair":
		if *uf.accept != "front" && *uf.accept != "nodes" {
			return nil, nil, nil, fmt.Errorf("--repair-accept %q: want front or nodes", *uf.accept)
		}
		rc := up.RepairConfig{NodesAccept: *uf.accept == "nodes"}
		if *uf.verbose {
			rc.Log = func(cmd string) { fmt.Fprintln(os.Stderr, "+", cmd) }
		}
		if lab, err = up.StartRepair(c, rc); err == nil {
			cl, shutdown = lab.Cluster, lab.Shutdown
		}
	default:
		var p *up.Procs
		var pc up.ProcsConfig
		if pc.Moves, err = front.ParseMoveMode(*uf.moves); err != nil {
			return nil, nil, nil, err
		}
		pc.Path = *uf.path
		if p, err = up.StartProcs(c, pc); err == nil {
			cl, shutdown = p.Cluster, p.Shutdown
		}
	}
	return cl, lab, shutdown, err
}

// printUp is the status `shoal up` prints once the cluster is up.
func printUp(cl *up.Cluster, lab *up.Repair, path string) {
	c := cl.Config
	fmt.Printf("shoal is up: open %s\n", cl.URL)
	if sites := cl.SiteURLs(); len(sites) > 0 {
		fmt.Printf("  sites by Host: %s (or curl -H 'Host: NAME' %s)\n", strings.Join(sites, "  "), cl.URL)
	}
	if cl.TLSCert != "" {
		fmt.Printf("  self-signed certificate %s: curl -k %s, shoal bench http --insecure --url %s\n", cl.TLSCert, cl.URL, cl.URL)
	}
	if cl.HTTP3Addr != "" {
		fmt.Printf("  HTTP/3 (QUIC) on udp %s, advertised with Alt-Svc\n", cl.HTTP3Addr)
	}
	fmt.Printf("  %d nodes, policy %s, path %s, %d MiB %s cache per node; %s\n", c.Nodes, c.Policy, path, c.CacheMB, c.Cache, cl.SiteInfo)
	if p := c.MemoryPlan; p.Limit > 0 {
		fmt.Printf("  memory: %d MiB from %s, split between %d nodes' caches and the Go runtime's limit of %d MiB\n", p.Limit>>20, p.Source, p.Nodes, p.GoLimit>>20)
		if p.Short() {
			fmt.Printf("  warning: %d nodes were measured to need at least %d MiB under load; below it they may be killed\n", p.Nodes, p.Least()>>20)
		}
	}
	if cl.AdminURL != "" {
		fmt.Printf("  admin %s/nodes  metrics %s/metrics\n", cl.AdminURL, cl.AdminURL)
		reads := ""
		if !admin.LoopbackAddr(strings.TrimPrefix(cl.AdminURL, "http://")) {
			reads = " and to read it (not a loopback address)"
		}
		fmt.Printf("  admin token in %s (mode 0600), needed to change the cluster%s, e.g.:\n", cl.AdminTokenFile, reads)
		fmt.Printf("    curl -H \"Authorization: Bearer $(cat %s)\" -H 'Content-Type: application/json' -X PUT -d '{\"weight\": 0}' %s/nodes/0/weight\n",
			cl.AdminTokenFile, cl.AdminURL)
		if args := cl.JoinArgs(); args != nil {
			fmt.Printf("  add a node live (it takes its share of the files): shoal node --listen 127.0.0.1:PORT %s\n", strings.Join(args, " "))
			fmt.Printf("    curl -H \"Authorization: Bearer $(cat %s)\" -H 'Content-Type: application/json' -d '{\"url\": \"http://127.0.0.1:PORT\"}' %s/nodes\n",
				cl.AdminTokenFile, cl.AdminURL)
		}
	}
	if lab != nil {
		fmt.Printf("  curl %s\n", cl.URL)
		fmt.Printf("  lab %s: namespaces %s*, this host on %s as %s; if shoal is killed, sudo shoal lab down --all\n",
			lab.Lab.ID, handoff.LabPrefix+lab.Lab.ID+"-", lab.HostIf, lab.HostAddr)
	}
	fmt.Printf("  Ctrl-C stops it.\n")
}

// reloadUp is `shoal up`'s SIGHUP: it reopens the access log and
// publishes the site folder again, so edits made in place reach every node
// together (docs/publish.md). Log rotation sends SIGUSR1 instead, which
// only reopens the log: a SIGHUP after `shoal publish` of another folder
// serves the site folder again.
func reloadUp(cl *up.Cluster, al *front.AccessLog, log *slog.Logger) {
	if al != nil {
		reopenAccessLog(al, log, "SIGHUP")
	}
	if cl.Publisher == nil {
		log.Warn("SIGHUP: this data path cannot publish; restart shoal up to serve an edited site")
		return
	}
	res, err := cl.Publisher.Publish(context.Background(), cl.SiteRoot)
	if err != nil {
		log.Error("SIGHUP: publishing the site again failed; the nodes serve the previous version", "site", cl.SiteRoot, "err", err)
		return
	}
	log.Info("SIGHUP: site published again", "site", cl.SiteRoot, "version", res.Version,
		"added", len(res.Added), "changed", len(res.Changed), "removed", len(res.Removed))
}

// reopenAccessLog reopens al at its path (logrotate renamed it); sig names
// the signal for the log line.
func reopenAccessLog(al *front.AccessLog, log *slog.Logger, sig string) {
	if al == nil {
		log.Info(sig + ": no access log to reopen")
		return
	}
	if err := al.Reopen(); err != nil {
		log.Error(sig+": access log not reopened; lines still go to the old file", "err", err)
		return
	}
	log.Info(sig+": access log reopened", "file", al.Path())
}
