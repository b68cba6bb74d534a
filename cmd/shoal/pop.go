package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"shoal/internal/cdn/cdndns"
	"shoal/internal/cdn/chord"
	"shoal/internal/cdn/pop"
	"shoal/internal/config"
	"shoal/internal/up"
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
		TLS: c.Cluster.TLS, Protocols: popProtocols(c.Cluster.Protocols),
		MBPP: config.PopMBPP{Hold: d(c.MBPP.Hold), AckTimeout: d(c.MBPP.AckTimeout), Retries: c.MBPP.Retries,
			LearningFactor: c.MBPP.LearningFactor, WeightLink: c.MBPP.WeightLink, WeightServer: c.MBPP.WeightServer,
			LocalBonus: c.MBPP.LocalBonus, RTTRef: d(c.MBPP.RTTRef), RTTDeadband: c.MBPP.RTTDeadband,
			ServerDeadband: c.MBPP.ServerDeadband, PublishLinks: c.MBPP.PublishLinks, WatchdogRounds: c.MBPP.WatchdogRounds,
			EstimateRTT: c.MBPP.EstimateRTT, HealEvery: d(c.MBPP.HealEvery)},
		Chord: config.PopChord{Successors: c.Chord.Successors, Stabilise: d(c.Chord.Stabilise), FixFingers: d(c.Chord.FixFingers),
			CheckPredecessor: d(c.Chord.CheckPredecessor)},
		DNS: popDNSFile(c),
		Content: config.PopContent{Edge: c.Edge, Origin: c.Origin, Window: d(c.CDN.Window), MinRequests: c.CDN.MinRequests,
			HotTop: c.CDN.HotTop, HotMin: c.CDN.HotMin, DirTTL: d(c.CDN.DirTTL), Redirect: c.Redirect,
			ShieldStretch: c.CDN.ShieldStretch, NearerOrigin: c.CDN.NearerOrigin}}
}

// popProtocols is p with config.DefaultFront's [protocols] in its zero
// fields, so --print-config shows every default.
func popProtocols(p config.Protocols) config.Protocols {
	d := config.DefaultFront().Protocols
	if p.HTTP2 == nil {
		p.HTTP2 = d.HTTP2
	}
	if p.MaxConcurrentStreams == 0 {
		p.MaxConcurrentStreams = d.MaxConcurrentStreams
	}
	if p.ProxyProtocolFrom == nil {
		p.ProxyProtocolFrom = []string{}
	}
	return p
}

func popConfig(f config.Pop, c pop.Config) pop.Config {
	c.Name, c.Peer, c.Join, c.SeedFile, c.JoinTimeout = f.Name, f.Peer, f.Join, f.SeedFile, f.JoinTimeout.Duration
	c.Cluster.Listen, c.Cluster.Admin, c.Cluster.Nodes, c.Cluster.CacheMB = f.Listen, f.Admin, f.Nodes, f.CacheMB
	c.Cluster.TLS, c.Cluster.Protocols = f.TLS, f.Protocols
	m := &c.MBPP
	m.Hold, m.AckTimeout, m.Retries, m.LearningFactor = f.MBPP.Hold.Duration, f.MBPP.AckTimeout.Duration, f.MBPP.Retries, f.MBPP.LearningFactor
	m.WeightLink, m.WeightServer, m.LocalBonus, m.RTTRef = f.MBPP.WeightLink, f.MBPP.WeightServer, f.MBPP.LocalBonus, f.MBPP.RTTRef.Duration
	m.RTTDeadband, m.ServerDeadband, m.PublishLinks, m.WatchdogRounds = f.MBPP.RTTDeadband, f.MBPP.ServerDeadband, f.MBPP.PublishLinks, f.MBPP.WatchdogRounds
	m.EstimateRTT, m.HealEvery = f.MBPP.EstimateRTT, f.MBPP.HealEvery.Duration
	h := &c.Chord
	h.Successors, h.Stabilise, h.FixFingers, h.CheckPredecessor = f.Chord.Successors, f.Chord.Stabilise.Duration, f.Chord.FixFingers.Duration, f.Chord.CheckPredecessor.Duration
	c.GatewayIPs = f.GatewayIPs
	c.DNS, c.Coverage = popDNS(f.DNS, c.DNS), f.DNS.Coverage
	k := f.Content
	c.Edge, c.Origin, c.Redirect = k.Edge, k.Origin, k.Redirect
	o := originFlag{def: k.Origin, hosts: k.Origins}
	c.Origins = o.specs()
	c.CDN.Window, c.CDN.MinRequests, c.CDN.HotTop, c.CDN.HotMin, c.CDN.DirTTL = k.Window.Duration, k.MinRequests, k.HotTop, k.HotMin, k.DirTTL.Duration
	c.CDN.ShieldStretch, c.CDN.NearerOrigin = k.ShieldStretch, k.NearerOrigin
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
	tokenFile := fs.String("admin-token-file", "", "the admin API's bearer token, made if missing (default: admin.token in the --data folder); needed for reads off loopback")
	data := fs.String("data", "", "folder for the generated sample site, and the nodes' stored responses with --origin (default: your cache folder/shoal; stored responses: temporary)")
	shutdownTO := fs.Duration("shutdown-timeout", config.DefaultShutdownTimeout, "on Ctrl-C or SIGTERM, how long requests in flight may finish before connections are cut")
	apply := bindPopFlags(fs, f)
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
	apply(&f)
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
	printPop(p, c)
	return waitAndStopAfter(func(ctx context.Context) error { return p.Shutdown(ctx) }, p.Err(), *shutdownTO)
}

// printPop is what `shoal pop` prints once the PoP is up: its addresses,
// the admin token's file and, with an origin, the purge command with the
// headers the admin API wants.
func printPop(p *pop.PoP, c pop.Config) {
	fmt.Printf("PoP %s (%016x) is up: gateway %s  admin %s/pops  peer %s\n", c.Name, p.ID, p.Cluster.URL, p.AdminURL, p.PeerAddr)
	if p.AdminURL != "" {
		fmt.Printf("  admin token in %s\n", p.AdminTokenFile)
	}
	if p.DNS != nil {
		fmt.Printf("  DNS for %s on %s\n", c.DNS.Zone, p.DNS.UDPAddr)
	}
	if len(c.Origins) == 0 {
		return
	}
	fmt.Printf("  caching %s on %d nodes (X-Cache and Cache-Status on each response say what the caches did; GET %s/content counts)\n",
		strings.Join(c.Origins, ", "), c.Cluster.Nodes, p.AdminURL)
	if p.AdminURL != "" {
		fmt.Printf("  purge a URL from every PoP (or prefix=, tag=; soft=1):\n")
		fmt.Printf("    curl -H \"Authorization: Bearer $(cat %s)\" -H 'Content-Type: application/json' -X POST '%s/purge?url=/index.html'\n",
			p.AdminTokenFile, p.AdminURL)
	} else {
		fmt.Printf("  (no admin API, so no purge)\n")
	}
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
	Origin   string         `json:"origin"`
	PoPs     []popStateItem `json:"pops"`
}

// ringMember is one PoP's place in the rings as waitRings reads it: its
// ID, how many PoPs its MBPP view holds alive, its Chord successor.
type ringMember struct {
	id, succ uint64
	members  int
}

// ringsFormed reports whether every PoP sees all of them in MBPP and the
// Chord successors go round all of them in one cycle: until then a miss
// may not find its key's home, and the demo's second GET would go to the
// origin.
func ringsFormed(ms []ringMember) bool {
	next := map[uint64]uint64{}
	for _, m := range ms {
		if m.members != len(ms) {
			return false
		}
		next[m.id] = m.succ
	}
	if len(ms) == 0 {
		return false
	}
	seen := map[uint64]bool{}
	for id := ms[0].id; !seen[id]; id = next[id] {
		if _, ok := next[id]; !ok {
			return false
		}
		seen[id] = true
	}
	return len(seen) == len(ms)
}

// waitRings polls read until the rings are formed, or fails after limit.
func waitRings(read func() ([]ringMember, error), limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ms, err := read()
		if err == nil && ringsFormed(ms) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the PoPs' rings did not form within %v (%v)", limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tryPath is the file `shoal up --pops` suggests fetching.
const tryPath = "/docs/index.html"

// tryPoPs picks the two PoPs the demo fetches tryPath at: the second is
// not the file's home PoP (which keeps a copy as shield whenever another
// PoP misses), so that its first GET is a fetch from a PoP holding the
// copy, not a hit; the first is any other.
func tryPoPs(st popState) (first, second int) {
	ids := make([]chord.ID, len(st.PoPs))
	for i, p := range st.PoPs {
		ids[i] = chord.Hash(p.Name)
	}
	key := chord.ContentKey("", pop.Key("", tryPath))
	// The home is the key's successor: the smallest ID at or after it,
	// else (past the top of the ring) the smallest of all.
	home, lowest := -1, 0
	for i, id := range ids {
		if id < ids[lowest] {
			lowest = i
		}
		if id >= key && (home < 0 || id < ids[home]) {
			home = i
		}
	}
	if home < 0 {
		home = lowest
	}
	second = (home + 1) % len(ids)
	first = (second + 1) % len(ids)
	return first, second
}

// printTryCDN says how to see the CDN at work: the same file at one PoP,
// then twice at another (a copy fetched from a PoP holding it, then a
// hit), by each answer's X-Cache and Cache-Status (RFC 9211: each PoP's
// cache adds its entry, named after the PoP, to the upstream's).
func printTryCDN(st popState) {
	if len(st.PoPs) < 2 {
		return
	}
	a, b := tryPoPs(st)
	g := func(i int) string { return strings.TrimSuffix(st.PoPs[i].Gateway, "/") }
	fmt.Printf("  Try it: the same file at %s, then twice at %s:\n", st.PoPs[a].Name, st.PoPs[b].Name)
	for _, i := range []int{a, b, b} {
		fmt.Printf("    curl -s -o /dev/null -D - %s%s | grep -iE '^(x-cache|cache-status)'\n", g(i), tryPath)
	}
	fmt.Printf("  The first is a MISS fetched from the origin (Cache-Status: the file's home PoP, then %s);\n"+
		"  the second a MISS whose Cache-Status holds another PoP's hit before %s's own entry: a copy from that PoP, not the origin;\n"+
		"  the third a HIT. Counters: %s/content (remote_fetches, shield_fetches, origin_fetches); dashboard %s/\n",
		st.PoPs[a].Name, st.PoPs[b].Name, st.PoPs[b].Admin, st.PoPs[b].Admin)
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

// popsRun is what `shoal up --pops N` was asked for.
type popsRun struct {
	n, nodes, cacheMB int
	state, dataDir    string
	// origin is the CDN's origin; "" starts one (up.StartOrigin).
	origin string
}

// runUpPops starts n PoPs in this process on loopback, each with its own
// nodes, the first founding the DCDN and the others joining it, all with
// one fresh seed, in front of the origin (started here when none is
// given).
func runUpPops(r popsRun) error {
	n := r.n
	dir, seedFile, err := popsSeed(n)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var pops []*pop.PoP
	var origin *up.Origin
	stopAll := func(ctx context.Context) error {
		for i := len(pops) - 1; i >= 0; i-- {
			pops[i].Shutdown(ctx)
		}
		if origin != nil {
			origin.Shutdown(ctx)
		}
		return nil
	}
	if r.origin == "" {
		if origin, err = up.StartOrigin(r.dataDir, "127.0.0.1:0", slog.Default()); err != nil {
			return err
		}
		r.origin = origin.URL
		fmt.Printf("  origin: %s (a node serving the sample site, %s)\n", origin.URL, origin.Root)
	}
	st := popState{SeedFile: seedFile, Origin: r.origin}
	for i := range n {
		c := pop.DefaultConfig()
		c.Name = fmt.Sprintf("pop%d", i+1)
		c.Peer, c.SeedFile, c.Origins = "127.0.0.1:0", seedFile, strings.Split(r.origin, ",")
		c.Cluster.Listen, c.Cluster.Admin, c.Cluster.DataDir = "127.0.0.1:0", "127.0.0.1:0", r.dataDir
		c.Cluster.Nodes, c.Cluster.CacheMB = r.nodes, r.cacheMB
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
	if err := waitRings(func() ([]ringMember, error) {
		var ms []ringMember
		for _, p := range pops {
			m := ringMember{id: p.ID, members: p.Pops().Members}
			if s := p.Chord().Successors; len(s) > 0 {
				m.succ = uint64(s[0].ID)
			}
			ms = append(ms, m)
		}
		return ms, nil
	}, 60*time.Second); err != nil {
		stopAll(context.Background())
		return err
	}
	fmt.Printf("shoal is up: %d PoPs on loopback joined by MBPP and Chord, in front of %s (on loopback: as root it runs them in a WAN lab with delays). Ctrl-C stops it.\n", n, r.origin)
	printTryCDN(st)
	if r.state != "" {
		b, _ := json.MarshalIndent(st, "", "  ")
		if err := os.WriteFile(r.state, append(b, '\n'), 0o644); err != nil {
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

// bindPopFlags defines the flags of shoal pop that set fields of its
// configuration file on fs, with f's values as defaults; the function it
// returns copies those given on the command line into a file (which a
// --config file may have filled since), so flags override the file.
func bindPopFlags(fs *flag.FlagSet, f config.Pop) func(*config.Pop) {
	name := fs.String("name", "", "this PoP's name (its ring ID is the SHA-256 of it)")
	peer := fs.String("peer", f.Peer, "peer listen address (other PoPs connect here)")
	join := fs.String("join", "", "comma-separated peer addresses of PoPs to join; empty founds a new DCDN")
	seed := fs.String("seed-file", "", "shared authentication seed file (≥ 16 bytes, mode 0600: (umask 077; head -c 32 /dev/urandom > seed))")
	listen := fs.String("listen", f.Listen, "gateway (front) address")
	adminAddr := fs.String("admin", f.Admin, "admin API, /pops, /chord and /metrics address (\"off\" disables it)")
	nodes := fs.Int("nodes", f.Nodes, "in-process nodes")
	cacheMB := fs.Int("cache-mb", f.CacheMB, "memory cache per node, MiB")
	dnsAddr := fs.String("dns", f.DNS.Addr, "authoritative DNS listen address (UDP and TCP) for --zone; empty: no DNS")
	zone := fs.String("zone", f.DNS.Zone, "the CDN's DNS zone, e.g. cdn.example.: A/AAAA for its names answer the best PoP for the client")
	nsList := fs.String("ns", strings.Join(f.DNS.NS, ","), "the zone's name servers, NAME=ADDRESS once per address (ns1=192.0.2.1,ns1=2001:db8::1); default: ns1 at the --dns address, or at --gateway-ip when --dns listens on all addresses")
	dnsNames := fs.String("dns-names", strings.Join(f.DNS.Names, ","), "names of the zone answered with the client's PoP, relative to --zone (@ = the zone itself, * = any name); others are NXDOMAIN")
	gatewayIP := fs.String("gateway-ip", strings.Join(f.GatewayIPs, ","), "addresses clients reach this PoP's gateway at (an IPv4 and/or an IPv6), answered by every PoP's DNS; default: --listen's IP when specific, else --peer's")
	coverage := fs.String("coverage", f.DNS.Coverage, "coverage-zone file: address prefix → PoP name (CSV \"prefix,pop\" or JSON); clients by EDNS Client Subnet or resolver address")
	edge := fs.String("edge", f.Content.Edge, "gone: the gateway (--listen) serves the CDN's content (give --origin)")
	redirect := fs.Bool("redirect", f.Content.Redirect, "on a miss, send the client (HTTP 302, once) to a PoP holding the content whose MBPP score beats this one's")
	origins := &originFlag{def: f.Content.Origin, hosts: f.Content.Origins}
	fs.Var(origins, "origin", "the CDN's origin (URL, or HOST=URL for one host; repeatable): the nodes cache it, and a miss goes to a PoP holding the content, the key's home PoP (shield), then the origin; empty: serve the sample site")
	tls := fs.Bool("tls", f.TLS, "serve the gateway over HTTPS with a self-signed certificate kept in the --data folder (clients: curl -k)")
	var pk protocolKeys
	protos := f.Protocols
	bindProtocols(fs, &protos, f.Protocols, &pk)
	return func(f *config.Pop) {
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
			case "tls":
				f.TLS = *tls
			case "h2c":
				f.Protocols.H2C = protos.H2C
			case "http3":
				f.Protocols.HTTP3 = protos.HTTP3
			case "max-concurrent-streams":
				f.Protocols.MaxConcurrentStreams = protos.MaxConcurrentStreams
			}
		})
		pk.convert(&f.Protocols, func(name string) bool { return fs.Lookup(name) != nil && flagGiven(fs, name) })
	}
}
