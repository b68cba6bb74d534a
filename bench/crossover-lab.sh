#!/usr/bin/env bash
# crossover-lab.sh — seed 002's crossover experiment across hosts: relay
# against the repair path (TCP_REPAIR + per-flow steering), in network
# namespaces shaped like seed 002's LAN (one front, two real servers).
# bench/crossover.sh measures the same on one host with passfd, whose
# handoff is one sendmsg; here a handoff costs a control round trip to the
# node, the cost that can make relaying win at low concurrency.
#
# Set-up (`shoal lab up`, internal/cluster/handoff.Lab; root only):
#   node1, node2: `shoal bench sink` on NODE:9000 (what relay dials) and a
#           repair handoff port NODE:7070 (--repair-listen), VIP on lo;
#   front:  two `shoal bench l4front` on the VIP, pinned to FRONT_CORE:
#           relay on VIP:9001 (dials the nodes' real addresses, splices) and
#           repair on VIP:9000 (freezes each accepted socket once its first
#           segment is queued, steers the flow, sends the state to a node;
#           the node replies from the VIP straight to the client);
#   client: `shoal bench tcp` on LOAD_CORE (connect, send BYTES, receive
#           BYTES, close, repeat), one concurrency level per run.
# Both fronts run throughout, so relay also runs with the repair front's
# steering installed (TCX program on eth0, tcp_early_demux off) — a map
# miss and a route lookup per packet. Per level, each path runs RUNS times,
# alternating which goes first. Front CPU per op is the front process's
# utime+stime over the run ÷ operations; softirq work (e.g. the TCX
# redirect of a steered packet) is not in it. The sinks' summed CPU per op
# is recorded in the runs file too (sinks_cpu_us_per_op; not in the table).
#
# Output: $OUT/crossover-lab-runs.jsonl and, through bench/report's
# crossover mode, $OUT/crossover-lab.{json,md,svg,png}.
#
# Usage: sudo bench/crossover-lab.sh   (needs Go, ip, taskset, python3)
# Env:   LEVELS="1 2 4 8 16 32 45 64 96 128 192 256" DURATION=2s RUNS=3
#        BYTES=100 FRONT_CORE=0 LOAD_CORE=1 OUT=bench/results STEER=auto
#        SHOAL=path/to/shoal (else the working tree is built)
set -euo pipefail

LEVELS=${LEVELS:-"1 2 4 8 16 32 45 64 96 128 192 256"}
DURATION=${DURATION:-2s}
RUNS=${RUNS:-3}
BYTES=${BYTES:-100}
FRONT_CORE=${FRONT_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
STEER=${STEER:-auto}
NODES=2

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
OUT=${OUT:-bench/results}

BENCH=crossover-lab
. bench/lib.sh
bench_need taskset go python3 ip
[ "$(id -u)" -eq 0 ] || { echo "crossover-lab: needs root (network namespaces, TCP_REPAIR)" >&2; exit 1; }
ID=x$(printf '%04x' $((RANDOM % 65536)))
LABUP=
bench_cleanup_more() { [ -n "$LABUP" ] && "$SHOAL" lab down --id "$ID" >/dev/null 2>&1; }
bench_workdir shoal-xlab
bench_build_shoal

"$SHOAL" lab up --id "$ID" --nodes "$NODES" >/dev/null
LABUP=1
NS=shoal-$ID
VIP=10.201.0.100
NODEIPS=(10.201.0.11 10.201.0.12)
# nsx runs a command in a lab namespace (foreground only: started with & a
# function is a subshell whose PID is not the command's; background starts
# call ip netns exec directly, which execs, so $! is the process itself).
nsx() { local ns=$1; shift; ip netns exec "$NS-$ns" "$@"; }

# listening NS PORT: wait until something listens on PORT in namespace NS.
listening() {
	for _ in $(seq 100); do
		nsx "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
		sleep 0.05
	done
	echo "crossover-lab: nothing listening on port $2 in $1" >&2
	exit 1
}

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$W/key"
addrs=() repairs=()
for i in $(seq 0 $((NODES - 1))); do
	ipa=${NODEIPS[$i]}
	ip netns exec "$NS-node$((i + 1))" taskset -c "$LOAD_CORE" "$SHOAL" bench sink --listen "$ipa:9000" \
		--repair-listen "$ipa:7070" --repair-key-file "$W/key" \
		--recv-bytes "$BYTES" --send-bytes "$BYTES" 2>"$W/sink$i.log" &
	PIDS+=($!)
	addrs+=("$ipa:9000")
	repairs+=("$ipa:7070")
done
for i in $(seq 0 $((NODES - 1))); do listening "node$((i + 1))" 7070; listening "node$((i + 1))" 9000; done

declare -A FPID FADDR
FADDR[relay]=$VIP:9001
FADDR[repair]=$VIP:9000
ip netns exec "$NS-front" taskset -c "$FRONT_CORE" "$SHOAL" bench l4front --listen "${FADDR[relay]}" --path relay \
	--nodes "$(IFS=,; echo "${addrs[*]}")" 2>"$W/front-relay.log" &
FPID[relay]=$!
PIDS+=($!)
ip netns exec "$NS-front" taskset -c "$FRONT_CORE" "$SHOAL" bench l4front --listen "${FADDR[repair]}" --path repair \
	--repair-nodes "$(IFS=,; echo "${repairs[*]}")" --repair-key-file "$W/key" --repair-steer "$STEER" \
	2>"$W/front-repair.log" &
FPID[repair]=$!
PIDS+=($!)
listening front 9001
listening front 9000
BACKEND=$(sed -n 's/.*backend=\([a-z]*\).*/\1/p' "$W/front-repair.log" | head -1)

SINKPIDS=("${PIDS[@]:0:$NODES}")
sinkticks() { local t=0 p; for p in "${SINKPIDS[@]}"; do t=$((t + $(cputicks "$p"))); done; echo "$t"; }

LOADAVG_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
RUNSFILE=$W/runs.jsonl
: >"$RUNSFILE"
echo "crossover-lab: lab $ID, levels [$LEVELS], $DURATION per run, $RUNS runs, $BYTES bytes each way, steering ${BACKEND:-?}" >&2
for level in $LEVELS; do
	for run in $(seq "$RUNS"); do
		order="relay repair"
		[ $((run % 2)) -eq 0 ] && order="repair relay"
		for path in $order; do
			before=$(cputicks "${FPID[$path]}") nbefore=$(sinkticks)
			nsx client taskset -c "$LOAD_CORE" "$SHOAL" bench tcp --addr "${FADDR[$path]}" --connections "$level" \
				--duration "$DURATION" --send-bytes "$BYTES" --recv-bytes "$BYTES" --json >"$W/out.json"
			after=$(cputicks "${FPID[$path]}") nafter=$(sinkticks)
			tcp_run_json "$W/out.json" "$path" "$run" "$before" "$after" "$nbefore" "$nafter" >>"$RUNSFILE"
		done
	done
	echo "crossover-lab: level $level done" >&2
done

# Stop the fronts now so that their final counters reach the logs.
kill -TERM "${FPID[relay]}" "${FPID[repair]}" 2>/dev/null || true
sleep 1
grep -h "l4front stopped" "$W/front-relay.log" "$W/front-repair.log" >&2 || true

crossover_report crossover-lab \
	--meta "setup=lab: client, front, 2 nodes in netns on one bridge; repair = TCP_REPAIR + ${BACKEND:-?} steering" \
	--meta "steer=${BACKEND:-unknown}"
