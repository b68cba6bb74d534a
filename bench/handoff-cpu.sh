#!/usr/bin/env bash
# handoff-cpu.sh — front-end CPU seconds per request, relay against passfd
# (issue 6 "Measurements", SPEC §4 and §7; seed 000 §3.1 claims a handoff
# front has ≥ 5× the capacity of a relaying one).
#
# Two `shoal node` processes with handoff sockets serve 1 KB, 100 KB and
# 1 MB files; `shoal front` (GOMAXPROCS=1, pinned to core 0) runs once per
# data path; `shoal bench http` (pinned to core 1, with the nodes) loads it
# for DURATION per run, with keep-alive and with one request per connection
# (Connection: close). The front's CPU time over the run (its threads'
# schedstat in ns; utime+stime from /proc/PID/stat, in 10 ms ticks, if a
# thread exited) divided by the requests completed is the
# cost per request: unlike req/s, other load on this shared machine barely
# moves it. Paths:
#   relay          the front relays through pooled keep-alive connections
#                  (splice(2) for large bodies)
#   passfd         policy wrr (content-blind): the node keeps a passed
#                  connection, so with keep-alive the front sees only the
#                  first request of each connection
#   passfd-return  policy urlhash (content-aware): nodes hand every
#                  connection back after each request and the front
#                  re-dispatches it — one recvmsg + parse + sendmsg per request
# Prints a Markdown table with each cost as a ratio to relay's.
#
# With PASSFD_B=path/to/other/shoal a fourth front, that binary's passfd
# under wrr ("passfd B"), runs in the same interleaved rounds: an A/B of
# two builds against one relay front, whose per-run ratios are printed
# after the table.
#
# With CURVE=1 it instead runs seed 002's experiment over HTTP: requests/s
# and mean latency of relay and passfd against the number of concurrent
# clients (one request per connection, CURVE_SIZE objects), to find the
# concurrency at which handoff overtakes relay (the paper saw 45).
#
# Usage: bench/handoff-cpu.sh           (from the repo root; builds shoal)
# Env:   RUNS=3 DURATION=5s CONNS=32 SHOAL=path/to/shoal SIZES="1k 100k 1m"
#        PASSFD_B=path/to/other/shoal
#        CURVE=1 CURVE_SIZE=100k CURVE_CONNS="1 2 4 8 16 32 64 128"
set -euo pipefail

RUNS=${RUNS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-32}
SIZES=${SIZES:-"1k 100k 1m"}
FRONT_CORE=${FRONT_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
# Below the ephemeral range (32768+), whose ports outgoing connections hold.
BASE=${PORT_BASE:-$((21000 + (RANDOM % 1000) * 10))}
N1=127.0.0.1:$BASE N2=127.0.0.1:$((BASE + 1))

BENCH=handoff-cpu
. "$(dirname "$0")/lib.sh"
bench_need taskset go python3
bench_workdir shoal-hcpu
bench_autogroup
bench_build_shoal

mkdir -p "$W/www"
head -c 1024 /dev/urandom >"$W/www/1k"
head -c 102400 /dev/urandom >"$W/www/100k"
head -c 1048576 /dev/urandom >"$W/www/1m"

i=0
for addr in $N1 $N2; do
	taskset -c "$LOAD_CORE" "$SHOAL" node --root "$W/www" --listen "$addr" \
		--handoff-socket "$W/n$i.sock" 2>"$W/node$i.log" &
	PIDS+=($!)
	i=$((i + 1))
done

waitport $N1
waitport $N2

# One front per path, all started up front; cells are interleaved (every path
# for a size and mode back to back, RUNS times) and the median is reported,
# so that drift in the machine's load hits all paths alike.

declare -A FPID FADDR
PATHS="relay passfd passfd-return${PASSFD_B:+ passfd-b}"
port=$((BASE + 2))
for path in $PATHS; do
	bin=$SHOAL
	case $path in
	relay) args=(--path relay --policy wrr) ;;
	passfd) args=(--path passfd --policy wrr) ;;
	passfd-return) args=(--path passfd --policy urlhash) ;;
	passfd-b) args=(--path passfd --policy wrr) bin=$PASSFD_B ;;
	esac
	FADDR[$path]=127.0.0.1:$port
	port=$((port + 1))
	GOMAXPROCS=1 taskset -c "$FRONT_CORE" "$bin" front --listen "${FADDR[$path]}" --nodes "http://$N1,http://$N2" \
		--health-interval 200ms "${args[@]}" 2>"$W/front-$path.log" &
	FPID[$path]=$!
	PIDS+=($!)
	waitport "${FADDR[$path]}"
done
sleep 0.6 # one health check: the fronts learn the handoff sockets

if [ -n "${CURVE:-}" ]; then
	echo
	echo "Seed 002's curve over HTTP: ${CURVE_SIZE:-100k} objects, Connection: close, $DURATION per point, median of $RUNS"
	echo
	echo "| clients | relay req/s | passfd req/s | relay mean ms | passfd mean ms |"
	echo "|---|---|---|---|---|"
	for c in ${CURVE_CONNS:-1 2 4 8 16 32 64 128}; do
		declare -A RPS=() LAT=()
		for run in $(seq "$RUNS"); do
			for path in relay passfd; do
				taskset -c "$LOAD_CORE" "$SHOAL" bench http --url "http://${FADDR[$path]}/${CURVE_SIZE:-100k}" \
					--connections "$c" --duration "$DURATION" --keepalive=false --json >"$W/out.json"
				read -r rps lat < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["rps"], r["latency_ms"]["mean"])' "$W/out.json")
				RPS[$path]+="$rps "
				LAT[$path]+="$lat "
			done
		done
		printf "| %s | %.0f | %.0f | %.2f | %.2f |\n" "$c" "$(median_of ${RPS[relay]})" "$(median_of ${RPS[passfd]})" \
			"$(median_of ${LAT[relay]})" "$(median_of ${LAT[passfd]})"
	done
	exit 0
fi

declare -A COST
for size in $SIZES; do
	for ka in true false; do
		for run in $(seq "$RUNS"); do
			for path in $PATHS; do
				pid=${FPID[$path]}
				before=$(cputicks "$pid") nsbefore=$(cpuns "$pid")
				taskset -c "$LOAD_CORE" "$SHOAL" bench http --url "http://${FADDR[$path]}/$size" --connections "$CONNS" \
					--duration "$DURATION" --keepalive=$ka --json >"$W/out.json"
				after=$(cputicks "$pid") nsafter=$(cpuns "$pid")
				read -r reqs errs < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["ok"], r["errors_total"])' "$W/out.json")
				if [ "$errs" != 0 ]; then
					echo "handoff-cpu: $path $size keepalive=$ka: $errs errors" >&2
				fi
				secs=$(cpusecs "$before" "$after" "$nsbefore" "$nsafter")
				COST[$path,$size,$ka]+="$(python3 -c "print($secs / max($reqs, 1) * 1e6)") "
				COST[$path,$size,$ka,n]+="$reqs "
			done
		done
	done
done
echo
echo "Front CPU µs per request, median of $RUNS interleaved runs (GOMAXPROCS=1, $CONNS connections, $DURATION per run; ratio to relay; requests per run)"
echo
echo "| object | connection | relay | passfd (wrr: node keeps it) | passfd-return (urlhash: back after each request) |${PASSFD_B:+ passfd B |}"
echo "|---|---|---|---|---|${PASSFD_B:+---|}"
for size in $SIZES; do
	for ka in true false; do
		mode=$([ $ka = true ] && echo keep-alive || echo close)
		r=$(median_of ${COST[relay,$size,$ka]})
		line="| $size | $mode | $(printf '%.1f' "$r") ($(median_of ${COST[relay,$size,$ka,n]}))"
		for path in ${PATHS#relay }; do
			c=$(median_of ${COST[$path,$size,$ka]})
			ratio=$(python3 -c "print('%.3f' % ($c / $r if $r > 0 else float('nan')))")
			line="$line | $(printf '%.1f' "$c") = ${ratio}× ($(median_of ${COST[$path,$size,$ka,n]}))"
		done
		echo "$line |"
	done
done
if [ -n "${PASSFD_B:-}" ]; then
	echo
	echo "Per run, passfd ÷ relay front CPU (passfd B = $PASSFD_B):"
	for size in $SIZES; do
		for ka in true false; do
			python3 -c 'import sys
r, a, b = ([float(x) for x in v.split()] for v in sys.argv[3:6])
print("  %s keepalive=%s: passfd %s; passfd B %s" % (sys.argv[1], sys.argv[2],
	" ".join("%.3f" % (x / y) for x, y in zip(a, r)), " ".join("%.3f" % (x / y) for x, y in zip(b, r))))' \
				"$size" "$ka" "${COST[relay,$size,$ka]}" "${COST[passfd,$size,$ka]}" "${COST[passfd-b,$size,$ka]}"
		done
	done
fi
