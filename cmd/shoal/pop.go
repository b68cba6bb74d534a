package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"shoal/internal/cdn/cdndns"
	"shoal/internal/cdn/pop"
	"shoal/internal/config"
)

func init() {
	register("pop", "run one point of presence of the CDN tier (gateway, nodes, MBPP, Chord)", runPop)
}

// popFile turns the PoP defaults into the file form, so that flags, TOML
// and --print-config all start from pop.DefaultConfig.
func popFile(c pop.Config) config.Pop {
	d := func(v time.Duration) config.Duration { return config.Duration{Duration: v} }
	return config.Pop{Name: c.Name, Peer: c.Peer, Join: c.Join, SeedFile: c.SeedFile, JoinTimeout: d(c.JoinTimeout),
		Listen: c.Cluster.Listen, Admin: c.Cluster.Admin, GatewayIPs: c.GatewayIPs, Nodes: c.Cluster.Nodes, CacheMB: c.Cluster.CacheMB,
		MBPP: config.PopMBPP{Hold: d(c.MBPP.Hold), AckTimeout: d(c.MBPP.AckTimeout), Retries: c.MBPP.Retries,
			LearningFactor: c.MBPP.LearningFactor, WeightLink: c.MBPP.WeightLink, WeightServer: c.MBPP.WeightServer,
			LocalBonus: c.MBPP.LocalBonus, RTTRef: d(c.MBPP.RTTRef), RTTDeadband: c.MBPP.RTTDeadband,
			ServerDeadband: c.MBPP.ServerDeadband, PublishLinks: c.MBPP.PublishLinks, WatchdogRounds: c.MBPP.WatchdogRounds,
			EstimateRTT: c.MBPP.EstimateRTT},
		Chord: config.PopChord{Successors: c.Chord.Successors, Stabilise: d(c.Chord.Stabilise), FixFingers: d(c.Chord.FixFingers),
			CheckPredecessor: d(c.Chord.CheckPredecessor)},
		DNS: popDNSFile(c),
		Content: config.PopContent{Edge: c.Edge, Origin: c.Origin, Window: d(c.CDN.Window), MinRequests: c.CDN.MinRequests,
			HotTop: c.CDN.HotTop, HotMin: c.CDN.HotMin, DirTTL: d(c.CDN.DirTTL), Redirect: c.Redirect}}
}

func popConfig(f config.Pop, c pop.Config) pop.Config {
	c.Name, c.Peer, c.Join, c.SeedFile, c.JoinTimeout = f.Name, f.Peer, f.Join, f.SeedFile, f.JoinTimeout.Duration
	c.Cluster.Listen, c.Cluster.Admin, c.Cluster.Nodes, c.Cluster.CacheMB = f.Listen, f.Admin, f.Nodes, f.CacheMB
	m := &c.MBPP
	m.Hold, m.AckTimeout, m.Retries, m.LearningFactor = f.MBPP.Hold.Duration, f.MBPP.AckTimeout.Duration, f.MBPP.Retries, f.MBPP.LearningFactor
	m.WeightLink, m.WeightServer, m.LocalBonus, m.RTTRef = f.MBPP.WeightLink, f.MBPP.WeightServer, f.MBPP.LocalBonus, f.MBPP.RTTRef.Duration
	m.RTTDeadband, m.ServerDeadband, m.PublishLinks, m.WatchdogRounds = f.MBPP.RTTDeadband, f.MBPP.ServerDeadband, f.MBPP.PublishLinks, f.MBPP.WatchdogRounds
	m.EstimateRTT = f.MBPP.EstimateRTT
	h := &c.Chord
	h.Successors, h.Stabilise, h.FixFingers, h.CheckPredecessor = f.Chord.Successors, f.Chord.Stabilise.Duration, f.Chord.FixFingers.Duration, f.Chord.CheckPredecessor.Duration
	c.GatewayIPs = f.GatewayIPs
	c.DNS, c.Coverage = popDNS(f.DNS, c.DNS), f.DNS.Coverage
	k := f.Content
	c.Edge, c.Origin, c.Redirect = k.Edge, k.Origin, k.Redirect
	if k.Edge == "" {
		o := originFlag{def: k.Origin, hosts: k.Origins}
		c.Origins = o.specs()
	}
	c.CDN.Window, c.CDN.MinRequests, c.CDN.HotTop, c.CDN.HotMin, c.CDN.DirTTL = k.Window.Duration, k.MinRequests, k.HotTop, k.HotMin, k.DirTTL.Duration
	return c
}

// popDNSFile is the [dns] section of c.
func popDNSFile(c pop.Config) config.PopDNS {
	d := c.DNS
	return config.PopDNS{Addr: d.Addr, Zone: d.Zone, Coverage: c.Coverage, Names: d.Names, NS: d.NS, Hostmaster: d.Hostmaster,
		Serial: d.Serial, Refresh: d.Refresh, Retry: d.Retry, Expire: d.Expire, NegTTL: d.NegTTL, ZoneTTL: d.ZoneTTL,
		TTL: int(d.TTL), MinServer: d.MinServer, MaxUDP: int(d.MaxUDP)}
}

// popDNS is the DNS server's configuration from the [dns] section f.
func popDNS(f config.PopDNS, d cdndns.Config) cdndns.Config {
	d.Addr, d.Zone, d.Names, d.NS, d.Hostmaster = f.Addr, f.Zone, f.Names, f.NS, f.Hostmaster
	d.Serial, d.Refresh, d.Retry, d.Expire, d.NegTTL, d.ZoneTTL = f.Serial, f.Refresh, f.Retry, f.Expire, f.NegTTL, f.ZoneTTL
	d.TTL, d.MinServer, d.MaxUDP = uint32(f.TTL), f.MinServer, uint16(f.MaxUDP)
	return d
}

func runPop(args []string) error {
	fs := newFlags("pop", "--name NAME --seed-file FILE [--join PEER,...] [flags]",
		"Run one point of presence of the CDN tier: a gateway (the front) with its nodes and sample site,\n"+
			"joined to the other PoPs by MBPP (shared performance view) and Chord (content directory).\n"+
			"Without --join it founds a new DCDN. Every PoP needs the same seed file.")
	def := pop.DefaultConfig()
	f := popFile(def)
	cfgPath := fs.String("config", "", "TOML configuration file (flags override it)")
	printConfig := fs.Bool("print-config", false, "print a configuration file with every default and exit")
	name := fs.String("name", "", "this PoP's name (its ring ID is the SHA-256 of it)")
	peer := fs.String("peer", f.Peer, "peer listen address (other PoPs connect here)")
	join := fs.String("join", "", "comma-separated peer addresses of PoPs to join; empty founds a new DCDN")
	seed := fs.String("seed-file", "", "shared authentication seed file (≥ 16 bytes, mode 0600: (umask 077; head -c 32 /dev/urandom > seed))")
	listen := fs.String("listen", f.Listen, "gateway (front) address")
	adminAddr := fs.String("admin", f.Admin, "admin API, /pops, /chord and /metrics address (\"off\" disables it)")
	tokenFile := fs.String("admin-token-file", "", "the admin API's bearer token, made if missing (default: admin.token in the --data folder); needed for reads off loopback")
	nodes := fs.Int("nodes", f.Nodes, "in-process nodes")
	cacheMB := fs.Int("cache-mb", f.CacheMB, "memory cache per node, MiB")
	dnsAddr := fs.String("dns", f.DNS.Addr, "authoritative DNS listen address (UDP and TCP) for --zone; empty: no DNS")
	zone := fs.String("zone", f.DNS.Zone, "the CDN's DNS zone, e.g. cdn.example.: A/AAAA for its names answer the best PoP for the client")
	nsList := fs.String("ns", strings.Join(f.DNS.NS, ","), "the zone's name servers, NAME=ADDRESS once per address (ns1=192.0.2.1,ns1=2001:db8::1); default: ns1 at the --dns address, or at --gateway-ip when --dns listens on all addresses")
	dnsNames := fs.String("dns-names", strings.Join(f.DNS.Names, ","), "names of the zone answered with the client's PoP, relative to --zone (@ = the zone itself, * = any name); others are NXDOMAIN")
	gatewayIP := fs.String("gateway-ip", strings.Join(f.GatewayIPs, ","), "addresses clients reach this PoP's gateway at (an IPv4 and/or an IPv6), answered by every PoP's DNS; default: --listen's IP when specific, else --peer's")
	coverage := fs.String("coverage", f.DNS.Coverage, "coverage-zone file: address prefix → PoP name (CSV \"prefix,pop\" or JSON); clients by EDNS Client Subnet or resolver address")
	edge := fs.String("edge", f.Content.Edge, "content tier HTTP address: misses fetched from the best PoP holding them (Chord directory), via the key's home PoP as shield, then --origin; empty: off")
	redirect := fs.Bool("redirect", f.Content.Redirect, "on a miss, send the client (HTTP 302, once) to a PoP holding the content whose MBPP score beats this one's")
	origins := &originFlag{def: f.Content.Origin, hosts: f.Content.Origins}
	fs.Var(origins, "origin", "the origin whose content the PoP's nodes cache (URL, or HOST=URL for one host; repeatable); with --edge, the content tier's origin (default: this PoP's own gateway and site)")
	data := fs.String("data", "", "folder for the generated sample site, and the nodes' stored responses with --origin (default: your cache folder/shoal; stored responses: temporary)")
	shutdownTO := fs.Duration("shutdown-timeout", config.DefaultShutdownTimeout, "on Ctrl-C or SIGTERM, how long requests in flight may finish before connections are cut")
	logf := addLogFlags(fs)
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if *printConfig {
		fmt.Print(config.PopTemplate(f))
		return nil
	}
	if *cfgPath != "" {
		var err error
		if f, err = config.LoadPop(*cfgPath, f); err != nil {
			return err
		}
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "name":
			f.Name = *name
		case "peer":
			f.Peer = *peer
		case "join":
			f.Join = splitList(*join)
		case "seed-file":
			f.SeedFile = *seed
		case "listen":
			f.Listen = *listen
		case "admin":
			f.Admin = *adminAddr
		case "nodes":
			f.Nodes = *nodes
		case "cache-mb":
			f.CacheMB = *cacheMB
		case "dns":
			f.DNS.Addr = *dnsAddr
		case "zone":
			f.DNS.Zone = *zone
		case "coverage":
			f.DNS.Coverage = *coverage
		case "ns":
			f.DNS.NS = splitList(*nsList)
		case "dns-names":
			f.DNS.Names = splitList(*dnsNames)
		case "gateway-ip":
			f.GatewayIPs = splitList(*gatewayIP)
		case "edge":
			f.Content.Edge = *edge
		case "origin":
			f.Content.Origin, f.Content.Origins = origins.def, origins.hosts
		case "redirect":
			f.Content.Redirect = *redirect
		}
	})
	if err := f.Validate(); err != nil {
		return err
	}
	logger, err := logf.logger(os.Stderr, "pop", "", "")
	if err != nil {
		return err
	}
	c := popConfig(f, def)
	c.Cluster.DataDir, c.Cluster.AdminTokenFile = *data, *tokenFile
	if *data != "" {
		c.EdgeData = filepath.Join(*data, "edge", c.Name)
	}
	c.Logger, c.Cluster.Logger = logger, logger
	p, err := pop.Start(c)
	if err != nil {
		return err // a refusal (wrong seed) exits non-zero with its reason
	}
	fmt.Printf("PoP %s (%016x) is up: gateway %s  admin %s/pops  peer %s\n", c.Name, p.ID, p.Cluster.URL, p.AdminURL, p.PeerAddr)
	if p.AdminURL != "" {
		fmt.Printf("  admin token in %s\n", p.AdminTokenFile)
	}
	if p.DNS != nil {
		fmt.Printf("  DNS for %s on %s\n", c.DNS.Zone, p.DNS.UDPAddr)
	}
	if p.EdgeURL != "" {
		fmt.Printf("  content edge %s (purge: POST %s/purge?url=/path)\n", p.EdgeURL, p.AdminURL)
	}
	if len(c.Origins) > 0 && c.Edge == "" {
		fmt.Printf("  caching %s on %d nodes (X-Cache and Cache-Status on each response say what the cache did)\n",
			strings.Join(c.Origins, ", "), c.Cluster.Nodes)
	}
	return waitAndStopAfter(func(ctx context.Context) error { return p.Shutdown(ctx) }, p.Err(), *shutdownTO)
}

// waitAndStop waits for SIGINT, SIGTERM or an error on errc, then stops
// with 4 s for requests in flight.
func waitAndStop(stop func(context.Context) error, errc <-chan error) error {
	return waitAndStopAfter(stop, errc, 4*time.Second)
}

// waitAndStopAfter is waitAndStop with the stop's timeout given
// (--shutdown-timeout).
func waitAndStopAfter(stop func(context.Context) error, errc <-chan error, timeout time.Duration) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	var runErr error
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "shoal: %v, stopping\n", s)
	case runErr = <-errc:
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stop(ctx)
	return runErr
}

// popState is the --state file of `shoal up --pops N`: every listener and
// process, for scripts and tests.
type popState struct {
	SeedFile string         `json:"seed_file"`
	PoPs     []popStateItem `json:"pops"`
}

type popStateItem struct {
	Name    string   `json:"name"`
	ID      string   `json:"id"`
	Gateway string   `json:"gateway"`
	Admin   string   `json:"admin"`
	Peer    string   `json:"peer"`
	Nodes   []string `json:"nodes"`
	PID     int      `json:"pid"`
}

// popsSeed checks `up --pops n` and makes the run's temporary folder with
// one fresh 32-byte seed in it, shared by every PoP of the run; the caller
// removes dir.
func popsSeed(n int) (dir, seedFile string, err error) {
	if n < 1 || n > 64 {
		return "", "", fmt.Errorf("--pops %d: want 1 to 64", n)
	}
	dir, err = os.MkdirTemp("", "shoal-pops-")
	if err != nil {
		return "", "", err
	}
	seed := make([]byte, 32)
	rand.Read(seed)
	seedFile = filepath.Join(dir, "seed")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("seed: %w", err)
	}
	return dir, seedFile, nil
}

// runUpPops starts n PoPs in this process on loopback, each with its own
// nodes and sample site, the first founding the DCDN and the others joining
// it, all with one fresh seed.
func runUpPops(n int, stateFile, dataDir string, nodes, cacheMB int) error {
	dir, seedFile, err := popsSeed(n)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var pops []*pop.PoP
	stopAll := func(ctx context.Context) error {
		for i := len(pops) - 1; i >= 0; i-- {
			pops[i].Shutdown(ctx)
		}
		return nil
	}
	st := popState{SeedFile: seedFile}
	for i := range n {
		c := pop.DefaultConfig()
		c.Name = fmt.Sprintf("pop%d", i+1)
		c.Peer, c.SeedFile = "127.0.0.1:0", seedFile
		c.Cluster.Listen, c.Cluster.Admin, c.Cluster.DataDir = "127.0.0.1:0", "127.0.0.1:0", dataDir
		c.Cluster.Nodes, c.Cluster.CacheMB = nodes, cacheMB
		if i > 0 {
			c.Join = []string{pops[0].PeerAddr}
		}
		p, err := pop.Start(c)
		if err != nil {
			stopAll(context.Background())
			return err
		}
		pops = append(pops, p)
		fmt.Printf("  %s: gateway %s  admin %s/pops  peer %s\n", c.Name, p.Cluster.URL, p.AdminURL, p.PeerAddr)
		st.PoPs = append(st.PoPs, popStateItem{Name: c.Name, ID: fmt.Sprintf("%016x", p.ID), Gateway: p.Cluster.URL,
			Admin: p.AdminURL, Peer: p.PeerAddr, Nodes: p.Cluster.NodeURLs, PID: os.Getpid()})
	}
	fmt.Printf("shoal is up: %d PoPs on loopback joined by MBPP and Chord (on loopback: as root it runs them in a WAN lab with delays). Ctrl-C stops it.\n", n)
	if stateFile != "" {
		b, _ := json.MarshalIndent(st, "", "  ")
		if err := os.WriteFile(stateFile, append(b, '\n'), 0o644); err != nil {
			stopAll(context.Background())
			return fmt.Errorf("--state: %w", err)
		}
	}
	errc := make(chan error, 1)
	for _, p := range pops {
		go func(ch <-chan error) {
			if err, ok := <-ch; ok {
				select {
				case errc <- err:
				default:
				}
			}
		}(p.Err())
	}
	return waitAndStop(stopAll, errc)
}
