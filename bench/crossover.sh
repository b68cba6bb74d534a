#!/usr/bin/env bash
# crossover.sh — seed 002's crossover experiment (its §4 "test method";
# issue 6, last measurement item): the concurrency at which handing the
# connection off to the real server overtakes relaying it through the front.
# The paper saw 45 threads: above, migration had the lower mean time per
# operation; below, forwarding won.
#
# Set-up, all on this host:
#   NODES × `shoal bench sink` (read BYTES, write BYTES, close), each on a TCP
#           port and a handoff socket, pinned to LOAD_CORE;
#   two `shoal bench l4front` (internal/cluster/l4), pinned to FRONT_CORE: one with
#           --path relay (dial the node, splice both ways), one with --path
#           passfd (pass the unread descriptor to the node's socket);
#   `shoal bench tcp` (seed 002's client: connect, send BYTES, receive BYTES,
#           close, repeat) on LOAD_CORE, one concurrency level per run.
# For every level the two paths run back to back, RUNS times, alternating
# which goes first, so drift in the machine's load hits both alike. The
# front's CPU time (utime+stime from /proc/PID/stat) over a run divided by
# the operations completed is its CPU cost per operation.
#
# Output: per-run JSON Lines, then bench/report's crossover mode prints the
# table (medians with min–max), the crossover — the first level at which
# passfd's median mean time per operation is below relay's — and writes
# $OUT/crossover.json, crossover.md and crossover.svg/png.
#
# Usage: bench/crossover.sh          (from anywhere in the repo; needs Go,
#                                     taskset, python3)
# Env:   LEVELS="1 2 4 8 16 32 45 64 96 128 192 256" DURATION=2s RUNS=3
#        BYTES=100 NODES=2 FRONT_CORE=0 LOAD_CORE=1 OUT=bench/results
#        SHOAL=path/to/shoal (else the working tree is built)
set -euo pipefail

LEVELS=${LEVELS:-"1 2 4 8 16 32 45 64 96 128 192 256"}
DURATION=${DURATION:-2s}
RUNS=${RUNS:-3}
BYTES=${BYTES:-100}
NODES=${NODES:-2}
FRONT_CORE=${FRONT_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
# Below the ephemeral range (32768+), whose ports outgoing connections hold.
BASE=${PORT_BASE:-$((22000 + (RANDOM % 900) * 10))}

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
OUT=${OUT:-bench/results}

BENCH=crossover
. bench/lib.sh
bench_need taskset go python3
bench_workdir shoal-xover
bench_build_shoal

addrs=() socks=()
for i in $(seq 0 $((NODES - 1))); do
	a=127.0.0.1:$((BASE + 2 + i))
	taskset -c "$LOAD_CORE" "$SHOAL" bench sink --listen "$a" --handoff-socket "$W/n$i.sock" \
		--recv-bytes "$BYTES" --send-bytes "$BYTES" 2>"$W/sink$i.log" &
	PIDS+=($!)
	addrs+=("$a")
	socks+=("$W/n$i.sock")
done
for a in "${addrs[@]}"; do waitport "$a"; done
NODELIST=$(IFS=,; echo "${addrs[*]}")
SOCKLIST=$(IFS=,; echo "${socks[*]}")

declare -A FPID FADDR
FADDR[relay]=127.0.0.1:$BASE
FADDR[passfd]=127.0.0.1:$((BASE + 1))
for path in relay passfd; do
	taskset -c "$FRONT_CORE" "$SHOAL" bench l4front --listen "${FADDR[$path]}" --path "$path" \
		--nodes "$NODELIST" --handoff-sockets "$SOCKLIST" 2>"$W/front-$path.log" &
	FPID[$path]=$!
	PIDS+=($!)
	waitport "${FADDR[$path]}"
done

LOADAVG_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
RUNSFILE=$W/runs.jsonl
: >"$RUNSFILE"
echo "crossover: levels [$LEVELS], $DURATION per run, $RUNS runs, $BYTES bytes each way, $NODES sinks" >&2
for level in $LEVELS; do
	for run in $(seq "$RUNS"); do
		order="relay passfd"
		[ $((run % 2)) -eq 0 ] && order="passfd relay"
		for path in $order; do
			before=$(cputicks "${FPID[$path]}")
			taskset -c "$LOAD_CORE" "$SHOAL" bench tcp --addr "${FADDR[$path]}" --connections "$level" \
				--duration "$DURATION" --send-bytes "$BYTES" --recv-bytes "$BYTES" --json >"$W/out.json"
			after=$(cputicks "${FPID[$path]}")
			tcp_run_json "$W/out.json" "$path" "$run" "$before" "$after" >>"$RUNSFILE"
		done
	done
	echo "crossover: level $level done" >&2
done

crossover_report crossover
