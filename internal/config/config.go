// Package config reads shoal's TOML configuration files. Every flag of
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
	"shoal/internal/cluster"
	"shoal/internal/policy"
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
	// Admin is the admin API and /metrics address; empty turns it off.
	// Default "127.0.0.1:9090".
	Admin string `toml:"admin"`
	// AdminTokenFile holds the admin API's bearer token (32 or more random
	// characters; mode 0600, refused otherwise). Without it the admin API
	// is read-only, and an Admin address other than loopback refuses to
	// start (internal/admin, issue 10 item 2). Default "".
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
	// AccessLog is a file for the Common Log Format access log; "-" is
	// stdout; empty turns it off. Default "".
	AccessLog string `toml:"access_log"`
	// SysmonIdle runs the Go runtime's monitor thread in SCHED_IDLE
	// (Linux), so its wake-ups stop preempting the relay: about 10 % less
	// CPU per small request on one core (see internal/sysmon). Default true.
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
	// VHosts lists the sites (host names) of a multi-site cluster: the
	// policies' tables and /metrics are keyed by site + path, and hosts not
	// listed share "_default", which bounds them (internal/vhost). Nodes
	// run with --vhosts. Default empty: one site, keys are paths.
	VHosts []string `toml:"vhosts"`
	// VHostAliases maps other host names to a site of VHosts
	// ("www.example.com" = "example.com"). Default none.
	VHostAliases map[string]string `toml:"vhost_aliases"`
}

// Node is one back-end in the file.
type Node struct {
	// URL is the node's base URL, e.g. "http://127.0.0.1:9001".
	URL string `toml:"url"`
	// Weight is the node's capacity weight. Default 1; 0 starts it drained.
	Weight *int `toml:"weight"`
	// Group is the node's capacity class for gwrr.
	Group string `toml:"group"`
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

// Tuning holds the policies' knobs: the [tuning] table, which
// internal/policy defines and documents (policy.Knobs), so that a policy and
// its keys are added in that package alone. Zero means the policy's
// documented default; Tuning.Config converts it to a policy.Config.
type Tuning = policy.Tuning

// Paths lists the data paths `path` accepts.
var Paths = []string{"relay", "redirect", "passfd", "hybrid", "repair"}

// DefaultFront returns the front configuration with every default filled in.
func DefaultFront() Front {
	var f Front
	f.fill()
	return f
}

func (f *Front) fill() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&f.Listen, "127.0.0.1:8080")
	def(&f.Policy, "wrr")
	def(&f.Path, "relay")
	if f.HandoffUID == nil {
		own := -1
		f.HandoffUID = &own
	}
	if f.SysmonIdle == nil {
		on := true
		f.SysmonIdle = &on
	}
	if f.Health.Interval.Duration == 0 {
		f.Health.Interval.Duration = time.Second
	}
	if f.Health.Rise == 0 {
		f.Health.Rise = 2
	}
	if f.Health.Fall == 0 {
		f.Health.Fall = 3
	}
	if f.Limits.MaxConnPerNode == 0 {
		f.Limits.MaxConnPerNode = 256
	}
	if f.Limits.QueueTimeout.Duration == 0 {
		f.Limits.QueueTimeout.Duration = 5 * time.Second
	}
	if f.Limits.HeaderTimeout.Duration == 0 {
		f.Limits.HeaderTimeout.Duration = 10 * time.Second
	}
	if f.Limits.IdleTimeout.Duration == 0 {
		f.Limits.IdleTimeout.Duration = 60 * time.Second
	}
	if f.Limits.MaxHeaderBytes == 0 {
		f.Limits.MaxHeaderBytes = 8192
	}
	if f.Limits.SendTimeout.Duration == 0 {
		f.Limits.SendTimeout.Duration = 60 * time.Second
	}
}

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
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return Front{}, &Error{File: name, Line: pe.Position.Line, Msg: pe.Message,
				Fix: "check the TOML syntax and the value's type (strings in quotes, durations like \"1s\")"}
		}
		// Type mismatches come as plain errors "toml: line N (last key …): …".
		line := 0
		msg := err.Error()
		if rest, ok := strings.CutPrefix(msg, "toml: line "); ok {
			fmt.Sscanf(rest, "%d", &line)
			if _, after, ok := strings.Cut(rest, "): "); ok {
				msg = after
			}
		}
		return Front{}, &Error{File: name, Line: line, Msg: msg,
			Fix: "check the TOML syntax and the value's type (strings in quotes, durations like \"1s\")"}
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
	for i, n := range f.Nodes {
		if _, err := cluster.ParseNodeURL(n.URL); err != nil {
			msg, fix := err.Error(), ""
			var ue *cluster.NodeURLError
			if errors.As(err, &ue) {
				msg, fix = fmt.Sprintf("node %d: url %q: %s", i+1, n.URL, ue.Problem), cluster.NodeURLFix
			}
			bad([]string{"node", "url"}, msg, fix)
		}
		if n.Weight != nil && *n.Weight < 0 {
			bad([]string{"node", "weight"}, fmt.Sprintf("node %d: weight %d is negative", i+1, *n.Weight), "use 0 to drain a node, or a positive weight")
		}
	}
	if f.Health.Rise < 0 || f.Health.Fall < 0 {
		bad([]string{"health", "rise"}, "rise and fall must be positive", "use small counts such as rise = 2, fall = 3")
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
	if f.HandoffDir != "" && !strings.HasPrefix(f.HandoffDir, "/") {
		bad([]string{"handoff_dir"}, fmt.Sprintf("handoff_dir %q is not an absolute path", f.HandoffDir), "write the folder from / such as \"/run/shoal\"")
	}
	if _, err := policy.New(f.Policy, f.Tuning.Config()); err != nil && slices.Contains(policy.Names(), f.Policy) {
		bad([]string{"tuning"}, err.Error(), "correct the [tuning] value it names")
	}
	return errs
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
