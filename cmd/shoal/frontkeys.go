package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
	"shoal/internal/config"
)

// frontKeys are the `shoal front` flags that set a key of config.Front
// directly: each is bound to its field, so a new front option is a field
// of config.Front (with its TOML key and default) plus one line here.
// The few that need a conversion (lists, optional values) go through the
// fields below and frontKeys.convert.
type frontKeys struct {
	nodes, vhosts string
	sysmonIdle    bool
	handoffUID    int
	protocols     protocolKeys
}

// protocolKeys are the [protocols] flags that need a conversion; `shoal
// up` and `shoal pop` bind them too (bindProtocols).
type protocolKeys struct {
	http2     bool
	proxyFrom string
}

// bindFrontKeys defines the flags on fs, bound to fc's fields with def's
// values as their defaults.
func bindFrontKeys(fs *flag.FlagSet, fc *config.Front, def config.Front) *frontKeys {
	k := &frontKeys{}
	fs.StringVar(&fc.Listen, "listen", def.Listen, "client-facing listen address")
	fs.StringVar(&k.nodes, "nodes", "", "comma-separated node URLs, e.g. http://127.0.0.1:9001,http://127.0.0.1:9002")
	fs.StringVar(&fc.Policy, "policy", def.Policy, "request-distribution policy: "+strings.Join(policy.Names(), ", "))
	fs.StringVar(&fc.Path, "path", def.Path, "data path: relay, redirect, passfd (same-host handoff), hybrid (passfd when it pays) or repair")
	fs.StringVar(&fc.HandoffDir, "handoff-dir", def.HandoffDir, "--path passfd|hybrid: pass connections only to node sockets inside this folder (empty: $TMPDIR or /tmp)")
	fs.StringVar(&fc.PassFDMoves, "passfd-moves", def.PassFDMoves, "--path passfd under a policy that shares its URL table (tbccrd): nodes (they move a connection to the node its next request belongs to, by the table) or front (every later request comes back to the front)")
	fs.IntVar(&k.handoffUID, "handoff-uid", *def.HandoffUID, "--path passfd|hybrid: pass connections only to node sockets served by this uid (-1: the front's own)")
	fs.StringVar(&fc.Admin, "admin", "", "admin API and /metrics address (\"off\" or empty: off)")
	fs.StringVar(&fc.AdminTokenFile, "admin-token-file", def.AdminTokenFile, "file holding the admin API's bearer token (32+ random characters, mode 0600); "+
		"without it the admin API is read-only, and an --admin address other than loopback refuses to start")
	bindLimits(fs, &fc.Limits, def.Limits)
	fs.DurationVar(&fc.Health.Interval.Duration, "health-interval", def.Health.Interval.Duration, "active health check interval on /.shoal/status (0: off, for non-shoal back-ends)")
	fs.BoolVar(&k.sysmonIdle, "sysmon-idle", *def.SysmonIdle, "run Go's monitor thread at SCHED_IDLE so its wake-ups do not preempt the relay (Linux)")
	fs.StringVar(&k.vhosts, "vhosts", "", "comma-separated site host names: key tables and metrics by site + path (nodes run with --vhosts)")
	fs.StringVar(&fc.AccessLog, "access-log", def.AccessLog, "access log file, - for stdout (default off)")
	fs.StringVar(&fc.AccessLogFormat, "access-log-format", def.AccessLogFormat, "access log format: "+strings.Join(front.AccessLogFormats, ", ")+
		" (common replays with shoal sim and shoal trace; json adds node, policy, path and timings)")
	fs.DurationVar(&fc.ShutdownTimeout.Duration, "shutdown-timeout", def.ShutdownTimeout.Duration, "on SIGTERM, how long requests in flight may finish before connections are cut")
	fs.StringVar(&fc.PublishDir, "publish-dir", def.PublishDir, "folder for site versions published with shoal publish; nodes must see it at the same path (default off)")
	fs.IntVar(&fc.Replicas, "replicas", def.Replicas, "nodes that store each published file (partitioned storage: placed by the nodes' disk_weight; the nodes need --peers and --peer-key-file); 0 = every node a full copy")
	fs.StringVar(&fc.PublishFetchURL, "publish-fetch-url", def.PublishFetchURL, "the admin API's URL as nodes on other hosts reach it: they fetch each published version from there (default: nodes read --publish-dir)")
	bindProtocols(fs, &fc.Protocols, def.Protocols, &k.protocols)
	return k
}

// bindProtocols defines the [protocols] flags.
func bindProtocols(fs *flag.FlagSet, p *config.Protocols, def config.Protocols, k *protocolKeys) {
	fs.BoolVar(&k.http2, "http2", *def.HTTP2, "offer HTTP/2 on the TLS listener (ALPN h2)")
	fs.BoolVar(&p.H2C, "h2c", def.H2C, "take HTTP/2 with prior knowledge on a plain listener too")
	fs.BoolVar(&p.HTTP3, "http3", def.HTTP3, "serve HTTP/3 (QUIC) on the TLS listener's UDP port, advertised with Alt-Svc (needs TLS)")
	fs.StringVar(&k.proxyFrom, "proxy-protocol-from", strings.Join(def.ProxyProtocolFrom, ","),
		"comma-separated addresses or networks (CIDR) of layer-4 balancers whose connections begin with a PROXY protocol header (v1 or v2); a header from elsewhere is refused")
	fs.IntVar(&p.MaxConcurrentStreams, "max-concurrent-streams", def.MaxConcurrentStreams, "streams an HTTP/2 or HTTP/3 connection may have in progress")
}

// checkProtocols refuses [protocols] settings that cannot work for a
// front with (tls) or without TLS, saying which flag to change.
func checkProtocols(p config.Protocols, tls bool) error {
	if _, err := front.ParsePrefixes(p.ProxyProtocolFrom); err != nil {
		return fmt.Errorf("--proxy-protocol-from: %w", err)
	}
	if p.HTTP3 && !tls {
		return errors.New("--http3 needs TLS (--tls): QUIC carries TLS 1.3 itself")
	}
	if n := p.MaxConcurrentStreams; n < 1 || n > 1<<20 {
		return fmt.Errorf("--max-concurrent-streams %d: want 1 to 1048576", n)
	}
	return nil
}

// convert moves the converted [protocols] flags among given into p.
func (k *protocolKeys) convert(p *config.Protocols, given func(name string) bool) {
	if given("http2") {
		on := k.http2
		p.HTTP2 = &on
	}
	if given("proxy-protocol-from") {
		p.ProxyProtocolFrom = splitList(k.proxyFrom)
	}
}

// bindLimits defines the [limits] flags.
func bindLimits(fs *flag.FlagSet, l *config.Limits, def config.Limits) {
	fs.IntVar(&l.MaxConnPerNode, "max-conn", def.MaxConnPerNode, "requests in flight per node before requests queue at the front (0: no limit)")
	fs.DurationVar(&l.QueueTimeout.Duration, "queue-timeout", def.QueueTimeout.Duration, "longest wait in a node queue before 503")
	fs.DurationVar(&l.HeaderTimeout.Duration, "header-timeout", def.HeaderTimeout.Duration, "limit for receiving one request head (slowloris)")
	fs.DurationVar(&l.IdleTimeout.Duration, "idle-timeout", def.IdleTimeout.Duration, "limit for an idle keep-alive client connection")
	fs.IntVar(&l.MaxHeaderBytes, "max-header-bytes", def.MaxHeaderBytes, "largest request head accepted (431 above)")
	fs.DurationVar(&l.SendTimeout.Duration, "send-timeout", def.SendTimeout.Duration, "close a client that takes no response bytes for this long (nginx send_timeout)")
	fs.IntVar(&l.MaxConns, "max-conns", def.MaxConns, "open client connections; idle ones are closed first near it (0: from RLIMIT_NOFILE, -1: no limit)")
	fs.IntVar(&l.MaxConnsPerIP, "max-conns-per-ip", def.MaxConnsPerIP, "open client connections from one address (0: 256, -1: no limit)")
}

// convert moves the converted flags among given into fc.
func (k *frontKeys) convert(fc *config.Front, given func(name string) bool) {
	if given("nodes") {
		fc.Nodes = nil
		for _, u := range splitList(k.nodes) {
			fc.Nodes = append(fc.Nodes, config.Node{URL: u})
		}
	}
	if given("vhosts") {
		fc.VHosts = splitList(k.vhosts)
	}
	if given("sysmon-idle") {
		on := k.sysmonIdle
		fc.SysmonIdle = &on
	}
	if given("handoff-uid") {
		uid := k.handoffUID
		fc.HandoffUID = &uid
	}
	k.protocols.convert(&fc.Protocols, given)
}

// frontOverride returns the function that applies the command line's
// front keys to a configuration read from a file, at start and at each
// reload: the flags given explicitly, or every one when there is no file.
// It replays them on a second flag set bound to the target.
func frontOverride(fs *flag.FlagSet, def config.Front, fromFile bool) func(*config.Front) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return func(fc *config.Front) {
		keep := *fc
		rs := flag.NewFlagSet("override", flag.ContinueOnError)
		k := bindFrontKeys(rs, fc, def)
		*fc = keep // binding wrote the defaults
		given := func(name string) bool { return set[name] || !fromFile }
		rs.VisitAll(func(f *flag.Flag) {
			if given(f.Name) {
				rs.Set(f.Name, fs.Lookup(f.Name).Value.String()) // a value the flag parsed once
			}
		})
		k.convert(fc, func(name string) bool { return given(name) && rs.Lookup(name) != nil })
	}
}

// flagGiven reports whether the flag name was set on fs's command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
