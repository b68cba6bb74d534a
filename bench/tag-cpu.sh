#!/usr/bin/env bash
# tag-cpu.sh — the passfd front's CPU per request under tbccrd, with the
# nodes moving connections to each other by the front's shared table (tag
# mode, seed 000 §2.2.2) against today's hand-back to the front after every
# request (docs/datapaths.md).
#
# NODES `shoal node` processes with handoff sockets in one folder serve FILES
# files of 1 KB; two `shoal front --path passfd --policy tbccrd` (GOMAXPROCS=1,
# pinned to core 0), one with --passfd-moves nodes and one with
# --passfd-moves front; `shoal bench http` (pinned to core 1 with the nodes)
# loads each for DURATION per run: CONNS connections at a time, each closed
# after 10 requests (--conn-requests 10), Zipf(0.8) over the files. The
# front's CPU time is the sum of its threads' time on a CPU
# (/proc/PID/task/*/schedstat, nanoseconds) over the run, divided by the
# requests answered. Runs alternate between the two fronts RUNS times and
# the median and range are printed: other load on this shared machine moves
# CPU per request much less than it moves requests per second, but it does
# move it (cache misses, more context switches), so read the ratio.
#
# Usage: bench/tag-cpu.sh           (from the repo root; builds shoal)
# Env:   RUNS=5 DURATION=5s CONNS=16 NODES=4 FILES=200 SHOAL=path/to/shoal
set -euo pipefail

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-16}
NODES=${NODES:-4}
FILES=${FILES:-200}
FRONT_CORE=${FRONT_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
BASE=${PORT_BASE:-$((22000 + (RANDOM % 1000) * 10))}

BENCH=tag-cpu
. "$(dirname "$0")/lib.sh"
bench_need taskset go python3
bench_workdir shoal-tagcpu
bench_build_shoal

# cpuns PID: the CPU time of every thread of PID so far, in nanoseconds.
cpuns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s}'; }

mkdir -p "$W/www" "$W/sock"
for i in $(seq "$FILES"); do
	head -c 1024 /dev/urandom >"$W/www/$(printf 'f%05d' "$i")"
done

nodes=""
for i in $(seq 0 $((NODES - 1))); do
	addr=127.0.0.1:$((BASE + i))
	taskset -c "$LOAD_CORE" "$SHOAL" node --root "$W/www" --listen "$addr" --cache-mb 64 \
		--handoff-socket "$W/sock/n$i.sock" 2>"$W/node$i.log" &
	PIDS+=($!)
	nodes="$nodes${nodes:+,}http://$addr"
	waitport "$addr"
done

declare -A FPID FADDR ADMIN
port=$((BASE + NODES))
for moves in nodes front; do
	FADDR[$moves]=127.0.0.1:$port ADMIN[$moves]=127.0.0.1:$((port + 1))
	port=$((port + 2))
	GOMAXPROCS=1 taskset -c "$FRONT_CORE" "$SHOAL" front --listen "${FADDR[$moves]}" --nodes "$nodes" --admin "${ADMIN[$moves]}" \
		--health-interval 1s --path passfd --policy tbccrd --passfd-moves "$moves" --handoff-dir "$W/sock" \
		2>"$W/front-$moves.log" &
	FPID[$moves]=$!
	PIDS+=($!)
	waitport "${FADDR[$moves]}"
done
sleep 1.5 # a health check: the fronts learn the handoff sockets

load() { # load MOVES DURATION: one run against that front, JSON in $W/out.json
	taskset -c "$LOAD_CORE" "$SHOAL" bench http --url "http://${FADDR[$1]}/" --zipf 0.8 --files "$FILES" \
		--connections "$CONNS" --conn-requests 10 --duration "$2" --json >"$W/out.json"
}
for moves in nodes front; do load "$moves" 2s; done # warm the caches and tables

declare -A COST N
for run in $(seq "$RUNS"); do
	for moves in nodes front; do
		pid=${FPID[$moves]}
		before=$(cpuns "$pid")
		load "$moves" "$DURATION"
		after=$(cpuns "$pid")
		read -r ok errs rps < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["ok"], r["errors_total"], r["rps"])' "$W/out.json")
		if [ "$errs" != 0 ]; then
			echo "tag-cpu: moves=$moves: $errs errors" >&2
		fi
		c=$(python3 -c "print(($after - $before) / 1e3 / max($ok, 1))")
		COST[$moves]+="$c "
		N[$moves]+="$ok "
		printf 'run %d %-5s %6.2f µs/request  %7d requests  %6.0f req/s\n' "$run" "$moves" "$c" "$ok" "$rps" >&2
	done
done
rng() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f–%.2f", lo, hi}'; }
mn=$(median_of ${COST[nodes]})
mf=$(median_of ${COST[front]})
echo
echo "Front CPU µs per request under tbccrd over passfd, 1 KB files, $CONNS connections of 10 requests, $NODES nodes;"
echo "median (range) of $RUNS interleaved $DURATION runs, GOMAXPROCS=1; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| moves | front µs/request | range | requests per run (median) |"
echo "|---|---|---|---|"
printf '| front (hand-back after each request) | %.2f | %s | %s |\n' "$mf" "$(rng ${COST[front]})" "$(median_of ${N[front]})"
printf '| nodes (tag mode) | %.2f = %.3f× | %s | %s |\n' "$mn" "$(python3 -c "print($mn / $mf)")" "$(rng ${COST[nodes]})" \
	"$(median_of ${N[nodes]})"
echo
for moves in nodes front; do
	python3 -c 'import json,sys,urllib.request as u; h=json.load(u.urlopen("http://"+sys.argv[1]+"/stats"))["handoff"]
r=json.load(u.urlopen("http://"+sys.argv[1]+"/stats"))["requests"]
print("moves=%s: front requests %d, passed %d, returned %d; tag %s" % (sys.argv[2], r, h["passed"], h["returned"], h["tag"]))' "${ADMIN[$moves]}" "$moves"
done
