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
#   two `shoal bench l4front` (internal/l4), pinned to FRONT_CORE: one with
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

for t in taskset go python3; do
	command -v "$t" >/dev/null || { echo "crossover: $t not found" >&2; exit 1; }
done

W=$(mktemp -d /tmp/shoal-xover.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

if [ -z "${SHOAL:-}" ]; then
	SHOAL=$W/shoal
	go build -o "$SHOAL" ./cmd/shoal
fi

waitport() {
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "crossover: nothing listening on $1" >&2
	exit 1
}

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

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime+stime, clock ticks
HZ=$(getconf CLK_TCK)

LOADAVG_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
RUNSFILE=$W/runs.jsonl
: >"$RUNSFILE"
echo "crossover: levels [$LEVELS], $DURATION per run, $RUNS runs, $BYTES bytes each way, $NODES sinks" >&2
for level in $LEVELS; do
	for run in $(seq "$RUNS"); do
		order="relay passfd"
		[ $((run % 2)) -eq 0 ] && order="passfd relay"
		for path in $order; do
			before=$(ticks "${FPID[$path]}")
			taskset -c "$LOAD_CORE" "$SHOAL" bench tcp --addr "${FADDR[$path]}" --connections "$level" \
				--duration "$DURATION" --send-bytes "$BYTES" --recv-bytes "$BYTES" --json >"$W/out.json"
			after=$(ticks "${FPID[$path]}")
			python3 - "$W/out.json" "$path" "$run" "$before" "$after" "$HZ" >>"$RUNSFILE" <<'PY'
import json, sys
out, path, run, before, after, hz = sys.argv[1:]
lv = json.load(open(out))["levels"][0]
ops = lv["ops"]
print(json.dumps({
    "level": lv["connections"], "path": path, "run": int(run), "ops": ops,
    "ops_per_sec": lv["ops_per_sec"], "mean_ms": lv["latency_ms"]["mean"],
    "p50_ms": lv["latency_ms"]["p50"], "p99_ms": lv["latency_ms"]["p99"],
    "errors": sum(lv["errors"].values()) if lv["errors"] else 0,
    "front_cpu_us_per_op": (int(after) - int(before)) / int(hz) / max(ops, 1) * 1e6,
}))
PY
		done
	done
	echo "crossover: level $level done" >&2
done

mkdir -p "$OUT"
cp "$RUNSFILE" "$OUT/crossover-runs.jsonl"
go run ./bench/report crossover --runs "$OUT/crossover-runs.jsonl" --out "$OUT/crossover.json" \
	--md "$OUT/crossover.md" --plot "$OUT/crossover.svg" --plot "$OUT/crossover.png" \
	--meta "duration=$DURATION" --meta "runs=$RUNS" --meta "bytes=$BYTES" --meta "nodes=$NODES" \
	--meta "cpus=$(nproc)" --meta "front_core=$FRONT_CORE" --meta "load_core=$LOAD_CORE" \
	--meta "loadavg_before=$LOADAVG_BEFORE" --meta "loadavg_after=$(cut -d' ' -f1-3 /proc/loadavg)" \
	--meta "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" --meta "date=$(date -u +%FT%TZ)"
