#!/usr/bin/env bash
# stack-vs-haproxy.sh — the whole stack under a memory budget, side by side
# with what an operator would deploy instead: 4 back-ends, each in a memory
# cgroup of MEM (36 MiB, about a third of the working set: four together hold
# it), each serving its own copy of a site made from the NASA August trace
# (1,704 files, 111 MB), and the trace replayed through the front with
# `shoal bench http --trace` (CONNS connections, one warm-up pass, then
# PASSES passes). Against it, HAProxy 2.6 in front of 4 nginx 1.22 (1 worker
# each, sendfile) with `balance roundrobin` and with `balance uri` +
# `hash-type consistent`. shoal's nodes are started with no memory flag:
# they size themselves from their cgroup.
#
# The configurations of a cell (disk, layout, round) run side by side
# (INTERLEAVE=1): each has its own back-ends, front, cgroups, ports and site
# copies, all started at once; caches are dropped (and, on a guest that
# reports free memory to its host, the freed cache is left to be reported),
# each gets its warm-up pass, and then the measured passes take turns, one
# pass of each configuration at a time, the order rotating by one every
# pass. Every configuration thus meets the host's slow minutes alike (on
# this machine they come and go within a minute or two and move a front's
# cost a request by up to half, docs/benchmarks.md), and a ratio of two
# configurations compares the same minutes. INTERLEAVE=0 runs them one
# after the other, each from its own dropped caches. Reported per
# configuration:
# req/s of the measured passes together and the worst pass's p99; disk
# bytes the back-ends' cgroups read (block I/O counters: warm-up and
# measured passes); CPU per request of the back-end tier and the front tier
# (cgroup CPU counters over the measured passes, so every process of a tier
# counts) and of the load generator (its own, `cpu_s`); OOM kills and failed
# requests; for shoal, the collector's share of the nodes' CPU
# (runtime/metrics via /.shoal/status) and the nodes' peak memory; then,
# per round, each shoal configuration's req/s ratio to each HAProxy one and
# whether it read fewer disk bytes than all of them. DISKS runs it on the
# machine's disk ("fast") and throttled to a cloud volume's baseline
# ("throttled": THROTTLE_BPS bytes/s and THROTTLE_IOPS reads/s for the 4
# back-ends together, which share one disk as on one machine; cgroup v1
# blkio.throttle.* or v2 io.max).
#
# Core layouts (LAYOUTS, BACKEND:LOAD): the 4 back-ends share core BACKEND;
# the front and the load generator share core LOAD; "0:1 1:0" runs both ways
# round. nginx has 1 worker and shoal's nodes GOMAXPROCS=1, HAProxy nbthread
# 1 and shoal's front GOMAXPROCS=1. The load generator runs as SCHED_BATCH
# (LOAD_SCHED=batch; "other" for the normal policy), so that its wake-ups do
# not preempt the front it shares a core with: the core then does the
# fronts' work, not context switches; and with its io_uring engine
# (LOAD_ENGINE=uring; "goroutines" for the other), which takes about a
# third less of that core (docs/benchmarks.md).
#
# Needs root (cgroups, drop_caches), nginx, haproxy, python3. Cgroup v1
# (memory, blkio, cpuacct hierarchies) or v2 (memory, io, cpu).
#
# Usage: sudo bench/stack-vs-haproxy.sh     (from the repo root; builds shoal)
# Env:   RUNS=1 rounds per cell; MEM=36 MiB; CONNS=32; PASSES=5;
#        CONFIGS="haproxy-roundrobin haproxy-uri shoal-wrr shoal-lard shoal-tbccrd"
#        (shoal-POLICY-PATH picks the front's data path: shoal-tbccrd-hybrid);
#        DISKS="fast throttled"; LAYOUTS="0:1 1:0"; THROTTLE_BPS=125000000;
#        THROTTLE_IOPS=3000; TRACE=path; NICE=-10; LOAD_SCHED=batch; LOAD_ENGINE=uring;
#        INTERLEAVE=1; SHOAL=path/to/shoal;
#        PERF=record or stat (perf record -g, or perf stat of its CPU,
#        context switches and system calls, of the front's process during
#        each measured pass: OUT/bench-CONFIG-DISK-LAYOUT-ROUND-pPASS.perf*);
#        FRONT_ARGS="" (extra `shoal front` flags, e.g. "--passfd-moves front");
#        METRICS=1 (a shoal front serves /metrics, saved after the passes as
#        OUT/metrics-CONFIG-DISK-LAYOUT-ROUND.txt; it costs the front its
#        decision logging, so leave it off for the numbers);
#        NODE_ARGS="" (extra `shoal node` flags, e.g. "--cache lru"; none by
#        default: the nodes size themselves);
#        OUT=dir (raw results and the table; default a temporary folder kept).
set -euo pipefail

RUNS=${RUNS:-1}
MEM=${MEM:-36}
CONNS=${CONNS:-32}
PASSES=${PASSES:-5}
CONFIGS=${CONFIGS:-"haproxy-roundrobin haproxy-uri shoal-wrr shoal-lard shoal-tbccrd"}
DISKS=${DISKS:-"fast throttled"}
LAYOUTS=${LAYOUTS:-"0:1 1:0"}
THROTTLE_BPS=${THROTTLE_BPS:-125000000}
THROTTLE_IOPS=${THROTTLE_IOPS:-3000}
NICE=${NICE:--10}
LOAD_SCHED=${LOAD_SCHED:-batch}
LOAD_ENGINE=${LOAD_ENGINE:-uring}
INTERLEAVE=${INTERLEAVE:-1}
# One stack (back-ends, front, their cgroups, ports and site copies) per
# configuration of a cell when they run side by side.
NSTACKS=1
[ "$INTERLEAVE" = 1 ] && NSTACKS=$(wc -w <<<"$CONFIGS")
LOADSCHED=()
[ "$LOAD_SCHED" = batch ] && LOADSCHED=(chrt --batch 0)
TRACE=${TRACE:-/work/shared/data/traces/nasa_aug95_19950801_fullday_derived.log.gz}
# Below the ephemeral port range, where outgoing connections cannot hold them.
BASE=${PORT_BASE:-$((12000 + (RANDOM % 700) * 10))}
NB=4

BENCH=stack-vs-haproxy
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_need nginx haproxy go curl python3 taskset chrt
[ "$(id -u)" = 0 ] || { echo "$BENCH: needs root (cgroups, drop_caches)" >&2; exit 1; }
[ -f "$TRACE" ] || { echo "$BENCH: no trace at $TRACE" >&2; exit 1; }
bench_workdir shoal-svh
OUT=${OUT:-$(mktemp -d /tmp/stack-vs-haproxy.XXXXXX)}
mkdir -p "$OUT"
bench_stop_services
# BUILD names what ran in each result row: the commit (+ when the tree has
# changes), or the binary given as SHOAL.
BUILD=${SHOAL:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +)}
bench_build_shoal
LOADAVG_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# --- cgroups -------------------------------------------------------------
CGP=shoal-svh-$$
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	CGV=2
	CG2=/sys/fs/cgroup
	mkdir "$CG2/$CGP"
	echo "+memory +io +cpu" >"$CG2/cgroup.subtree_control" 2>/dev/null || true
	echo "+memory +io +cpu" >"$CG2/$CGP/cgroup.subtree_control"
elif [ -d /sys/fs/cgroup/memory ] && [ -d /sys/fs/cgroup/blkio ] && [ -d /sys/fs/cgroup/cpuacct ]; then
	CGV=1
	for c in memory blkio cpuacct; do mkdir "/sys/fs/cgroup/$c/$CGP"; done
else
	echo "$BENCH: no usable cgroup hierarchy (v2 with memory/io/cpu, or v1 memory/blkio/cpuacct)" >&2
	exit 1
fi
# The block device the sites live on, MAJ:MIN, for throttling.
DEV=$(lsblk -no MAJ:MIN "$(findmnt -no SOURCE -T "$W" | head -1)" 2>/dev/null | head -1 | tr -d ' ')
[ -n "$DEV" ] || { echo "$BENCH: cannot find the block device of $W" >&2; exit 1; }

# Stack ST's cgroups are named sST-front, sST-b1 … sST-b4 (cgn NAME).
ST=0
cgn() { echo "s$ST-$1"; }

cgdir() { # cgdir CONTROLLER NAME (v2: a stack's back-ends sN-b* under its sN-disk)
	if [ "$CGV" = 2 ]; then
		if [[ $2 == s*-b* ]]; then echo "$CG2/$CGP/${2%%-*}-disk/$2"; else echo "$CG2/$CGP/$2"; fi
	else echo "/sys/fs/cgroup/$1/$CGP/$2"; fi
}

# A stack's back-ends share one disk, as on one machine: their reads are
# counted (and, throttled, limited) together. v2: the back-ends' cgroups sit
# in one parent, sST-disk, whose io.max binds them all; v1 throttling is not
# hierarchical, so every back-end's process joins one blkio cgroup,
# sST-disk, while its memory and CPU are counted in its own. Only one stack
# is loaded at a time, so each stack's limit is the disk's.

# cg_disk THROTTLE: make stack ST's disk cgroup, throttled when THROTTLE=1.
cg_disk() {
	local d
	if [ "$CGV" = 2 ]; then
		d="$CG2/$CGP/s$ST-disk"
		mkdir "$d"
		echo "+memory +io +cpu" >"$d/cgroup.subtree_control"
		[ "$1" = 0 ] || echo "$DEV rbps=$THROTTLE_BPS riops=$THROTTLE_IOPS" >"$d/io.max"
	else
		d=$(cgdir blkio "s$ST-disk")
		mkdir "$d"
		if [ "$1" != 0 ]; then
			echo "$DEV $THROTTLE_BPS" >"$d/blkio.throttle.read_bps_device"
			echo "$DEV $THROTTLE_IOPS" >"$d/blkio.throttle.read_iops_device"
		else
			# v1 counts a cgroup's I/O only on a throttled device: a
			# limit no disk reaches turns the counters on.
			echo "$DEV 1000000000000000" >"$d/blkio.throttle.read_bps_device"
		fi
	fi
}

# cg_new NAME MEM_MIB: a cgroup with a memory limit (0: none); the
# back-ends' (b*) share the disk cgroup.
cg_new() {
	local n=$1 mem=$2
	if [ "$CGV" = 2 ]; then
		mkdir "$(cgdir - "$n")"
		[ "$mem" = 0 ] || { echo $((mem << 20)) >"$(cgdir - "$n")/memory.max"; echo 0 >"$(cgdir - "$n")/memory.swap.max" 2>/dev/null || true; }
	else
		for c in memory cpuacct; do mkdir "$(cgdir $c "$n")"; done
		[ "$mem" = 0 ] || echo $((mem << 20)) >"$(cgdir memory "$n")/memory.limit_in_bytes"
	fi
}

cg_enter() { # cg_enter NAME PID
	if [ "$CGV" = 2 ]; then echo "$2" >"$(cgdir - "$1")/cgroup.procs"
	else
		for c in memory cpuacct; do echo "$2" >"$(cgdir $c "$1")/cgroup.procs"; done
		[[ $1 != s*-b* ]] || echo "$2" >"$(cgdir blkio "${1%%-*}-disk")/cgroup.procs"
	fi
}

# The guest reports free memory to the host (free page reporting, a virtio
# balloon feature): after drop_caches it hands back the freed page cache, and
# while it does, work runs about a quarter slower (a loopback TCP probe on
# one core: 56 k round trips/s before, 41–47 k while 3.5 GB were reported,
# docs/benchmarks.md). reported_kib counts what it has handed back so far.
REPORTED=/sys/module/page_reporting/parameters/reported_kib
reported_kib() { if [ -r "$REPORTED" ]; then cat "$REPORTED"; else echo 0; fi; }

settle_reporting() { # wait (up to 60 s) until no free memory was reported for 3 s
	[ -r "$REPORTED" ] || return 0
	local a b quiet=0 i
	sleep 3 # the kernel reports pages that stayed free for 2 s
	b=$(reported_kib)
	for i in $(seq 60); do
		sleep 1
		a=$b b=$(reported_kib)
		if [ "$a" = "$b" ]; then quiet=$((quiet + 1)); else quiet=0; fi
		[ "$quiet" -lt 3 ] || return 0
	done
}

disk_readbytes() { # bytes stack ST's back-ends read from disk
	if [ "$CGV" = 2 ]; then awk '{for (i = 2; i <= NF; i++) if ($i ~ /^rbytes=/) {sub("rbytes=", "", $i); s += $i}} END {printf "%.0f\n", s}' "$CG2/$CGP/s$ST-disk/io.stat"
	else awk '$2 == "Read" {s += $3} END {printf "%.0f\n", s}' "$(cgdir blkio "s$ST-disk")/blkio.throttle.io_service_bytes"; fi
}

cg_cpu_ns() {
	if [ "$CGV" = 2 ]; then awk '$1 == "usage_usec" {printf "%.0f\n", $2 * 1000}' "$(cgdir - "$1")/cpu.stat"
	else cat "$(cgdir cpuacct "$1")/cpuacct.usage"; fi
}

cg_ooms() {
	if [ "$CGV" = 2 ]; then awk '$1 == "oom_kill" {print $2}' "$(cgdir - "$1")/memory.events"
	else awk '$1 == "oom_kill" {print $2}' "$(cgdir memory "$1")/memory.oom_control"; fi
}

cg_peak() {
	if [ "$CGV" = 2 ]; then cat "$(cgdir - "$1")/memory.peak" 2>/dev/null || echo 0
	else cat "$(cgdir memory "$1")/memory.max_usage_in_bytes"; fi
}

cg_memstat() { # cg_memstat NAME: memory.stat of NAME, and on v1 its usage and kernel memory
	if [ "$CGV" = 2 ]; then cat "$(cgdir - "$1")/memory.stat"
	else
		cat "$(cgdir memory "$1")/memory.stat"
		local d
		d=$(cgdir memory "$1")
		echo "usage_in_bytes $(cat "$d/memory.usage_in_bytes")"
		echo "kmem_usage_in_bytes $(cat "$d/memory.kmem.usage_in_bytes" 2>/dev/null || echo 0)"
	fi
}

cg_rm() { # kill what is left in NAME and remove it
	local d p
	if [ "$CGV" = 2 ]; then d=$(cgdir - "$1"); else d=$(cgdir memory "$1"); fi
	[ -d "$d" ] || return 0
	for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
	for _ in $(seq 50); do [ -z "$(cat "$d/cgroup.procs" 2>/dev/null)" ] && break; sleep 0.1; done
	for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
	sleep 0.2
	if [ "$CGV" = 2 ]; then rmdir "$d" 2>/dev/null || true
	else for c in memory blkio cpuacct; do rmdir "$(cgdir $c "$1")" 2>/dev/null || true; done; fi
}

cg_rm_disk() {
	if [ "$CGV" = 2 ]; then rmdir "$CG2/$CGP/s$ST-disk" 2>/dev/null || true
	else rmdir "$(cgdir blkio "s$ST-disk")" 2>/dev/null || true; fi
}

# stack_down: remove stack ST's cgroups and what still runs in them.
stack_down() {
	local n
	for n in front b1 b2 b3 b4; do cg_rm "$(cgn "$n")"; done
	cg_rm_disk
}

bench_cleanup_more() {
	for ((ST = 0; ST < NSTACKS; ST++)); do stack_down; done
	if [ "$CGV" = 2 ]; then rmdir "$CG2/$CGP" 2>/dev/null || true
	else for c in memory blkio cpuacct; do rmdir "/sys/fs/cgroup/$c/$CGP" 2>/dev/null || true; done; fi
}

# cg_start NAME CORE CMD...: run CMD in cgroup NAME on CORE at NICE; PID in LASTPID.
cg_start() {
	local n=$1 core=$2
	shift 2
	(cg_enter "$n" "$BASHPID"; exec nice -n "$NICE" taskset -c "$core" "$@") &
	LASTPID=$!
	PIDS+=("$LASTPID")
}

# --- the site: built once from the trace by `shoal up --site-from-trace`,
# then one copy per back-end so no two share the page cache.
echo "building the site from $(basename "$TRACE")…" >&2
"$SHOAL" up --nodes 1 --listen "127.0.0.1:$((BASE + 8))" --admin "127.0.0.1:$((BASE + 9))" --data "$W/up" \
	--site-from-trace "$TRACE" >"$W/up.log" 2>&1 &
UPPID=$!
for _ in $(seq 300); do curl -fs -o /dev/null "http://127.0.0.1:$((BASE + 8))/" && break; sleep 0.1; done
kill "$UPPID" 2>/dev/null || true
wait "$UPPID" 2>/dev/null || true
SITE=$(ls -d "$W"/up/trace-* 2>/dev/null) || { echo "$BENCH: shoal up did not write the site:" >&2; cat "$W/up.log" >&2; exit 1; }
for ((st = 0; st < NSTACKS; st++)); do for i in $(seq $NB); do cp -a "$SITE" "$W/s$st-www$i"; done; done
rm -rf "$W/up"
chmod -R a+rX "$W"
echo "site: $(find "$W/s0-www1" -type f | wc -l) files, $(du -sm "$W/s0-www1" | cut -f1) MB per copy" >&2
REQS=$(python3 -c "import gzip,sys; print(sum(1 for _ in gzip.open(sys.argv[1],'rt',errors='replace')))" "$TRACE")

port() { echo $((BASE + 10 * ST + $1)); } # stack ST's 1..4 back-ends, 5 front, 6 its admin API

start_nginx_backend() { # start_nginx_backend I CORE THROTTLE
	local i=$1
	cat >"$W/nginx-s$ST-$i.conf" <<NGX
worker_processes 1;
daemon off;
pid $W/nginx-s$ST-$i.pid;
error_log $W/nginx-s$ST-$i.err warn;
events { worker_connections 4096; }
http {
	include /etc/nginx/mime.types;
	access_log off;
	sendfile on;
	tcp_nopush on;
	keepalive_requests 1000000;
	keepalive_timeout 75s;
	client_body_temp_path $W/tmp-s$ST-$i;
	proxy_temp_path $W/tmp-s$ST-$i;
	fastcgi_temp_path $W/tmp-s$ST-$i;
	uwsgi_temp_path $W/tmp-s$ST-$i;
	scgi_temp_path $W/tmp-s$ST-$i;
	server { listen 127.0.0.1:$(port "$i"); root $W/s$ST-www$i; }
}
NGX
	cg_start "$(cgn "b$i")" "$2" nginx -c "$W/nginx-s$ST-$i.conf" -p "$W"
}

start_haproxy_front() { # start_haproxy_front BALANCE CORE
	local bal=$1 i
	{
		printf 'global\n\tnbthread 1\n\tmaxconn 4096\ndefaults\n\tmode http\n\ttimeout connect 5s\n\ttimeout client 60s\n\ttimeout server 60s\n'
		printf '\toption http-keep-alive\n\thttp-reuse always\nfrontend fe\n\tbind 127.0.0.1:%s\n\tdefault_backend be\nbackend be\n' "$(port 5)"
		if [ "$bal" = uri ]; then printf '\tbalance uri\n\thash-type consistent\n'; else printf '\tbalance roundrobin\n'; fi
		for i in $(seq $NB); do printf '\tserver n%d 127.0.0.1:%s\n' "$i" "$(port "$i")"; done
	} >"$W/haproxy-s$ST.cfg"
	cg_start "$(cgn front)" "$2" haproxy -db -f "$W/haproxy-s$ST.cfg"
}

start_shoal_front() { # start_shoal_front POLICY CORE PATH: the nodes' planned store and admission mirrored
	local nodes="" i
	for i in $(seq $NB); do nodes+="${nodes:+,}http://127.0.0.1:$(port "$i")"; done
	local store_mb
	store_mb=$(curl -fs "http://127.0.0.1:$(port 1)/.shoal/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["memory"]["store"]["memory_capacity"] >> 20)')
	printf '[tuning]\ncache_mb = %d\nnode_cache = "gdsf"\nno_cache_kb = %d\n' "$store_mb" $((store_mb * 1024 / 8)) >"$W/front-s$ST.toml"
	GOMAXPROCS=1 cg_start "$(cgn front)" "$2" "$SHOAL" front --config "$W/front-s$ST.toml" --listen "127.0.0.1:$(port 5)" --nodes "$nodes" \
		--policy "$1" --path "$3" --handoff-dir "$W" --log-level warn ${METRICS:+--admin "127.0.0.1:$(port 6)"} ${FRONT_ARGS:-}
}

node_statuses() { # stack ST's nodes' /.shoal/status, a JSON line each ({} for one that does not answer)
	local i
	for i in $(seq $NB); do curl -fs "http://127.0.0.1:$(port "$i")/.shoal/status" || echo '{}'; echo; done
}

status_sum() { # GC CPU s and process CPU s, summed over the node status lines on stdin
	python3 -c '
import json, sys
gc = cpu = 0.0
for line in sys.stdin:
    line = line.strip()
    if not line: continue
    m = json.loads(line).get("memory", {})
    gc += m.get("gc_cpu_seconds", 0); cpu += m.get("cpu_seconds", 0)
print(gc, cpu)'
}

waitup() { for _ in $(seq 100); do curl -s -o /dev/null "http://$1/" && return 0; sleep 0.1; done; echo "$BENCH: $1 does not answer" >&2; return 1; }

# load_trace CORE [ARGS]: the trace through stack ST's front by the load
# generator on CORE (one pass unless ARGS say otherwise), JSON out; its own
# CPU over the requests is the JSON's cpu_s.
load_trace() {
	local core=$1
	shift
	nice -n "$NICE" "${LOADSCHED[@]}" taskset -c "$core" "$SHOAL" bench http \
		--url "http://127.0.0.1:$(port 5)" --trace "$TRACE" --connections "$CONNS" --timeout 30s --engine "$LOAD_ENGINE" --json "$@"
}

# stack_up CONFIG DISK LAYOUT: configuration CONFIG as stack ST, its
# back-ends on the layout's first core and its front on the second.
stack_up() {
	local cfg=$1 disk=$2 bcore=${3%:*} lcore=${3#*:} i kind=${1%%-*} pol=${1#*-} path=relay
	if [[ $pol == *-* ]]; then path=${pol#*-}; pol=${pol%%-*}; fi
	cg_disk "$([ "$disk" = throttled ] && echo 1 || echo 0)"
	for i in $(seq $NB); do cg_new "$(cgn "b$i")" "$MEM"; done
	cg_new "$(cgn front)" 0
	for i in $(seq $NB); do
		if [ "$kind" = haproxy ]; then start_nginx_backend "$i" "$bcore"
		else GOMAXPROCS=1 cg_start "$(cgn "b$i")" "$bcore" "$SHOAL" node --root "$W/s$ST-www$i" --listen "127.0.0.1:$(port "$i")" \
			--log-level warn --handoff-socket "$W/s$ST-h$i.sock" ${NODE_ARGS:-}; fi
		waitup "127.0.0.1:$(port "$i")"
	done
	if [ "$kind" = haproxy ]; then start_haproxy_front "$pol" "$lcore"; else start_shoal_front "$pol" "$lcore" "$path"; fi
	FRONTPID[$ST]=$LASTPID
	waitup "127.0.0.1:$(port 5)"
}

backends_cpu_ns() { local i n=0; for i in $(seq $NB); do n=$((n + $(cg_cpu_ns "$(cgn "b$i")"))); done; echo $n; }

# measured_pass CORE CONFIG DISK LAYOUT ROUND PASS: one measured pass of
# stack ST, its disk bytes, back-end and front CPU and reported memory added
# to the stack's sums, and a line of its own in $OUT/passes.jsonl.
measured_pass() {
	local core=$1 file="$OUT/bench-$2-$3-$4-$5-p$6.json" rb cb cf rk perfpid= db dcb dcf
	rb=$(disk_readbytes) cb=$(backends_cpu_ns) cf=$(cg_cpu_ns "$(cgn front)") rk=$(reported_kib)
	case ${PERF:-} in
	record) perf record -q -g -o "${file%.json}.perf.data" -p "${FRONTPID[$ST]}" >/dev/null 2>&1 & perfpid=$! ;;
	stat) perf stat -e 'task-clock,context-switches,syscalls:sys_enter_*' -o "${file%.json}.perfstat.txt" \
		-p "${FRONTPID[$ST]}" >/dev/null 2>&1 & perfpid=$! ;;
	esac
	load_trace "$core" --requests "$REQS" >"$file"
	if [ -n "$perfpid" ]; then kill -INT "$perfpid"; wait "$perfpid" || true; fi
	db=$(($(disk_readbytes) - rb)) dcb=$(($(backends_cpu_ns) - cb)) dcf=$(($(cg_cpu_ns "$(cgn front)") - cf))
	SUM_RB[$ST]=$((SUM_RB[$ST] + db)) SUM_CB[$ST]=$((SUM_CB[$ST] + dcb)) SUM_CF[$ST]=$((SUM_CF[$ST] + dcf))
	SUM_RK[$ST]=$((SUM_RK[$ST] + $(reported_kib) - rk))
	python3 - "$file" "$2" "$3" "$4" "$5" "$6" "$db" "$dcb" "$dcf" >>"$OUT/passes.jsonl" <<'PY'
import json, sys
f, cfg, disk, layout, rd, p, db, cb, cf = sys.argv[1:]
b = json.load(open(f))
n = max(b["requests"], 1)
print(json.dumps({"config": cfg, "disk": disk, "layout": layout, "round": int(rd), "pass": int(p), "rps": b["rps"],
                  "disk_bytes": int(db), "backend_cpu_us_per_req": int(cb) / 1e3 / n,
                  "front_cpu_us_per_req": int(cf) / 1e3 / n, "load_cpu_us_per_req": b["cpu_s"] * 1e6 / n}))
PY
}

# stack_row CONFIG DISK LAYOUT ROUND → stack ST's JSON line in
# $OUT/runs.jsonl, from its passes' files and sums.
stack_row() {
	local cfg=$1 disk=$2 layout=$3 round=$4 kind=${1%%-*} name="$1-$2-$3-$4" i ooms=0 peak=0 alive=0 gc1="0 0" n
	if [ "$kind" = shoal ]; then
		node_statuses >"$OUT/status-$name.jsonl"
		gc1=$(status_sum <"$OUT/status-$name.jsonl")
		[ -z "${METRICS:-}" ] || curl -fs "http://127.0.0.1:$(port 6)/metrics" >"$OUT/metrics-$name.txt" || true
	fi
	for i in $(seq $NB); do
		n=$(cgn "b$i")
		{ echo "## b$i"; cg_memstat "$n"; } >>"$OUT/memstat-$name.txt"
		ooms=$((ooms + $(cg_ooms "$n"))); peak=$(( $(cg_peak "$n") > peak ? $(cg_peak "$n") : peak ))
		curl -fs -o /dev/null "http://127.0.0.1:$(port "$i")/" -m 2 && alive=$((alive + 1)) || true
	done
	python3 - "$OUT/bench-$name" "$PASSES" "$cfg" "$disk" "$layout" "$round" "${WARM_RB[$ST]}" "${SUM_RB[$ST]}" \
		"${SUM_CB[$ST]}" "${SUM_CF[$ST]}" "${GC0[$ST]}" "$gc1" "$ooms" "$peak" "$alive" \
		"$([ "$disk" = throttled ] && echo "$THROTTLE_BPS $THROTTLE_IOPS" || echo "0 0")" "$BUILD" "$LOAD_SCHED" "$LOAD_ENGINE" \
		"${SUM_RK[$ST]}" "$INTERLEAVE" >>"$OUT/runs.jsonl" <<'PY'
import json, sys
a = sys.argv[1:]
bs = [json.load(open(f"{a[0]}-p{p}.json")) for p in range(1, int(a[1]) + 1)]
a = a[1:]
gc0, cpu0 = map(float, a[9].split()); gc1, cpu1 = map(float, a[10].split())
tot = lambda k: sum(b[k] for b in bs)
x4 = sum(b["errors"]["status_4xx"] for b in bs)
ok = max(tot("ok") + x4, 1)
print(json.dumps({
    "config": a[1], "disk": a[2], "layout": a[3], "round": int(a[4]),
    # The passes together; p99 is the worst pass's. The trace asks for URLs
    # the site lacks: 4xx answers are the trace's, every other error is a
    # failure.
    "rps": tot("requests") / tot("duration_s"), "p99_ms": max(b["latency_ms"]["p99"] for b in bs),
    "ok": tot("ok"), "answered_4xx": x4, "errors": tot("errors_total") - x4,
    "disk_bytes_warmup": int(a[5]), "disk_bytes": int(a[6]),
    "backend_cpu_us_per_req": int(a[7]) / 1e3 / ok, "front_cpu_us_per_req": int(a[8]) / 1e3 / ok,
    "gc_share": (gc1 - gc0) / (cpu1 - cpu0) if cpu1 > cpu0 else None,
    "oom_kills": int(a[11]), "peak_bytes": int(a[12]), "backends_alive": int(a[13]),
    "throttle_bps": int(a[14].split()[0]), "throttle_iops": int(a[14].split()[1]), "build": a[15],
    "load_sched": a[16], "load_engine": a[17], "load_cpu_us_per_req": tot("cpu_s") * 1e6 / ok,
    # Free memory the guest handed back to the host during the passes.
    "reported_mib": int(a[18]) / 1024,
    # Whether the cell's configurations took turns pass by pass.
    "interleaved": a[19] == "1",
}))
PY
	tail -1 "$OUT/runs.jsonl" >&2
}

# cell DISK LAYOUT ROUND CONFIG...: the configurations side by side, stacks
# 0, 1, … in the order given: caches dropped once, a warm-up pass each, then
# the measured passes taking turns, the order rotating by one every pass.
cell() {
	local disk=$1 layout=$2 round=$3 lcore=${2#*:} n p k rb
	shift 3
	local cfgs=("$@")
	n=${#cfgs[@]}
	for ((ST = 0; ST < n; ST++)); do
		stack_up "${cfgs[ST]}" "$disk" "$layout"
		SUM_RB[$ST]=0 SUM_CB[$ST]=0 SUM_CF[$ST]=0 SUM_RK[$ST]=0
	done
	sleep 1.5 # the fronts' health checks see every node
	sync; echo 3 >/proc/sys/vm/drop_caches
	settle_reporting
	for ((ST = 0; ST < n; ST++)); do
		rb=$(disk_readbytes)
		load_trace "$lcore" >"$OUT/warm-${cfgs[ST]}-$disk-$layout-$round.json"
		WARM_RB[$ST]=$(( $(disk_readbytes) - rb ))
	done
	for ((ST = 0; ST < n; ST++)); do
		GC0[$ST]=$([[ ${cfgs[ST]} == shoal-* ]] && node_statuses | status_sum || echo "0 0")
	done
	for p in $(seq "$PASSES"); do
		for ((k = 0; k < n; k++)); do
			ST=$(( (k + p - 1) % n ))
			measured_pass "$lcore" "${cfgs[ST]}" "$disk" "$layout" "$round" "$p"
		done
	done
	for ((ST = 0; ST < n; ST++)); do stack_row "${cfgs[ST]}" "$disk" "$layout" "$round"; done
	for ((ST = 0; ST < n; ST++)); do stack_down; done
	ST=0
	rm -f "$W"/nginx*.pid
	PIDS=()
}

: >"$OUT/runs.jsonl"
: >"$OUT/passes.jsonl"
for r in $(seq "$RUNS"); do
	for layout in $LAYOUTS; do
		for disk in $DISKS; do
			if [ "$INTERLEAVE" = 1 ]; then
				# shellcheck disable=SC2086 # one word per configuration
				cell "$disk" "$layout" "$r" $CONFIGS
			else
				for cfg in $CONFIGS; do cell "$disk" "$layout" "$r" "$cfg"; done
			fi
		done
	done
done

python3 - "$OUT/runs.jsonl" "$MEM" "$CONNS" "$PASSES" "$REQS" "$LOADAVG_BEFORE" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY' | tee "$OUT/table.md"
import json, sys, statistics
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
mem, conns, passes, reqs, la0, la1 = sys.argv[2:8]
print(f"{len(runs)} runs; {mem} MiB per back-end, {conns} connections, a warm-up pass then {passes} × {reqs} requests; load average {la0} before, {la1} after\n")
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")
cells = {}
for r in runs:
    cells.setdefault((r["disk"], r["layout"], r["config"]), []).append(r)
# Disk MB/s over the measured passes: a configuration reading at the
# throttle is held by the disk; one below it, by the CPU.
def mbps(r):
    return r["disk_bytes"] / 1e6 / max((r["ok"] + r["answered_4xx"]) / r["rps"], 1e-9)
print("| disk | layout | configuration | req/s | p99 ms | disk MB (warm-up + passes) | disk MB/s | back-end CPU µs/req | front CPU µs/req | load generator CPU µs/req | GC share | OOM kills | failed | peak MiB |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (disk, layout, cfg), rs in sorted(cells.items()):
    g = med([r["gc_share"] for r in rs])
    print(f"| {disk} | {layout} | {cfg} | {med([r['rps'] for r in rs]):.0f} | {med([r['p99_ms'] for r in rs]):.2f} | "
          f"{med([r['disk_bytes_warmup'] for r in rs]) / 1e6:.0f} + {med([r['disk_bytes'] for r in rs]) / 1e6:.0f} | "
          f"{med([mbps(r) for r in rs]):.0f} | "
          f"{med([r['backend_cpu_us_per_req'] for r in rs]):.1f} | {med([r['front_cpu_us_per_req'] for r in rs]):.1f} | "
          f"{med([r.get('load_cpu_us_per_req') for r in rs]):.1f} | "
          f"{'–' if g != g else f'{g * 100:.1f} %'} | {sum(r['oom_kills'] for r in rs)} | {sum(r['errors'] for r in rs)} | "
          f"{max(r['peak_bytes'] for r in rs) / 2**20:.1f} |")
for bps in sorted({r.get("throttle_bps", 0) for r in runs} - {0}):
    print(f"\nthrottled: {bps / 1e6:.1f} MB/s for the 4 back-ends together")
# Ratios per round: each shoal configuration against each HAProxy one run in
# the same cell and round, and whether it read fewer disk bytes than all of
# them. A ratio holds only when it holds in every round.
rounds = {}
for r in runs:
    rounds.setdefault((r["disk"], r["layout"], r["round"]), {})[r["config"]] = r
peers = sorted({r["config"] for r in runs if r["config"].startswith("haproxy")})
mine = sorted({r["config"] for r in runs if not r["config"].startswith("haproxy")})
if peers and mine:
    print("\nPer round, req/s ratio of each shoal configuration to each HAProxy one (rounds in order), and the rounds in "
          "which it read fewer disk bytes than every HAProxy configuration:\n")
    print("| disk | layout | configuration | " + " | ".join(f"÷ {p}" for p in peers) + " | disk bytes below all |")
    print("|---|---|---|" + "---|" * len(peers) + "---|")
    for (disk, layout) in sorted({(d, l) for d, l, _ in rounds}):
        rs = [rounds[k] for k in sorted(rounds) if k[:2] == (disk, layout)]
        for cfg in mine:
            cols = []
            for p in peers:
                xs = [f"{rd[cfg]['rps'] / rd[p]['rps']:.2f}" for rd in rs if cfg in rd and p in rd]
                cols.append(", ".join(xs) or "–")
            below = [all(rd[cfg]["disk_bytes"] < rd[p]["disk_bytes"] for p in peers if p in rd) for rd in rs if cfg in rd]
            print(f"| {disk} | {layout} | {cfg} | " + " | ".join(cols) + f" | {sum(below)} of {len(below)} |")
PY
echo "raw runs in $OUT" >&2
