#!/usr/bin/env bash
# edge-vs-varnish.sh — cache hits of a 1 KB object through a shoal PoP's
# gateway against Varnish and nginx proxy_cache, side by side (SPEC §7:
# compare against peers in one run, quote ratios).
#
# One origin (nginx, 1 worker, `expires 1d` so that every cache may keep the
# object a day) runs on the load core. Three caches in front of it run on
# the other core, each pinned there with taskset:
#   - `shoal pop --origin URL` (GOMAXPROCS=1): the PoP's gateway and its
#     in-process nodes in cache mode, one address;
#   - varnishd 7 (malloc storage, one thread pool: thread_pools=1,
#     thread_pool_min=5, the smallest Varnish allows, thread_pool_max
#     VARNISH_MAX_THREADS so each of the CONNS connections can hold a
#     worker as Varnish's session model wants);
#   - nginx proxy_cache (1 worker).
# Each is warmed (the object fetched once, then checked to be a hit), and
# wrk (-t1, CONNS connections, pinned to the load core) loads one cache at a
# time for DURATION, RUNS interleaved rounds (the order rotates each round,
# so drift in background load hits all three), in both core layouts (the
# caches on core 0 and the load on core 1, then swapped). The origin's
# access log must not grow during a run: every measured answer is a hit.
#
# Printed per layout: the medians of requests/s, p99 latency and CPU time
# per request (utime+stime of the cache's processes from /proc over the
# run, divided by the requests wrk completed: it moves far less than req/s
# when other work shares the cores), and shoal's ratio against each peer
# and against the faster of the two, per round (min / median / max). The
# verdict is docs/benchmarks.md's rule: won only when every round of both
# layouts is above 1, lost when every round is below, else within spread.
#
# PROFILE=1 adds, after the rounds of each layout, one run per cache under
# `perf stat -e task-clock,context-switches` (per request) and one short
# run under `strace -c` on every thread of the cache (system calls per
# request, by name): where a hit's cost goes, independent of load.
#
# Usage: bench/edge-vs-varnish.sh            (from the repo root; builds shoal)
# Env:   RUNS=5 DURATION=5s CONNS=64 LAYOUTS="0:1 1:0" (cache core:load core)
#        NICE=-10 SHOAL=path/to/shoal VARNISH_MAX_THREADS=$CONNS+16 PROFILE=0
#        SHOAL_ARGS="" (more `shoal pop` flags)
set -euo pipefail

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
LAYOUTS=${LAYOUTS:-"0:1 1:0"}
NICE=${NICE:--10}
PROFILE=${PROFILE:-0}
VARNISH_MAX_THREADS=${VARNISH_MAX_THREADS:-$((CONNS + 16))}
SHOAL_ARGS=${SHOAL_ARGS:-}
# nginx reads a hit from its cache file: open_file_cache keeps the file
# open between hits (no openat and close per request), its fastest setting.
NGINX_EXTRA=${NGINX_EXTRA-"open_file_cache max=1000 inactive=60s; open_file_cache_valid 60s;"}
BASE=${PORT_BASE:-$((20000 + (RANDOM % 2000) * 10))}
ORIG=127.0.0.1:$BASE SHO=127.0.0.1:$((BASE + 1)) VAR=127.0.0.1:$((BASE + 2)) NGX=127.0.0.1:$((BASE + 3))
PEERP=127.0.0.1:$((BASE + 4)) ADMP=127.0.0.1:$((BASE + 5))
CACHES="shoal varnish nginx"

BENCH=edge-vs-varnish
. "$(dirname "$0")/lib.sh"
bench_need nginx varnishd wrk taskset curl go
bench_workdir shoal-evv
bench_stop_services
service varnish stop >/dev/null 2>&1 || true
bench_build_shoal
LOADAVG_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

mkdir -p "$W/www"
head -c 1024 /dev/urandom >"$W/www/1k"
chmod -R a+rX "$W"
ROOTUSER=""
[ "$(id -u)" = 0 ] && ROOTUSER="user root;" # the cache worker writes under W

# nginx_conf NAME SERVER_BLOCK: an nginx configuration (1 worker, no
# access log unless the server block asks, long keep-alive) in W.
nginx_conf() {
	cat >"$W/$1.conf" <<NGX
$ROOTUSER
worker_processes 1;
daemon off;
pid $W/nginx-$1.pid;
error_log $W/$1.err warn;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	keepalive_timeout 75s;
	client_body_temp_path $W/tmp-$1;
	proxy_temp_path $W/tmp-$1;
	fastcgi_temp_path $W/tmp-$1;
	uwsgi_temp_path $W/tmp-$1;
	scgi_temp_path $W/tmp-$1;
	types { application/octet-stream bin; }
$2
}
NGX
}

nginx_conf origin "	server { listen $ORIG; root $W/www; expires 1d; access_log $W/origin.access; }"
nginx_conf cache "	proxy_cache_path $W/nginx-cache levels=1:2 keys_zone=c:10m max_size=1g inactive=1h use_temp_path=off;
	server {
		listen $NGX;
		location / {
			proxy_pass http://$ORIG;
			proxy_cache c;
			$NGINX_EXTRA
			proxy_http_version 1.1;
			proxy_set_header Connection \"\";
			add_header X-Cache \$upstream_cache_status;
		}
	}"
(umask 077; head -c 32 /dev/urandom >"$W/seed")

# start_caches CORE: the origin on LOAD_CORE and the three caches on CORE;
# their PIDs in PID_shoal, PID_varnish, PID_nginx (the CPU of each one's
# process tree is what a run charges it).
start_caches() {
	local core=$1
	nice -n "$NICE" taskset -c "$LOAD_CORE" nginx -c "$W/origin.conf" -p "$W" &
	OPID=$!
	PIDS+=($OPID)
	waitport "$ORIG"
	GOMAXPROCS=1 nice -n "$NICE" taskset -c "$core" "$SHOAL" pop --name e1 --seed-file "$W/seed" --listen "$SHO" \
		--peer "$PEERP" --admin "$ADMP" --origin "http://$ORIG" --data "$W/shoal-data" $SHOAL_ARGS 2>>"$W/shoal.err" &
	PID_shoal=$!
	PIDS+=($PID_shoal)
	nice -n "$NICE" taskset -c "$core" varnishd -F -n "$W/varnish" -a "$VAR" -b "$ORIG" -s malloc,256m \
		-p thread_pools=1 -p thread_pool_min=5 -p "thread_pool_max=$VARNISH_MAX_THREADS" >>"$W/varnish.err" 2>&1 &
	PID_varnish=$!
	PIDS+=($PID_varnish)
	nice -n "$NICE" taskset -c "$core" nginx -c "$W/cache.conf" -p "$W" &
	PID_nginx=$!
	PIDS+=($PID_nginx)
	for a in "$SHO" "$VAR" "$NGX"; do
		for _ in $(seq 300); do
			(exec 3<>"/dev/tcp/${a%:*}/${a#*:}") 2>/dev/null && break
			sleep 0.1
		done
	done
	warm shoal "$SHO" "X-Cache: HIT"
	warm varnish "$VAR" "X-Varnish: [0-9]+ [0-9]+"
	warm nginx "$NGX" "X-Cache: HIT"
}

# stop_caches: stop everything start_caches started, and forget the stored
# responses (each layout starts cold and warms again).
stop_caches() {
	local p
	for p in "$OPID" "$PID_shoal" "$PID_varnish" "$PID_nginx"; do kill "$p" 2>/dev/null || true; done
	for p in "$OPID" "$PID_shoal" "$PID_varnish" "$PID_nginx"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
	rm -rf "$W/shoal-data" "$W/nginx-cache" "$W/varnish"
}

# warm NAME ADDR PATTERN: fetch the object until the answer's head matches
# PATTERN (the cache's own word for a hit), or give up after 3 s.
warm() {
	local h
	for _ in $(seq 30); do
		h=$(curl -s -o /dev/null -D - "http://$2/1k" || true)
		if echo "$h" | grep -Eqi "$3"; then return 0; fi
		sleep 0.1
	done
	echo "$BENCH: $1 on $2 does not answer a hit; last head:" >&2
	echo "$h" >&2
	tail -5 "$W/$1.err" "$W/shoal.err" 2>/dev/null >&2 || true
	exit 1
}

# treeticks PID: the CPU ticks of PID and its descendants (Varnish's
# manager and child, nginx's master and worker).
treeticks() {
	local t p
	t=$(cputicks "$1" 2>/dev/null || echo 0)
	for p in $(pgrep -P "$1" || true); do t=$((t + $(treeticks "$p"))); done
	echo "$t"
}

# procs PID: PID and its descendants (perf stat -p takes processes and
# counts all their threads; given thread IDs it double-counts).
procs() {
	local p
	echo "$1"
	for p in $(pgrep -P "$1" || true); do procs "$p"; done
}

# threads PID: every thread of PID and its descendants (strace -p takes
# one thread each).
threads() {
	local p
	ls "/proc/$1/task"
	for p in $(pgrep -P "$1" || true); do threads "$p"; done
}

# run NAME ADDR → "rps p99ms cpu_us_per_request errors requests".
run() {
	local out t0 t1 pid o0 o1 c0 c1 l0 l1
	pid=$(eval echo "\$PID_$1")
	o0=$(wc -l <"$W/origin.access")
	t0=$(treeticks "$pid") c0=$(corestat "$CACHE_CORE") l0=$(corestat "$LOAD_CORE")
	out=$(nice -n "$NICE" taskset -c "$LOAD_CORE" wrk -t1 -c"$CONNS" -d"$DURATION" --latency "http://$2/1k")
	t1=$(treeticks "$pid") c1=$(corestat "$CACHE_CORE") l1=$(corestat "$LOAD_CORE")
	o1=$(wc -l <"$W/origin.access")
	[ "$o0" = "$o1" ] || echo "$BENCH: $1 sent $((o1 - o0)) requests to the origin during the run" >&2
	corebusy "$1, cache core $CACHE_CORE" "$c0" "$c1"
	corebusy "$1, load core $LOAD_CORE" "$l0" "$l1"
	wrk_summary "$out" "$t0" "$t1" "$1"
}

addr_of() {
	case $1 in shoal) echo "$SHO" ;; varnish) echo "$VAR" ;; nginx) echo "$NGX" ;; esac
}

# profile NAME: one run under perf stat and one short run under strace -c,
# both per request.
profile() {
	local pid addr out reqs tids args=() t
	pid=$(eval echo "\$PID_$1")
	addr=$(addr_of "$1")
	if command -v perf >/dev/null; then
		perf stat -e task-clock,context-switches -x, -o "$W/perf.$1" -p "$(procs "$pid" | paste -sd,)" \
			-- nice -n "$NICE" taskset -c "$LOAD_CORE" wrk -t1 -c"$CONNS" -d"$DURATION" "http://$addr/1k" >"$W/wrk.$1"
		reqs=$(awk '/requests in/ {print $1}' "$W/wrk.$1")
		awk -F, -v n="$reqs" -v w="$1" '$3 == "task-clock" {printf "  %s perf: %.2f µs task-clock/req", w, $1 * 1000 / n}
			$3 == "context-switches" {printf ", %.3f context switches/req", $1 / n} END {print ""}' "$W/perf.$1" >&2
	fi
	if command -v strace >/dev/null; then
		for t in $(threads "$pid"); do args+=(-p "$t"); done
		strace -c -o "$W/strace.$1" "${args[@]}" 2>/dev/null &
		t=$!
		sleep 1
		out=$(nice -n "$NICE" taskset -c "$LOAD_CORE" wrk -t1 -c"$CONNS" -d2s "http://$addr/1k")
		kill -INT "$t" 2>/dev/null || true
		wait "$t" 2>/dev/null || true
		reqs=$(echo "$out" | awk '/requests in/ {print $1}')
		awk -v n="$reqs" -v w="$1" 'BEGIN {printf "  %s strace (%d requests): syscalls/req", w, n}
			$NF ~ /^[a-z_0-9]+$/ && $NF != "total" && $(NF - 2) + 0 > 0 {
				c = ($(NF - 1) ~ /^[0-9]+$/ && NF == 6) ? $(NF - 2) : $4
				if (c / n >= 0.01) printf " %s=%.2f", $NF, c / n; s += c }
			END {printf " (all %.2f)\n", s / n}' "$W/strace.$1" >&2
	fi
}

for l in $LAYOUTS; do
	for c in $CACHES; do : >"$W/r.$l.$c"; done
done
for l in $LAYOUTS; do
	CACHE_CORE=${l%:*} LOAD_CORE=${l#*:}
	echo "$BENCH: layout $l: caches on core $CACHE_CORE, origin and wrk on core $LOAD_CORE" >&2
	start_caches "$CACHE_CORE"
	for r in $(seq "$RUNS"); do
		set -- $CACHES
		for _ in $(seq $(((r - 1) % 3))); do set -- "$2" "$3" "$1"; done # rotate the order
		for c in "$@"; do run "$c" "$(addr_of "$c")" >>"$W/r.$l.$c"; done
		echo "layout $l run $r/$RUNS: shoal $(tail -1 "$W/r.$l.shoal")  varnish $(tail -1 "$W/r.$l.varnish")  nginx $(tail -1 "$W/r.$l.nginx")  (rps p99ms cpu-us/req errors requests)" >&2
	done
	if [ "$PROFILE" = 1 ]; then
		for c in $CACHES; do profile "$c"; done
	fi
	stop_caches
done

# col FILE N: column N of FILE, one a line.
col() { awk -v n="$2" '{print $n}' "$1"; }
# ratios LAYOUT PEER: shoal ÷ PEER req/s per round ("faster": the faster
# peer of that round).
ratios() {
	if [ "$2" = faster ]; then
		paste "$W/r.$1.shoal" "$W/r.$1.varnish" "$W/r.$1.nginx" | awk '{m = $6 > $11 ? $6 : $11; print $1 / m}'
	else
		paste "$W/r.$1.shoal" "$W/r.$1.$2" | awk '{print $1 / $6}'
	fi
}
spread() { sort -g | awk '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2f / **%.2f** / %.2f", a[1], m, a[NR]}'; }

echo
echo "1 KB cache hits: shoal pop vs Varnish $(varnishd -V 2>&1 | sed -n 's/.*varnish-\([0-9.]*\).*/\1/p') and nginx $(nginx -v 2>&1 | sed 's/.*\///') proxy_cache; wrk -t1 -c$CONNS -d$DURATION, $RUNS interleaved rounds per layout, nice $NICE"
echo "load average before $LOADAVG_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "| layout (cache:load) | cache | req/s (median) | p99 ms | CPU µs/req | errors |"
echo "|---|---|---:|---:|---:|---:|"
for l in $LAYOUTS; do
	for c in $CACHES; do
		printf "| %s | %s | %.0f | %.2f | %.1f | %d |\n" "$l" "$c" "$(col "$W/r.$l.$c" 1 | median)" \
			"$(col "$W/r.$l.$c" 2 | median)" "$(col "$W/r.$l.$c" 3 | median)" "$(col "$W/r.$l.$c" 4 | awk '{s += $1} END {print s + 0}')"
	done
done
echo
echo "| layout | shoal ÷ Varnish | shoal ÷ nginx | shoal ÷ faster peer (per round) |"
echo "|---|---:|---:|---:|"
for l in $LAYOUTS; do
	echo "| $l | $(ratios "$l" varnish | spread) | $(ratios "$l" nginx | spread) | $(ratios "$l" faster | spread) |"
done
echo
for p in varnish nginx faster; do
	all=$(for l in $LAYOUTS; do ratios "$l" "$p"; done)
	v=$(echo "$all" | awk '{if ($1 > 1) a++; else if ($1 < 1) b++} END {if (a == NR) print "won"; else if (b == NR) print "lost"; else print "within spread"}')
	echo "verdict shoal vs $p: $v (ratios $(echo "$all" | sort -g | paste -sd' '))"
done
echo "ratio = shoal ÷ peer requests/s (above 1: shoal is faster); won only when every round of every layout is above 1."
