package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"shoal/internal/base/store"
	"shoal/internal/cluster/handoff"
	"shoal/internal/cluster/node"
	"shoal/internal/cluster/peer"
)

// NodeServer is the configuration of `shoal node` (`--config FILE`): one
// key per flag, the flag given on the command line winning over the file.
type NodeServer struct {
	// Root is the site root directory. Required, here or as --root,
	// unless Origin or Origins make the node a cache.
	Root string `toml:"root"`
	// Origin makes the node an HTTP cache in front of this origin (cache
	// mode, node.EdgeConfig) instead of a file server. Default "": off.
	Origin string `toml:"origin"`
	// Origins maps a host name to its own origin in cache mode
	// ("example.com" = "http://10.0.0.1:8080"). Default none.
	Origins map[string]string `toml:"origins"`
	// Data holds cache mode's stored responses (the disk tier); "" keeps
	// them in a temporary folder removed at exit. Default "".
	Data string `toml:"data"`
	// DiskMB bounds cache mode's disk tier in MiB. Default 1024
	// (store.DefaultDiskBytes).
	DiskMB int64 `toml:"disk_mb"`
	// Listen is the HTTP listen address. Default "127.0.0.1:8081".
	Listen string `toml:"listen"`
	// CacheMB is the memory cache budget in MiB; 0 turns the cache off.
	// Default 64 (node.DefaultCacheBytes); the command line's default is
	// the memory cgroup's limit less the process's own memory, but a
	// configuration file always sets it.
	CacheMB int64 `toml:"cache_mb"`
	// Memory is the memory the node may use ("36MiB"), which sizes its
	// cache and the Go runtime's limit. Default "": its memory cgroup's
	// limit, if any.
	Memory string `toml:"memory"`
	// Cache is the replacement policy: lru, gdsf or cgdsf. Default "gdsf".
	Cache string `toml:"cache"`
	// MaxObjectKB: files above this size are never held in memory
	// (sendfile). Default 0: an eighth of the cache, at least 500.
	MaxObjectKB int64 `toml:"max_object_kb"`
	// ReadTimeout limits reading one request head. Default "10s".
	ReadTimeout Duration `toml:"read_timeout"`
	// IdleTimeout closes an idle keep-alive connection. Default "1m0s".
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxConns caps open client connections, handed-off ones included;
	// idle ones are closed first at it. Default 0: from RLIMIT_NOFILE; -1:
	// no limit.
	MaxConns int `toml:"max_conns"`
	// SendTimeout closes a connection whose client takes no response bytes
	// this long. Default "1m0s" (node.DefaultWriteTimeout).
	SendTimeout Duration `toml:"send_timeout"`
	// AccessLog is a Common Log Format file, "-" for stdout, "" off.
	AccessLog string `toml:"access_log"`
	// HandoffSocket is the Unix socket on which a front on this host hands
	// client connections over (passfd). Default "": off.
	HandoffSocket string `toml:"handoff_socket"`
	// TrustedFronts are the addresses or CIDRs of fronts whose
	// X-Forwarded-For names the client in the access log. Default none.
	TrustedFronts []string `toml:"trusted_fronts"`
	// LogHealth also logs the front's health checks in the access log.
	// Default false.
	LogHealth bool `toml:"log_health"`
	// LogLevel and LogFormat are the operational log's threshold (debug,
	// info, warn, error) and encoding (text, json). Defaults "info", "text".
	LogLevel  string `toml:"log_level"`
	LogFormat string `toml:"log_format"`
	// ShutdownTimeout is how long SIGTERM lets requests in flight finish.
	// Default "30s" (DefaultShutdownTimeout).
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// PublishDir accepts site versions published by the front from inside
	// this absolute folder; needs AdminTokenFile. Default "": off.
	PublishDir string `toml:"publish_dir"`
	// AdminTokenFile holds the cluster's admin token, which a publish must
	// carry. Default "".
	AdminTokenFile string `toml:"admin_token_file"`
	// MaxRanges bounds the byte ranges one request may ask for; more get
	// the whole file. Default 200 (node.DefaultMaxRanges).
	MaxRanges int `toml:"max_ranges"`
	// NoPrecompressed stops serving name.br / name.gz in place of name.
	// Default false.
	NoPrecompressed bool `toml:"no_precompressed"`
	// VHosts makes Root a folder of sites, one per host name
	// (ROOT/example.com/, ROOT/_default/). Default false.
	VHosts bool `toml:"vhosts"`
	// Aliases maps other host names to a site folder ("www.example.com" =
	// "example.com"); only with VHosts. Default none.
	Aliases map[string]string `toml:"aliases"`
	// Watch serves changes to Root as they happen, for a single node (a
	// cluster publishes). Default false.
	Watch bool `toml:"watch"`
	// SysmonIdle runs the Go runtime's monitor thread at SCHED_IDLE
	// (internal/base/sysmon): its wake-ups stop preempting the thread that
	// serves (a node moving connections in passfd tag mode: 26 µs of CPU a
	// request against 31 with it off). A goroutine blocked in a disk read
	// then keeps its P until the core has a moment for sysmon, so a
	// disk-bound node on a host whose cores other work keeps busy may want
	// it off. Default true.
	SysmonIdle bool `toml:"sysmon_idle"`
	// Repair opens the repair path's handoff port.
	Repair NodeRepair `toml:"repair"`
	// Peer turns on peer fetch and cache digests (internal/cluster/peer).
	Peer NodePeer `toml:"peer"`
}

// NodePeer is a node's side of the node-to-node links (seed 001's fetch
// from a peer's memory; Summary Cache digests for cgdsf).
type NodePeer struct {
	// KeyFile holds the cluster key (mode 0600, at least 16 bytes) every
	// node of the cluster shares; peers without it are refused. Default
	// "": peer fetch off.
	KeyFile string `toml:"key_file"`
	// Peers are the nodes' HTTP addresses in the order of the front's node
	// list (policy decisions name nodes by that index); the entry equal to
	// listen is this node. Default none.
	Peers []string `toml:"peers"`
	// DigestPeriod is how often the node sends its cache digest to its
	// peers. Default "2s" (peer.DefaultDigestPeriod).
	DigestPeriod Duration `toml:"digest_period"`
}

// NodeRepair is a node's side of the repair path.
type NodeRepair struct {
	// KeyFile holds the HMAC key shared with the front. Default "".
	KeyFile string `toml:"key_file"`
	// Listen is the handoff port, e.g. "10.0.0.11:7070". Default "": off.
	Listen string `toml:"listen"`
	// MaxConns bounds the control connections the handoff port holds at
	// once. Default handoff.DefaultRepairMaxConns.
	MaxConns int `toml:"max_conns"`
}

// DefaultNode returns the node configuration with every default filled in.
// CacheMB is set (a file that says cache_mb = 0 turns the cache off).
func DefaultNode() NodeServer {
	return NodeServer{
		Listen:          "127.0.0.1:8081",
		CacheMB:         node.DefaultCacheBytes >> 20,
		DiskMB:          store.DefaultDiskBytes >> 20,
		Cache:           node.DefaultCachePolicy,
		MaxObjectKB:     node.DefaultMaxObject >> 10,
		ReadTimeout:     Duration{node.DefaultReadTimeout},
		IdleTimeout:     Duration{node.DefaultIdleTimeout},
		SendTimeout:     Duration{node.DefaultWriteTimeout},
		MaxRanges:       node.DefaultMaxRanges,
		LogLevel:        "info",
		LogFormat:       "text",
		ShutdownTimeout: Duration{DefaultShutdownTimeout},
		SysmonIdle:      true,
		Repair:          NodeRepair{MaxConns: handoff.DefaultRepairMaxConns},
		Peer:            NodePeer{DigestPeriod: Duration{peer.DefaultDigestPeriod}},
	}
}

// NodeTemplate is a complete node configuration with every default;
// `shoal node --print-config` prints it (TestNodeTemplateIsDefaults keeps
// it equal to DefaultNode).
const NodeTemplate = `# shoal node configuration. Every key but root is optional; shown are the
# defaults. Flags given on the command line override the file.

root = "/srv/www"              # site root directory (required)
listen = "127.0.0.1:8081"      # HTTP listen address
cache_mb = 64                  # memory cache budget in MiB (0: off)
memory = ""                    # memory the node may use ("36MiB"), sizing the cache and Go's limit; "": the memory cgroup's limit
cache = "gdsf"                 # replacement policy: lru, gdsf or cgdsf
max_object_kb = 0              # files above this are never held in memory (sendfile); 0: an eighth of the cache, at least 500
read_timeout = "10s"           # limit for reading one request head
idle_timeout = "1m0s"          # closes an idle keep-alive connection
max_conns = 0                  # open connections, handed-off ones included; 0: from RLIMIT_NOFILE, -1: no limit
send_timeout = "1m0s"          # closes a connection whose client takes no response bytes this long
access_log = ""                # Common Log Format file, "-" for stdout, "" for none
handoff_socket = ""            # Unix socket for a front on this host (--path passfd); "" off
trusted_fronts = []            # fronts whose X-Forwarded-For names the client in the access log
log_health = false             # also log the front's health checks in the access log
log_level = "info"             # operational log threshold: debug, info, warn, error
log_format = "text"            # operational log encoding on stderr: text or json
shutdown_timeout = "30s"       # on SIGTERM, how long requests in flight may finish
publish_dir = ""               # accept published site versions inside this absolute folder; "" off
admin_token_file = ""          # the cluster's admin token, which a publish must carry
watch = false                  # serve changes to root as they happen (single node)
sysmon_idle = true             # Go's monitor thread at SCHED_IDLE: less CPU per request (Linux)
max_ranges = 200               # a request for more byte ranges gets the whole file
no_precompressed = false       # never serve name.br / name.gz in place of name
vhosts = false                 # root holds one folder per host name (root/example.com/, root/_default/)
origin = ""                    # cache mode: an HTTP cache in front of this origin URL instead of root; "" off
data = ""                      # cache mode: folder of the stored responses; "" a temporary one
disk_mb = 1024                 # cache mode: disk tier bound in MiB

[repair]                       # the repair path's handoff port (needs CAP_NET_ADMIN, the VIP on lo)
key_file = ""                  # HMAC key shared with the front
listen = ""                    # e.g. "10.0.0.11:7070"; "" off
max_conns = 16                 # control connections held at once (the oldest unauthenticated one is evicted)

[peer]                         # fetch from peers' memories (seed 001), cache digests for cgdsf
key_file = ""                  # cluster key shared by every node (mode 0600); "" off
peers = []                     # the nodes' HTTP addresses in the front's node order (this node's is listen)
digest_period = "2s"           # how often the cache digest (a Bloom filter) goes to the peers

[aliases]                      # with vhosts: other host names served from a site's folder
# "www.example.com" = "example.com"

[origins]                      # cache mode: the origin of one host name
# "example.com" = "http://10.0.0.1:8080"
`

// LoadNode reads and validates a node configuration file; keys the file
// leaves out take their defaults. All problems are reported, joined.
func LoadNode(path string) (NodeServer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return NodeServer{}, fmt.Errorf("config: %w", err)
	}
	return ParseNode(path, data)
}

// ParseNode is LoadNode over bytes already read; name is used in errors.
func ParseNode(name string, data []byte) (NodeServer, error) {
	n := DefaultNode()
	md, err := toml.Decode(string(data), &n)
	if err != nil {
		return NodeServer{}, decodeError(name, err)
	}
	var errs []error
	bad := func(key []string, msg, fix string) {
		errs = append(errs, &Error{File: name, Line: lineOf(data, toml.Key(key)), Msg: msg, Fix: fix})
	}
	for _, k := range md.Undecoded() {
		bad(k, fmt.Sprintf("unknown key %q", k.String()), "remove it or correct its spelling (shoal node --print-config shows every key)")
	}
	if names := []string{"lru", "gdsf", "cgdsf"}; !slices.Contains(names, n.Cache) {
		bad([]string{"cache"}, fmt.Sprintf("cache %q is unknown", n.Cache), "use one of "+strings.Join(names, ", "))
	}
	if n.CacheMB < 0 || n.MaxObjectKB < 0 {
		bad([]string{"cache_mb"}, fmt.Sprintf("cache_mb %d, max_object_kb %d: sizes cannot be negative", n.CacheMB, n.MaxObjectKB),
			"use 0 to turn the cache off")
	}
	if n.ReadTimeout.Duration <= 0 || n.IdleTimeout.Duration <= 0 || n.SendTimeout.Duration <= 0 {
		bad([]string{"read_timeout"}, "read_timeout, idle_timeout and send_timeout must be positive", `use durations such as "10s"`)
	}
	if n.Peer.DigestPeriod.Duration <= 0 {
		bad([]string{"peer", "digest_period"}, "peer digest_period must be positive", `use a duration such as "2s"`)
	}
	if n.Repair.MaxConns <= 0 {
		bad([]string{"repair", "max_conns"}, fmt.Sprintf("repair max_conns %d is not positive", n.Repair.MaxConns), "use a count such as 64")
	}
	return n, errors.Join(errs...)
}

// decodeError turns a TOML decoding error into an Error with its line.
func decodeError(name string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &Error{File: name, Line: pe.Position.Line, Msg: pe.Message,
			Fix: "check the TOML syntax and the value's type (strings in quotes, durations like \"1s\")"}
	}
	line := 0
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "toml: line "); ok {
		fmt.Sscanf(rest, "%d", &line)
		if _, after, ok := strings.Cut(rest, "): "); ok {
			msg = after
		}
	}
	return &Error{File: name, Line: line, Msg: msg,
		Fix: "check the TOML syntax and the value's type (strings in quotes, durations like \"1s\")"}
}
