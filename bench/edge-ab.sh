#!/usr/bin/env bash
# edge-ab.sh — CPU per 1 KB cache hit of several shoal builds, side by side:
# what each change to the PoP's hit path bought, measured the way
# bench/edge-vs-varnish.sh measures (the same origin, load and pinning),
# with only shoal pops in the rounds.
#
# Each build given runs `shoal pop --origin URL` (GOMAXPROCS=1) pinned to
# CACHE_CORE; the origin (nginx, `expires 1d`) and wrk (-t1, CONNS
# connections) run on LOAD_CORE. Every pop is warmed until it answers a
# hit, then RUNS rounds load each in turn (the order rotates each round)
# for DURATION. Printed: per build, the median requests/s and the CPU time
# per request of the pop's process (utime+stime from /proc over the run,
# divided by the requests wrk completed) with its min and max over the
# rounds: on a shared machine, the CPU per request is the figure to read.
#
# Usage: bench/edge-ab.sh NAME=path/to/shoal NAME=path/to/shoal ...
#        (e.g. build old commits with `git archive C | tar -x -C DIR` and
#        `go build -o /tmp/shoal-C ./cmd/shoal` in DIR)
# Env:   RUNS=5 DURATION=4s CONNS=64 CACHE_CORE=0 LOAD_CORE=1 NICE=-10
set -euo pipefail

RUNS=${RUNS:-5}
DURATION=${DURATION:-4s}
CONNS=${CONNS:-64}
CACHE_CORE=${CACHE_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
NICE=${NICE:--10}
BASE=${PORT_BASE:-$((20000 + (RANDOM % 2000) * 10))}

BENCH=edge-ab
. "$(dirname "$0")/lib.sh"
[ $# -ge 1 ] || { echo "usage: bench/edge-ab.sh NAME=BINARY ..." >&2; exit 2; }
bench_need nginx wrk taskset curl
bench_workdir shoal-edge-ab
bench_stop_services

mkdir -p "$W/www"
head -c 1024 /dev/urandom >"$W/www/1k"
chmod -R a+rX "$W"
ORIG=127.0.0.1:$BASE
cat >"$W/origin.conf" <<NGX
worker_processes 1;
daemon off;
pid $W/nginx-origin.pid;
error_log $W/origin.err warn;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	client_body_temp_path $W/tmp;
	proxy_temp_path $W/tmp;
	fastcgi_temp_path $W/tmp;
	uwsgi_temp_path $W/tmp;
	scgi_temp_path $W/tmp;
	server { listen $ORIG; root $W/www; expires 1d; }
}
NGX
nice -n "$NICE" taskset -c "$LOAD_CORE" nginx -c "$W/origin.conf" -p "$W" &
PIDS+=($!)
waitport "$ORIG"
(umask 077; head -c 32 /dev/urandom >"$W/seed")

NAMES=() i=0
for arg in "$@"; do
	name=${arg%%=*} bin=${arg#*=}
	i=$((i + 1))
	port=$((BASE + 10 * i))
	GOMAXPROCS=1 nice -n "$NICE" taskset -c "$CACHE_CORE" "$bin" pop --name e1 --seed-file "$W/seed" \
		--listen "127.0.0.1:$port" --peer "127.0.0.1:$((port + 1))" --admin "127.0.0.1:$((port + 2))" \
		--origin "http://$ORIG" --data "$W/data-$name" >/dev/null 2>>"$W/$name.err" &
	PIDS+=($!)
	eval "PID_$i=$! PORT_$i=$port"
	NAMES+=("$name")
	: >"$W/r.$i"
done
for i in $(seq ${#NAMES[@]}); do
	port=$(eval echo "\$PORT_$i")
	for _ in $(seq 300); do
		curl -s -o /dev/null -D - "http://127.0.0.1:$port/1k" 2>/dev/null | grep -q "X-Cache: HIT" && break
		sleep 0.1
	done
	for _ in 1 2 3; do curl -s -o /dev/null "http://127.0.0.1:$port/1k"; done
done

# run I: one round against build I → "rps p99ms cpu_us_per_request errors requests".
run() {
	local pid port out t0 t1
	pid=$(eval echo "\$PID_$1") port=$(eval echo "\$PORT_$1")
	t0=$(cputicks "$pid")
	out=$(nice -n "$NICE" taskset -c "$LOAD_CORE" wrk -t1 -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$port/1k")
	t1=$(cputicks "$pid")
	wrk_summary "$out" "$t0" "$t1" "${NAMES[$1 - 1]}"
}

n=${#NAMES[@]}
for r in $(seq "$RUNS"); do
	for k in $(seq 0 $((n - 1))); do
		i=$(((k + r - 1) % n + 1))
		run "$i" >>"$W/r.$i"
	done
	echo "round $r/$RUNS done" >&2
done

echo
echo "1 KB hits through shoal pop, builds side by side: wrk -t1 -c$CONNS -d$DURATION, $RUNS rounds, pop on core $CACHE_CORE, origin and wrk on core $LOAD_CORE; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| build | req/s (median) | CPU µs/req min / median / max |"
echo "|---|---:|---:|"
for i in $(seq "$n"); do
	printf "| %s | %.0f | %s |\n" "${NAMES[$i - 1]}" "$(awk '{print $1}' "$W/r.$i" | median)" \
		"$(awk '{print $3}' "$W/r.$i" | sort -g | awk '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.1f / **%.1f** / %.1f", a[1], m, a[NR]}')"
done
