#!/usr/bin/env bash
# front-vs-haproxy.sh — relay speed of `shoal front` against HAProxy, side by side
# (issue 3 "Speed", SPEC §7: compare against a peer in one run, quote ratios).
#
# Two nginx back-ends (1 worker each, pinned to core 1) serve 1 KB, 64 KB and
# 1 MB files. HAProxy 2.6 (nbthread 1, http-reuse always, roundrobin) and
# `shoal front --policy rr` (GOMAXPROCS=1) are each pinned to core 0; wrk
# (-t1 -c64, pinned to core 1) loads one of them at a time, interleaved
# (alternating which goes first), RUNS times per size; the medians of
# requests/s and p99 latency are printed as a Markdown table with
# shoal/HAProxy ratios. Because this machine is shared and noisy, the
# table also gives each proxy's CPU time per request (utime+stime from
# /proc/PID/stat over the run, divided by the requests wrk completed): a
# cost that other load on the machine barely moves.
#
# Usage: bench/front-vs-haproxy.sh            (from the repo root; builds shoal)
# Env:   RUNS=5 DURATION=5s CONNS=64 SHOAL=path/to/shoal SIZES="1k 64k 1m"
#        JSON_OUT=FILE appends one JSON line per round (both proxies, one size)
#        to FILE, the input of bench/report (see bench/compare.sh).
#        NICE=-10 (every process of the benchmark runs at this niceness, to
#        keep other work on a shared machine from skewing one side)
#        NGINX_ECHO=1 makes both nginx echo the front's request token
#        (add_header Shoal-Seq $http_shoal_seq always): the front then skips
#        its peek and pipelines to them; HAProxy's requests carry no token
#        and get no header
set -euo pipefail

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
SIZES=${SIZES:-"1k 64k 1m"}
PROXY_CORE=${PROXY_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
NICE=${NICE:--10}
# Other benchmarks may run on this machine: take a random block of ports.
BASE=${PORT_BASE:-$((20000 + (RANDOM % 2000) * 10))}
N1=127.0.0.1:$BASE N2=127.0.0.1:$((BASE + 1)) HAP=127.0.0.1:$((BASE + 2)) SHO=127.0.0.1:$((BASE + 3))

BENCH=front-vs-haproxy
. "$(dirname "$0")/lib.sh"
bench_need nginx haproxy wrk taskset go
bench_workdir shoal-fvh
bench_autogroup
bench_stop_services
bench_build_shoal

mkdir -p "$W/www"
head -c 1024 /dev/urandom >"$W/www/1k"
head -c 65536 /dev/urandom >"$W/www/64k"
head -c 1048576 /dev/urandom >"$W/www/1m"
chmod -R a+rX "$W" # nginx workers run as nobody

echo=()
[ -z "${NGINX_ECHO:-}" ] || echo=('add_header Shoal-Seq $http_shoal_seq always;')
start_nginx 1 "$N1" "sendfile on;" "tcp_nopush on;" "types { application/octet-stream bin; }" "${echo[@]}"
start_nginx 2 "$N2" "sendfile on;" "tcp_nopush on;" "types { application/octet-stream bin; }" "${echo[@]}"
start_haproxy 4096 ""

GOMAXPROCS=1 nice -n "$NICE" taskset -c "$PROXY_CORE" "$SHOAL" front --listen "$SHO" --nodes "http://$N1,http://$N2" \
	--policy rr --health-interval 0 2>"$W/shoal.err" &
SPID=$!
PIDS+=($SPID)

# Wait until everything answers.
for a in $N1 $N2 $HAP $SHO; do
	for _ in $(seq 100); do
		curl -sf -o /dev/null "http://$a/1k" && break
		sleep 0.1
	done
	curl -sf -o /dev/null "http://$a/1k" || { echo "front-vs-haproxy: $a does not answer" >&2; cat "$W"/*.err >&2; exit 1; }
done

# run ADDR SIZE PID → "rps p99ms cpu_us_per_request errors requests"
# (and to stderr how busy each core was: see corebusy).
run() {
	local out t0 t1 p0 p1 l0 l1 who=shoal
	[ "$1" != "$HAP" ] || who=HAProxy
	t0=$(cputicks "$3") p0=$(corestat "$PROXY_CORE") l0=$(corestat "$LOAD_CORE")
	out=$(nice -n "$NICE" taskset -c "$LOAD_CORE" wrk -t1 -c"$CONNS" -d"$DURATION" --latency "http://$1/$2")
	t1=$(cputicks "$3") p1=$(corestat "$PROXY_CORE") l1=$(corestat "$LOAD_CORE")
	corebusy "$who $2, proxy core $PROXY_CORE" "$p0" "$p1"
	corebusy "$who $2, load core $LOAD_CORE" "$l0" "$l1"
	wrk_summary "$out" "$t0" "$t1" "$1/$2"
}

for size in $SIZES; do
	: >"$W/h.$size"; : >"$W/s.$size"
done
for r in $(seq "$RUNS"); do
	for size in $SIZES; do
		pair_round "$r" "$size"
		pair_json "shoal front vs HAProxy" "$size" "$r" "$size"
	done
done

echo
echo "shoal front vs HAProxy $(haproxy -v | awk 'NR==1{print $3}'): wrk -t1 -c$CONNS -d$DURATION, medians of $RUNS interleaved runs; proxies on core $PROXY_CORE, nginx and wrk on core $LOAD_CORE, nice $NICE"
echo
pair_table_header size
for size in $SIZES; do
	pair_table_row "$size" "$size"
done
echo
echo "ratio = shoal/HAProxy requests per second (>= 1 means shoal is at least as fast); CPU ratio = shoal/HAProxy CPU per request (<= 1 means shoal is cheaper)."
