package config

// FrontTemplate is a complete front configuration with every default
// written out and explained; `shoal front --print-config` prints it. A test
// checks that parsing it gives exactly DefaultFront plus the sample nodes,
// so the documentation cannot drift from the code.
const FrontTemplate = `# shoal front configuration. Every key is optional; shown are the defaults.
# Flags given on the command line override the file.

listen = "127.0.0.1:8080"      # client-facing address
admin = "127.0.0.1:9090"       # admin API and /metrics (default "": off)
admin_token_file = ""          # bearer token for admin writes, mode 0600 (openssl rand -hex 32);
                               # without it the admin API is read-only; required off loopback
policy = "wrr"                 # rr wrr gwrr lc wlc dfwrr urlhash chbl p2c lard lardr tbccrd weblins
path = "relay"                 # data path: relay, redirect, passfd, hybrid or repair
access_log = ""                # Common Log Format file, "-" for stdout, "" for none
sysmon_idle = true             # Go's monitor thread at SCHED_IDLE: less CPU per request (Linux)
handoff_dir = ""               # passfd/hybrid: node handoff sockets must be in this folder ("": $TMPDIR or /tmp)
handoff_uid = -1               # passfd/hybrid: ... and served by this user (-1: the front's own uid)
# vhosts = ["example.com", "example.org"]   # many sites: tables and metrics keyed by site + path
#                                           # (nodes run with --vhosts); other hosts share "_default"
# [vhost_aliases]                           # other names of a site
# "www.example.com" = "example.com"

# One [[node]] table per back-end.
[[node]]
url = "http://127.0.0.1:9001"
weight = 1                     # 0 drains the node
group = ""                     # capacity class for gwrr

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

[tuning]                       # policy knobs; 0 means the policy's default
seed = 0                       # p2c's random seed
epsilon = 0.25                 # chbl: a node holds at most ceil((1+eps)*mean) requests
virtual_nodes = 100            # chbl: ring points per node
t_low = 25                     # lard/lardr thresholds (active requests)
t_high = 65
k = "20s"                      # lardr: shrink a server set unchanged this long
period = "5s"                  # dfwrr feedback period, weblins popular-set rebuild
feedback_a = 5.0               # dfwrr: w += A*cbrt(target - load)
target_load = 0.95
load_limit = 65                # tbccrd: a cache holder this loaded falls back to a disk holder
cache_mb = 32                  # tbccrd/weblins: each node's mirrored cache budget
no_cache_kb = 500              # objects above this are never cached
handoff_kb = 100               # weblins S: hand off files at least this large
overload_conns = 130           # weblins T: an owner this busy is overloaded
popular_n = 100                # weblins: size of the replicated popular set
max_urls = 65536               # lard/lardr/tbccrd/weblins: URLs per table; least recently requested evicted
max_url_mb = 8                 # and the URL text those tables hold, in MiB
`
