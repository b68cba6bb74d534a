// Package config reads shoal's TOML configuration files.
//
// Imports run one way, from config down to the packages it configures
// (front, control, node, peer, handoff, policy, admin): each of those
// declares its own defaults (front.DefaultConfig, control.DefaultCheckConfig,
// node.Default*, ...), and config only composes them into files and
// templates, so a default is written once, next to the code that uses it,
// and no package below has to know the file format. Every flag of
// `shoal front` has a key here; flags given on the command line override the
// file, and DefaultFront prints the defaults as a commented file an operator
// can start from (`shoal front --print-config`).
//
// Errors are for people: each names the file, the line and how to fix it
// ("front.toml:7: policy \"lardd\" is unknown; fix: use one of …"), because a
// load balancer that refuses to start must say exactly why. BurntSushi/toml
// reports positions only for syntax and type errors, so for unknown keys and
// for values that parse but make no sense the line is found by scanning the
// file for the key within its table.
package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"shoal/internal/admin"
	"shoal/internal/cluster/control"
	"shoal/internal/cluster/front"
	"shoal/internal/cluster/policy"
)

// Duration is a time.Duration written as a Go duration string ("1s", "250ms").
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like \"1s\" or \"250ms\"", b)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Front is the configuration of `shoal front`.
type Front struct {
	// Listen is the client-facing address. Default "127.0.0.1:8080".
	Listen string `toml:"listen"`
	// Admin is the admin API and /metrics address; empty or AdminOff
	// ("off", as `shoal up` and `shoal pop` take it) turns it off.
	// Default "127.0.0.1:9090".
	Admin string `toml:"admin"`
	// AdminTokenFile holds the admin API's bearer token (32 or more random
	// characters; mode 0600, refused otherwise). Without it the admin API
	// is read-only, and an Admin address other than loopback refuses to
	// start (internal/admin). Default "".
	AdminTokenFile string `toml:"admin_token_file"`
	// Policy is the request-distribution policy (see policy.Names). Default "wrr".
	Policy string `toml:"policy"`
	// Path is the data path: relay, redirect, passfd, hybrid or repair (SPEC §4). Default "relay".
	Path string `toml:"path"`
	// Nodes are the back-ends.
	Nodes []Node `toml:"node"`
	// Health tunes active health checks.
	Health Health `toml:"health"`
	// Limits bounds what clients and nodes may cost the front.
	Limits Limits `toml:"limits"`
	// Tuning holds the policies' knobs.
	Tuning Tuning `toml:"tuning"`
	// Hybrid tunes the hybrid data path's rule (seed 002).
	Hybrid Hybrid `toml:"hybrid"`
	// Repair configures the cross-host handoff path.
	Repair Repair `toml:"repair"`
	// AccessLog is a file for the front's access log; "-" is stdout;
	// empty turns it off. Default "".
	AccessLog string `toml:"access_log"`
	// AccessLogFormat is "common" (Common Log Format, which `shoal trace`
	// and `shoal sim` replay), "combined" (plus Referer and User-Agent) or
	// "json" (plus node, policy, data path and upstream time). Default
	// "common".
	AccessLogFormat string `toml:"access_log_format"`
	// LogLevel is the operational log's threshold: debug, info, warn or
	// error. Default "info".
	LogLevel string `toml:"log_level"`
	// LogFormat is the operational log's encoding on stderr: "text"
	// (slog's key=value) or "json" (one object per line, for collectors).
	// Default "text".
	LogFormat string `toml:"log_format"`
	// ShutdownTimeout is how long SIGTERM or SIGINT lets requests in
	// flight finish (a large download included) before the connections
	// are cut. Default "30s".
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// PublishDir is the folder `shoal publish` (POST /publish) writes
	// site versions to; every node must see it at the same path (one
	// host, or a shared filesystem) and run with --publish-dir at or
	// above it and the admin token. Empty (the default) turns publishing
	// off. Needs admin_token_file.
	PublishDir string `toml:"publish_dir"`
	// Replicas is how many nodes store each file a publish writes
	// (partitioned storage, internal/cluster/placement): each node's tree holds
	// only its share, placed by weighted rendezvous hashing on the nodes'
	// disk_weight, and the nodes fetch the rest from its holders over
	// their peer links (--peers in the order of [[node]], --peer-key-file).
	// 0 (the default) or at least the node count: every node the whole
	// site. Needs a shared publish_dir (no publish_fetch_url).
	Replicas int `toml:"replicas"`
	// PublishFetchURL is the front's admin API as the nodes reach it
	// ("http://10.0.0.1:9090"), for nodes on other hosts that do not
	// share publish_dir: they fetch each version from there in the
	// prepare phase. Empty (the default): the nodes read publish_dir.
	PublishFetchURL string `toml:"publish_fetch_url"`
	// SysmonIdle runs the Go runtime's monitor thread in SCHED_IDLE
	// (Linux), so its wake-ups stop preempting the relay: about 10 % less
	// CPU per small request on one core (see internal/base/sysmon). Default true.
	SysmonIdle *bool `toml:"sysmon_idle"`
	// HandoffDir is the folder the nodes' handoff sockets must be in for
	// passfd and hybrid (front.PassFDConfig): nodes report their socket in
	// their status, so a socket elsewhere is refused and relayed. Default ""
	// (the system temporary folder, where `shoal up` puts its sockets).
	HandoffDir string `toml:"handoff_dir"`
	// HandoffUID is the user the nodes' handoff sockets must be served by
	// (SO_PEERCRED); others are refused and relayed. Default -1 (the front's
	// own effective uid).
	HandoffUID *int `toml:"handoff_uid"`
	// PassFDMoves says who moves a passfd connection to the node its next
	// request belongs to under a policy that shares its URL table
	// (tbccrd; front.PassFDConfig.Moves): "nodes" (default: by the table,
	// node to node) or "front" (every later request goes back to the
	// front).
	PassFDMoves string `toml:"passfd_moves"`
	// TLS lists the certificates when the front serves HTTPS on Listen
	// ([[tls]] tables; front.LoadCerts): one is picked per handshake by the
	// client's server name (SNI), the first for clients that send none.
	// Default none: plain HTTP. The handoff paths relay TLS connections.
	TLS []TLSCert `toml:"tls"`
	// VHosts lists the sites (host names) of a multi-site cluster: the
	// policies' tables and /metrics are keyed by site + path, and hosts not
	// listed share "_default", which bounds them (internal/base/vhost). Nodes
	// run with --vhosts. Default empty: one site, keys are paths.
	VHosts []string `toml:"vhosts"`
	// VHostAliases maps other host names to a site of VHosts
	// ("www.example.com" = "example.com"). Default none.
	VHostAliases map[string]string `toml:"vhost_aliases"`
	// Protocols selects what clients may speak besides HTTP/1.1, and which
	// addresses send PROXY protocol headers.
	Protocols Protocols `toml:"protocols"`
}

// Protocols is the [protocols] table (front.Config's HTTP2, NoHTTP2, H2C,
// AltSvc and ProxyFrom; the gateway serves HTTP/3).
type Protocols struct {
	// HTTP2 offers HTTP/2 on the TLS listener (ALPN h2; each stream is
	// routed and relayed like a request over HTTP/1.1). Default true.
	HTTP2 *bool `toml:"http2"`
	// H2C takes HTTP/2 with prior knowledge (the client's connection
	// preface) on a plain listener too. Default false.
	H2C bool `toml:"h2c"`
	// HTTP3 serves HTTP/3 over QUIC on the TLS listener's port (UDP) and
	// advertises it with Alt-Svc; it needs TLS, a UDP port open in the
	// firewall and larger socket buffers (docs/deploy.md). Default false.
	HTTP3 bool `toml:"http3"`
	// ProxyProtocolFrom lists the addresses or networks ("10.0.0.0/8",
	// "192.0.2.7") of layer-4 balancers whose connections begin with a
	// PROXY protocol header (v1 or v2); the client address it carries is
	// then used for the per-address limit, X-Forwarded-For and the logs.
	// A header from any other address closes the connection. Default none.
	ProxyProtocolFrom []string `toml:"proxy_protocol_from"`
	// MaxConcurrentStreams bounds the streams an HTTP/2 or HTTP/3
	// connection may have in progress. Default 100
	// (front.DefaultH2Config).
	MaxConcurrentStreams int `toml:"max_concurrent_streams"`
}

// TLSCert is one certificate chain and its private key, PEM files.
type TLSCert struct {
	// Cert is the certificate chain, the server's certificate first.
	Cert string `toml:"cert"`
	// Key is its private key (mode 0600 or 0400, readable by the front).
	Key string `toml:"key"`
}

// Node is one back-end in the file.
type Node struct {
	// URL is the node's base URL, e.g. "http://127.0.0.1:9001".
	URL string `toml:"url"`
	// Weight is the node's capacity weight. Default 1; 0 starts it drained.
	Weight *int `toml:"weight"`
	// Group is the node's capacity class for gwrr.
	Group string `toml:"group"`
	// DiskWeight is the node's disk size in any unit common to all nodes:
	// its placement weight when replicas partitions the site (its share
	// of the files follows it). Default 1.
	DiskWeight float64 `toml:"disk_weight"`
}

// Health tunes active checks on /.shoal/status.
type Health struct {
	// Interval between checks. Default "1s".
	Interval Duration `toml:"interval"`
	// Rise good checks bring a node up. Default 2.
	Rise int `toml:"rise"`
	// Fall failed checks take a node down. Default 3.
	Fall int `toml:"fall"`
}

// Limits bounds client and node costs.
type Limits struct {
	// MaxConnPerNode caps concurrent requests on one node; more wait in the
	// front's queue (LARD's front queue). Default 256.
	MaxConnPerNode int `toml:"max_conn_per_node"`
	// QueueTimeout is how long a queued request waits before a 503. Default "5s".
	QueueTimeout Duration `toml:"queue_timeout"`
	// HeaderTimeout cuts a client that has not sent a whole request head
	// (slowloris). Default "10s".
	HeaderTimeout Duration `toml:"header_timeout"`
	// IdleTimeout closes an idle keep-alive client. Default "60s".
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxHeaderBytes bounds a request head; larger gets 431. Default 8192.
	MaxHeaderBytes int `toml:"max_header_bytes"`
	// SendTimeout closes a client connection whose client takes no
	// response bytes for this long (nginx's send_timeout). Default "60s".
	SendTimeout Duration `toml:"send_timeout"`
	// MaxConns caps open client connections; past 7/8 of it the longest
	// idle ones are closed, and at it new ones get 503 when none is idle.
	// Default 0: derived from RLIMIT_NOFILE (front.DefaultMaxClientConns);
	// -1: no limit.
	MaxConns int `toml:"max_conns"`
	// MaxConnsPerIP caps open client connections from one address. Default
	// 0: 256 (front.DefaultMaxConnsPerIP); -1: no limit.
	MaxConnsPerIP int `toml:"max_conns_per_ip"`
}

// Hybrid is the hybrid path's rule (front.HybridConfig): hand off while
// the front's CPU, its open client connections or the object's size is
// above its threshold, relay otherwise.
type Hybrid struct {
	// CPUPercent of one core above which requests are handed off; negative
	// turns the rule off. Default 30.
	CPUPercent float64 `toml:"cpu_percent"`
	// Conns is the number of open client connections above which requests
	// are handed off (Weblins' T); negative turns the rule off. Default 130.
	Conns int64 `toml:"conns"`
	// SizeKB: objects of at least this many KiB are handed off (Weblins'
	// S); negative turns the rule off. Default 100.
	SizeKB int64 `toml:"size_kb"`
	// Site is the nodes' site root on this host, whose URL table gives
	// sizes before the nodes' size index has arrived. Default "".
	Site string `toml:"site"`
}

// Repair configures the repair path (front.RepairConfig).
type Repair struct {
	// KeyFile holds the HMAC key shared with the nodes (at least 16 bytes).
	// Default "" (required with path = "repair").
	KeyFile string `toml:"key_file"`
	// Port is the nodes' handoff port (shoal node --repair-listen).
	// Default 7070.
	Port int `toml:"port"`
	// Dev is the interface towards the nodes. Default "": the one holding
	// the listen address.
	Dev string `toml:"dev"`
	// Steer is the per-flow steering: bpf, nftables or auto. Default "auto".
	Steer string `toml:"steer"`
	// Moves says who moves a connection to the node its next request
	// belongs to under a policy that shares its URL table (tbccrd): nodes
	// (node to node with TCP_REPAIR, by the table the front pushes) or
	// front (a connection stays where its first request sent it).
	// Default "nodes".
	Moves string `toml:"moves"`
	// Accept says who accepts new connections in tag mode: front (the
	// front accepts each one and hands it over) or nodes (the front's
	// steering program sends a new connection's SYN straight to a node,
	// which accepts it on the VIP and reports it). Default "front".
	Accept string `toml:"accept"`
}

// Tuning holds the policies' knobs: the [tuning] table, which
// internal/cluster/policy defines and documents (policy.Knobs), so that a policy and
// its keys are added in that package alone. Zero means the policy's
// documented default; Tuning.Config converts it to a policy.Config.
type Tuning = policy.Tuning

// DefaultShutdownTimeout is how long a stopping front or node lets
// requests in flight finish: long enough for a 50 MB download at 2 MB/s.
const DefaultShutdownTimeout = 30 * time.Second

// LogLevels and LogFormats list what log_level and log_format accept.
var (
	LogLevels  = []string{"debug", "info", "warn", "error"}
	LogFormats = []string{"text", "json"}
)

// Paths lists the data paths `path` accepts.
var Paths = []string{"relay", "redirect", "passfd", "hybrid", "repair"}

// DefaultFront returns the front configuration with every default filled in.
func DefaultFront() Front {
	var f Front
	f.fill()
	return f
}

// fill gives f's unset keys their defaults: the command's own (listen,
// policy, path, logs, shutdown) written here, the rest composed from the
// packages that use them (front.DefaultConfig, control.DefaultCheckConfig).
func (f *Front) fill() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	num := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	dur := func(v *Duration, d time.Duration) {
		if v.Duration == 0 {
			v.Duration = d
		}
	}
	fd, hd, cd := front.DefaultConfig(), front.DefaultHybridConfig(), control.DefaultCheckConfig()
	f.NormalizeAdmin()
	def(&f.Listen, "127.0.0.1:8080")
	def(&f.Policy, "wrr")
	def(&f.Path, "relay")
	def(&f.Repair.Steer, "auto")
	def(&f.Repair.Moves, "nodes")
	def(&f.Repair.Accept, "front")
	def(&f.PassFDMoves, "nodes")
	num(&f.Repair.Port, front.DefaultRepairPort)
	if f.Hybrid.CPUPercent == 0 {
		f.Hybrid.CPUPercent = hd.CPUPercent
	}
	if f.Hybrid.Conns == 0 {
		f.Hybrid.Conns = hd.ActiveConns
	}
	if f.Hybrid.SizeKB == 0 {
		f.Hybrid.SizeKB = hd.MinSize >> 10
	}
	def(&f.AccessLogFormat, "common")
	def(&f.LogLevel, "info")
	def(&f.LogFormat, "text")
	dur(&f.ShutdownTimeout, DefaultShutdownTimeout)
	if f.HandoffUID == nil {
		own := -1
		f.HandoffUID = &own
	}
	if f.SysmonIdle == nil {
		on := true
		f.SysmonIdle = &on
	}
	dur(&f.Health.Interval, cd.Interval)
	num(&f.Health.Rise, cd.Rise)
	num(&f.Health.Fall, cd.Fall)
	// A per-node limit is `shoal front`'s choice (LARD's front queue);
	// the data plane alone has none.
	num(&f.Limits.MaxConnPerNode, DefaultMaxConnPerNode)
	dur(&f.Limits.QueueTimeout, fd.QueueTimeout)
	dur(&f.Limits.HeaderTimeout, fd.HeaderTimeout)
	dur(&f.Limits.IdleTimeout, fd.IdleTimeout)
	num(&f.Limits.MaxHeaderBytes, fd.MaxHeadBytes)
	dur(&f.Limits.SendTimeout, fd.WriteTimeout)
	if f.Protocols.HTTP2 == nil {
		on := !fd.NoHTTP2
		f.Protocols.HTTP2 = &on
	}
	num(&f.Protocols.MaxConcurrentStreams, int(fd.HTTP2.MaxConcurrentStreams))
}

// DefaultMaxConnPerNode is `shoal front`'s limit of requests in flight on
// one node before requests queue at the front.
const DefaultMaxConnPerNode = 256

// Error is a configuration error that names where and how to fix it.
type Error struct {
	File string
	Line int // 0 when the problem is not on one line
	Msg  string
	Fix  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString("; fix: ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

// LoadFront reads and validates a front configuration file. Fields the file
// leaves out take their defaults. All problems are reported, joined.
func LoadFront(path string) (Front, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Front{}, fmt.Errorf("config: %w", err)
	}
	return ParseFront(path, data)
}

// ParseFront is LoadFront over bytes already read; name is used in errors.
func ParseFront(name string, data []byte) (Front, error) {
	var f Front
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		return Front{}, decodeError(name, err)
	}
	var errs []error
	for _, k := range md.Undecoded() {
		errs = append(errs, &Error{File: name, Line: lineOf(data, k), Msg: fmt.Sprintf("unknown key %q", k.String()),
			Fix: "remove it or correct its spelling (shoal front --print-config shows every key)"})
	}
	f.fill()
	errs = append(errs, f.validate(name, data)...)
	return f, errors.Join(errs...)
}

// AdminOff is the Admin value that turns the admin API off, the word
// every command takes.
const AdminOff = "off"

// NormalizeAdmin turns Admin = AdminOff into "" (off), the front's own
// spelling, so "off" is never taken for an address.
func (f *Front) NormalizeAdmin() {
	if strings.EqualFold(strings.TrimSpace(f.Admin), AdminOff) {
		f.Admin = ""
	}
}

// Validate checks a configuration built from flags (no file to point into).
func (f *Front) Validate() error {
	f.fill()
	return errors.Join(f.validate("flags", nil)...)
}

func (f *Front) validate(name string, data []byte) []error {
	var errs []error
	bad := func(key []string, msg, fix string) {
		errs = append(errs, &Error{File: name, Line: lineOf(data, toml.Key(key)), Msg: msg, Fix: fix})
	}
	if !slices.Contains(policy.Names(), f.Policy) {
		bad([]string{"policy"}, fmt.Sprintf("policy %q is unknown", f.Policy), "use one of "+strings.Join(policy.Names(), ", "))
	}
	if !slices.Contains(Paths, f.Path) {
		bad([]string{"path"}, fmt.Sprintf("path %q is unknown", f.Path), "use one of "+strings.Join(Paths, ", "))
	}
	if f.Admin != "" {
		if _, err := admin.CheckBind(f.Admin, f.AdminTokenFile != ""); err != nil {
			bad([]string{"admin"}, err.Error(), "")
		}
	}
	for i, c := range f.TLS {
		if c.Cert == "" || c.Key == "" {
			bad([]string{"tls", "cert"}, fmt.Sprintf("tls %d: cert %q, key %q: both are needed", i+1, c.Cert, c.Key),
				"give each [[tls]] table a cert and a key file (PEM)")
		}
	}
	f.validateNodes(bad)
	if _, err := front.ParsePrefixes(f.Protocols.ProxyProtocolFrom); err != nil {
		bad([]string{"protocols", "proxy_protocol_from"}, "proxy_protocol_from: "+err.Error(), "list addresses or networks such as \"10.0.0.0/8\" or \"192.0.2.7\"")
	}
	if n := f.Protocols.MaxConcurrentStreams; n < 1 || n > 1<<20 {
		bad([]string{"protocols", "max_concurrent_streams"}, fmt.Sprintf("max_concurrent_streams %d is out of range", n), "use 1 to 1048576 (default 100)")
	}
	if _, err := front.ParseAccessLogFormat(f.AccessLogFormat); err != nil {
		bad([]string{"access_log_format"}, fmt.Sprintf("access_log_format %q is unknown", f.AccessLogFormat), "use one of "+strings.Join(front.AccessLogFormats, ", "))
	}
	if !slices.Contains(LogLevels, f.LogLevel) {
		bad([]string{"log_level"}, fmt.Sprintf("log_level %q is unknown", f.LogLevel), "use one of "+strings.Join(LogLevels, ", "))
	}
	if !slices.Contains(LogFormats, f.LogFormat) {
		bad([]string{"log_format"}, fmt.Sprintf("log_format %q is unknown", f.LogFormat), "use one of "+strings.Join(LogFormats, ", "))
	}
	if f.PublishDir != "" && !strings.HasPrefix(f.PublishDir, "/") {
		bad([]string{"publish_dir"}, fmt.Sprintf("publish_dir %q is not an absolute path", f.PublishDir), "write the folder from / such as \"/srv/shoal/versions\"")
	}
	if u := f.PublishFetchURL; u != "" && (!strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") || f.PublishDir == "") {
		bad([]string{"publish_fetch_url"}, fmt.Sprintf("publish_fetch_url %q needs an http(s) URL and publish_dir", u), "write the admin API's URL as the nodes reach it, such as \"http://10.0.0.1:9090\"")
	}
	if f.Replicas < 0 || f.Replicas > 0 && (f.PublishDir == "" || f.PublishFetchURL != "") {
		bad([]string{"replicas"}, fmt.Sprintf("replicas %d needs a shared publish_dir (no publish_fetch_url) and must not be negative", f.Replicas), "set publish_dir on a folder the nodes share, or leave replicas at 0 (full copies)")
	}
	if f.PublishDir != "" && f.AdminTokenFile == "" {
		bad([]string{"publish_dir"}, "publish_dir needs admin_token_file: the nodes take a publish only with the admin token", "set admin_token_file, or remove publish_dir")
	}
	if f.ShutdownTimeout.Duration < 0 {
		bad([]string{"shutdown_timeout"}, "shutdown_timeout is negative", "use a duration such as \"30s\"")
	}
	if f.Health.Rise < 0 || f.Health.Fall < 0 {
		bad([]string{"health", "rise"}, "rise and fall must be positive", "use small counts such as rise = 2, fall = 3")
	}
	if p := f.Repair.Port; p < 1 || p > 65535 {
		bad([]string{"repair", "port"}, fmt.Sprintf("repair port %d is out of range", p), "use a TCP port between 1 and 65535, such as 7070")
	}
	if !slices.Contains([]string{"auto", "bpf", "nftables"}, f.Repair.Steer) {
		bad([]string{"repair", "steer"}, fmt.Sprintf("repair steer %q is unknown", f.Repair.Steer), "use auto, bpf or nftables")
	}
	if !slices.Contains([]string{"nodes", "front"}, f.Repair.Moves) {
		bad([]string{"repair", "moves"}, fmt.Sprintf("repair moves %q is unknown", f.Repair.Moves), "use nodes or front")
	}
	if !slices.Contains([]string{"nodes", "front"}, f.Repair.Accept) {
		bad([]string{"repair", "accept"}, fmt.Sprintf("repair accept %q is unknown", f.Repair.Accept), "use front or nodes")
	}
	if f.Limits.MaxConnPerNode < 0 {
		bad([]string{"limits", "max_conn_per_node"}, "max_conn_per_node is negative", "use a positive count such as 256")
	}
	if f.Limits.SendTimeout.Duration < 0 {
		bad([]string{"limits", "send_timeout"}, "send_timeout is negative", "use a duration such as \"60s\"")
	}
	if m := f.Limits.MaxHeaderBytes; m != 0 && (m < 1024 || m > 1<<20) {
		bad([]string{"limits", "max_header_bytes"}, fmt.Sprintf("max_header_bytes %d is out of range", m), "use a value between 1024 and 1048576")
	}
	if f.HandoffUID != nil && *f.HandoffUID < -1 {
		bad([]string{"handoff_uid"}, fmt.Sprintf("handoff_uid %d is not a user id", *f.HandoffUID), "use a uid such as 1000, or -1 for the front's own")
	}
	if f.PassFDMoves != "" && f.PassFDMoves != "nodes" && f.PassFDMoves != "front" {
		bad([]string{"passfd_moves"}, fmt.Sprintf("passfd_moves %q is unknown", f.PassFDMoves), "use nodes or front")
	}
	if f.HandoffDir != "" && !strings.HasPrefix(f.HandoffDir, "/") {
		bad([]string{"handoff_dir"}, fmt.Sprintf("handoff_dir %q is not an absolute path", f.HandoffDir), "write the folder from / such as \"/run/shoal\"")
	}
	if _, err := policy.New(f.Policy, f.Tuning.Config()); err != nil && slices.Contains(policy.Names(), f.Policy) {
		bad([]string{"tuning"}, err.Error(), "correct the [tuning] value it names")
	}
	return errs
}

// validateNodes checks each [[node]] table: its URL, disk weight and weight.
func (f *Front) validateNodes(bad func(key []string, msg, fix string)) {
	for i, n := range f.Nodes {
		if _, err := control.ParseNodeURL(n.URL); err != nil {
			msg, fix := err.Error(), ""
			var ue *control.NodeURLError
			if errors.As(err, &ue) {
				msg, fix = fmt.Sprintf("node %d: url %q: %s", i+1, n.URL, ue.Problem), control.NodeURLFix
			}
			bad([]string{"node", "url"}, msg, fix)
		}
		if n.DiskWeight < 0 {
			bad([]string{"node", "disk_weight"}, fmt.Sprintf("node %d: disk_weight %v is negative", i+1, n.DiskWeight), "give the disk size in any unit common to all nodes, or leave it out (1)")
		}
		if n.Weight != nil && *n.Weight < 0 {
			bad([]string{"node", "weight"}, fmt.Sprintf("node %d: weight %d is negative", i+1, *n.Weight), "use 0 to drain a node, or a positive weight")
		}
		if n.Weight != nil && *n.Weight > policy.MaxWeight {
			bad([]string{"node", "weight"}, fmt.Sprintf("node %d: weight %d is above the largest, %d", i+1, *n.Weight, policy.MaxWeight), "weights are ratios: scale them into 1.."+fmt.Sprint(policy.MaxWeight))
		}
	}
}

// lineOf finds the 1-based line that sets key (a dotted path such as
// limits.max_conn_per_node or node.url) by tracking [table] and [[array]]
// headers; 0 when not found. For keys in an array of tables it returns the
// first occurrence, which is what a person reading the error looks at first.
func lineOf(data []byte, key toml.Key) int {
	if len(data) == 0 || len(key) == 0 {
		return 0
	}
	want := key[len(key)-1]
	table := strings.Join(key[:len(key)-1], ".")
	sc := bufio.NewScanner(bytes.NewReader(data))
	cur, line, tableLine := "", 0, 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(s, "[") {
			cur = strings.Trim(s, "[] ")
			if cur == strings.Join(key, ".") {
				tableLine = line
			}
			continue
		}
		k, _, ok := strings.Cut(s, "=")
		if ok && cur == table && strings.Trim(strings.TrimSpace(k), `"`) == want {
			return line
		}
	}
	return tableLine
}
