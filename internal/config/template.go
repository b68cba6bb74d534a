package config

import (
	"fmt"
	"strings"

	"shoal/internal/cluster/policy"
)

// FrontTemplate returns a complete front configuration with every default
// written out and explained; `shoal front --print-config` prints it. The
// [tuning] table comes from internal/cluster/policy (Registry.TuningTemplate), which
// names for each key the policies that read it. A test checks that parsing
// it gives exactly DefaultFront plus the sample nodes and the policies'
// defaults, so the documentation cannot drift from the code.
func FrontTemplate() (string, error) {
	t, err := (*policy.Registry)(nil).TuningTemplate()
	if err != nil {
		return "", fmt.Errorf("config template: %w", err)
	}
	names := strings.Join(policy.Names(), " ")
	return strings.Replace(frontTemplate, "# POLICIES", "# "+names, 1) + t, nil
}

// frontTemplate is FrontTemplate up to the [tuning] table, with POLICIES
// where the policy names go.
const frontTemplate = `# shoal front configuration. Every key is optional; shown are the defaults.
# Flags given on the command line override the file.

listen = "127.0.0.1:8080"      # client-facing address
admin = ""                     # admin API and /metrics, e.g. "127.0.0.1:9090" ("": off)
admin_token_file = ""          # bearer token for admin writes, mode 0600 (openssl rand -hex 32);
                               # without it the admin API is read-only; required off loopback
policy = "wrr"                 # POLICIES
path = "relay"                 # data path: relay, redirect, passfd, hybrid or repair
access_log = ""                # the front's access log file, "-" for stdout, "" for none
access_log_format = "common"   # common (replays with shoal sim/trace), combined, or json (adds node, policy, path, timings)
log_level = "info"             # operational log on stderr: debug, info, warn or error
log_format = "text"            # text or json
shutdown_timeout = "30s"       # SIGTERM lets requests in flight finish this long (large downloads too)
publish_dir = ""               # site versions for shoal publish; nodes must see it at the same path ("": off)
publish_fetch_url = ""         # nodes on other hosts fetch versions from this admin URL instead ("": shared publish_dir)
replicas = 0                   # nodes storing each published file, placed by disk_weight (0: every node a full copy)
sysmon_idle = true             # Go's monitor thread at SCHED_IDLE: less CPU per request (Linux)
handoff_dir = ""               # passfd/hybrid: node handoff sockets must be in this folder ("": $TMPDIR or /tmp)
handoff_uid = -1               # passfd/hybrid: ... and served by this user (-1: the front's own uid)
passfd_moves = "nodes"         # passfd under tbccrd: nodes move connections by the front's table, or "front"
# vhosts = ["example.com", "example.org"]   # many sites: tables and metrics keyed by site + path
#                                           # (nodes run with --vhosts); other hosts share "_default"
# [vhost_aliases]                           # other names of a site
# "www.example.com" = "example.com"

# HTTPS: one [[tls]] table per certificate (PEM files); the front then serves
# TLS 1.2+ on listen and picks the certificate by the client's server name
# (SNI), the first one for clients that send none. Without any: plain HTTP.
# [[tls]]
# cert = "/etc/shoal/tls/example.org.crt"  # chain, server certificate first
# key = "/etc/shoal/tls/example.org.key"   # mode 0600

# One [[node]] table per back-end.
[[node]]
url = "http://127.0.0.1:9001"
weight = 1                     # 0 drains the node
group = ""                     # capacity class for gwrr
disk_weight = 1                # disk size (any common unit): the node's share of a partitioned site

[[node]]
url = "http://127.0.0.1:9002"

[health]                       # active checks on /.shoal/status
interval = "1s"
rise = 2                       # good checks that bring a node up
fall = 3                       # failed checks that take it down

[limits]
max_conn_per_node = 256        # more requests wait in the front's queue
queue_timeout = "5s"           # a queued request gets 503 after this
header_timeout = "10s"         # cuts clients that send the head too slowly
idle_timeout = "60s"           # closes idle keep-alive clients
max_header_bytes = 8192        # larger request heads get 431
send_timeout = "60s"           # closes a client that takes no response bytes this long
max_conns = 0                  # open client connections; 0: from RLIMIT_NOFILE, -1: no limit
max_conns_per_ip = 0           # open client connections per address; 0: 256, -1: no limit

[protocols]                    # what clients may speak besides HTTP/1.1; PROXY headers
http2 = true                   # HTTP/2 on the TLS listener (ALPN h2), each stream routed and relayed
h2c = false                    # HTTP/2 with prior knowledge on a plain listener too
http3 = false                  # HTTP/3 (QUIC) on the TLS listener's UDP port, advertised with Alt-Svc (needs TLS)
proxy_protocol_from = []       # balancers ("10.0.0.0/8", "192.0.2.7") whose connections begin with a PROXY
                               # header (v1 or v2): its address counts; a header from elsewhere is refused
max_concurrent_streams = 100   # streams an HTTP/2 or HTTP/3 connection may have in progress

[hybrid]                       # path = "hybrid": hand off when it pays, relay otherwise (seed 002)
cpu_percent = 30.0             # while the front's CPU is above this percent of one core (negative: off)
conns = 130                    # while more client connections than this are open (negative: off)
size_kb = 100                  # objects at least this large, sizes from the nodes' index (negative: off)
site = ""                      # the nodes' site root on this host: sizes before the index arrives

[repair]                       # path = "repair": cross-host handoff
key_file = ""                  # HMAC key shared with the nodes, >= 16 bytes (required for repair)
port = 7070                    # the nodes' handoff port (shoal node --repair-listen)
dev = ""                       # interface towards the nodes; "" = the one holding the listen address
steer = "auto"                 # per-flow steering: bpf (kernel >= 6.6), nftables, or auto
moves = "nodes"                # under tbccrd: nodes move connections among themselves, or "front" (they stay put)
accept = "front"               # under tbccrd with moves = "nodes": "nodes" accept new connections themselves (bpf steering)

`
