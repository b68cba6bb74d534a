#!/usr/bin/env bash
# tag-lab.sh — the front's CPU per request under tbccrd across hosts (the
# repair lab): relay against the repair path in tag mode (the node holding a
# connection moves it with TCP_REPAIR to the node the front's table names,
# docs/datapaths.md) and against the repair path whose connections stay
# where their first request sent them (--repair-moves front), and ("accept")
# against tag mode in which the nodes accept new connections themselves
# (--repair-accept nodes: the front's steering program sends each new
# connection's SYN to a node, the front leaves the connection path).
#
# Set-up (`shoal lab up`, network namespaces on one bridge; root only):
# NODES `shoal node` (pinned to LOAD_CORE) serve FILES files of 1 KB with a
# repair handoff port; one `shoal front --policy tbccrd` at a time
# (GOMAXPROCS=1, pinned to FRONT_CORE) on the VIP; `shoal bench http` in the
# client namespace (LOAD_CORE): CONNS connections at a time, each closed
# after 10 requests, Zipf(0.8) over the files. Every run starts fresh nodes
# and a fresh front (empty caches and tables), warms them for WARM, then
# measures DURATION:
#   front µs/req   the front process's CPU time (all threads, schedstat)
#                  over the run ÷ requests answered;
#   +softirq       plus the softirq time of FRONT_CORE over the run ÷
#                  requests. On veth the receive side of a packet runs on
#                  the SENDER's core, so most of the front's packet work
#                  (the TCX steering of client segments, relayed answers)
#                  is charged to LOAD_CORE; the core's softirq is shown for
#                  completeness, and it includes whatever else runs there;
#   hit ratio      the nodes' cache hits ÷ lookups over the run.
# Paths alternate within each of RUNS rounds; medians and ranges printed.
#
# Usage: sudo bench/tag-lab.sh
# Env:   RUNS=3 DURATION=5s WARM=2s CONNS=16 NODES=3 FILES=200
#        FRONT_CORE=0 LOAD_CORE=1 SHOAL=path/to/shoal PATHS="relay tag first accept"
#        PERF=/tmp/front.perf (perf record of each front during its runs)
#        STAT=/tmp/front.stat (perf stat of each front during its runs:
#        task-clock, context switches and every system call by name; with
#        the requests answered, this is the per-connection list of
#        docs/benchmarks.md "Tag mode across hosts")
#        KEEP=/tmp/taglab-logs (keep each run's front and node logs)
#        RATE=2500 (requests per second for every path; empty: as fast as
#        each path goes). CPU per request falls as the request rate rises
#        (wake-ups and system calls are shared by more requests), and on a
#        shared machine the paths' rates differ by up to 10× between runs,
#        so compare them at one rate.
set -euo pipefail

RUNS=${RUNS:-3}
RATE=${RATE-2500}
DURATION=${DURATION:-5s}
WARM=${WARM:-2s}
CONNS=${CONNS:-16}
NODES=${NODES:-3}
FILES=${FILES:-200}
FRONT_CORE=${FRONT_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
PATHS=${PATHS:-"relay tag first accept"}

BENCH=tag-lab
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_need taskset go python3 ip
[ "$(id -u)" -eq 0 ] || { echo "tag-lab: needs root (network namespaces, TCP_REPAIR)" >&2; exit 1; }
ID=t$(printf '%04x' $((RANDOM % 65536)))
LABUP=
FRONTPID= NODEPIDS=()
bench_cleanup_more() {
	kill ${FRONTPID:-} "${NODEPIDS[@]}" 2>/dev/null || true
	[ -n "$LABUP" ] && "$SHOAL" lab down --id "$ID" >/dev/null 2>&1
}
bench_workdir shoal-taglab
bench_build_shoal

"$SHOAL" lab up --id "$ID" --nodes "$NODES" >/dev/null
LABUP=1
NS=shoal-$ID
VIP=10.201.0.100
nsx() { local ns=$1; shift; ip netns exec "$NS-$ns" "$@"; }
cpuns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
softirq() { awk -v c="cpu$1" '$1 == c {print $8}' /proc/stat; }
TCK=$(getconf CLK_TCK)

mkdir -p "$W/www"
for i in $(seq "$FILES"); do head -c 1024 /dev/urandom >"$W/www/$(printf 'f%05d' "$i")"; done
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$W/key"

start_nodes() {
	NODEPIDS=()
	local urls=""
	for i in $(seq "$NODES"); do
		local ip=10.201.0.$((10 + i))
		ip netns exec "$NS-node$i" taskset -c "$LOAD_CORE" "$SHOAL" node --root "$W/www" --listen "$ip:8080" \
			--cache-mb 64 --repair-listen "$ip:7070" --repair-key-file "$W/key" 2>"$W/node$i.log" &
		NODEPIDS+=($!)
		PIDS=("${NODEPIDS[@]}") # killed before bench_cleanup waits, should the script stop early
		urls="$urls${urls:+,}http://$ip:8080"
	done
	for i in $(seq "$NODES"); do
		for _ in $(seq 100); do grep -q "repair handoff port open" "$W/node$i.log" && break; sleep 0.05; done
	done
	NODEURLS=$urls
}
stop_pids() { local p; for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done; for p in "$@"; do wait "$p" 2>/dev/null || true; done; }

# hits: the nodes' summed cache hits and misses.
hits() {
	local h=0 m=0 i out
	for i in $(seq "$NODES"); do
		out=$(nsx client python3 -c 'import json,sys,urllib.request as u
s=json.load(u.urlopen("http://"+sys.argv[1]+":8080/.shoal/status")); print(s["cache_hits"], s["cache_misses"])' "10.201.0.$((10 + i))")
		h=$((h + ${out% *})) m=$((m + ${out#* }))
	done
	echo "$h $m"
}

start_front() { # start_front PATH
	local args=(front --listen "$VIP:80" --nodes "$NODEURLS" --policy tbccrd --health-interval 1s)
	case $1 in
	relay) args+=(--path relay) ;;
	tag) args+=(--path repair --repair-key-file "$W/key" --repair-moves nodes) ;;
	first) args+=(--path repair --repair-key-file "$W/key" --repair-moves front) ;;
	accept) args+=(--path repair --repair-key-file "$W/key" --repair-moves nodes --repair-accept nodes) ;;
	esac
	GOMAXPROCS=1 ip netns exec "$NS-front" taskset -c "$FRONT_CORE" "$SHOAL" "${args[@]}" 2>"$W/front-$1.log" &
	FRONTPID=$!
	PIDS=("${NODEPIDS[@]}" "$FRONTPID")
	for _ in $(seq 100); do grep -q "msg=serving" "$W/front-$1.log" && break; sleep 0.05; done
	sleep 1.2 # a health check
}

load() { # load DURATION: one run, JSON in $W/out.json
	nsx client taskset -c "$LOAD_CORE" "$SHOAL" bench http --url "http://$VIP:80/" --zipf 0.8 --files "$FILES" \
		--connections "$CONNS" --conn-requests 10 --duration "$1" ${RATE:+--rate "$RATE"} --json >"$W/out.json"
}

declare -A COST SOFT HIT N
echo "tag-lab: lab $ID, $NODES nodes, $FILES files of 1 KB, $CONNS connections of 10 requests, $RUNS rounds of $DURATION" >&2
for run in $(seq "$RUNS"); do
	for path in $PATHS; do
		start_nodes
		start_front "$path"
		load "$WARM"
		read -r h0 m0 < <(hits)
		c0=$(cpuns "$FRONTPID") s0=$(softirq "$FRONT_CORE")
		if [ -n "${PERF:-}" ]; then
			perf record -q -g -o "$PERF.$path" -p "$FRONTPID" -- sleep "${DURATION%s}" >/dev/null 2>&1 &
			PERFPID=$!
		fi
		if [ -n "${STAT:-}" ]; then
			perf stat -e 'task-clock,context-switches,syscalls:sys_enter_*' -o "$STAT.$path.$run" -p "$FRONTPID" \
				-- sleep "${DURATION%s}" >/dev/null 2>&1 &
			STATPID=$!
		fi
		load "$DURATION"
		[ -n "${PERF:-}" ] && wait "$PERFPID"
		[ -z "${STAT:-}" ] || wait "$STATPID"
		c1=$(cpuns "$FRONTPID") s1=$(softirq "$FRONT_CORE")
		read -r h1 m1 < <(hits)
		read -r ok errs rps < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["ok"], r["errors_total"], r["rps"])' "$W/out.json")
		[ "$errs" = 0 ] || echo "tag-lab: $path: $errs errors" >&2
		[ -z "${STAT:-}" ] || echo "requests $ok" >>"$STAT.$path.$run"
		c=$(python3 -c "print(($c1 - $c0) / 1e3 / max($ok, 1))")
		s=$(python3 -c "print(($s1 - $s0) * 1e6 / $TCK / max($ok, 1))")
		hr=$(python3 -c "d = ($h1 - $h0) + ($m1 - $m0); print(($h1 - $h0) / d if d else 0)")
		COST[$path]+="$c " SOFT[$path]+="$s " HIT[$path]+="$hr " N[$path]+="$ok "
		printf 'round %d %-5s %6.2f µs/req front, %6.2f µs/req core softirq, hit ratio %.4f, %7d requests, %6.0f req/s\n' \
			"$run" "$path" "$c" "$s" "$hr" "$ok" "$rps" >&2
		stop_pids "$FRONTPID"
		grep -ho 'stats="[^"]*"' "$W/front-$path.log" | tail -1 | cut -c1-400 >&2 || true
		stop_pids "${NODEPIDS[@]}"
		PIDS=() # gone: their ids may be reused
		[ -z "${KEEP:-}" ] || { mkdir -p "$KEEP/$run-$path" && cp "$W"/*.log "$KEEP/$run-$path/"; }
		grep -ho 'moved_out=[0-9]*\|move_failed=[0-9]*\|move_lost=[0-9]*\|asked=[0-9]*\|accepted=[0-9]*\|forward_late=[0-9]*' "$W"/node*.log | paste -sd' ' >&2 || true
	done
done

rng() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f–%.2f", lo, hi}'; }
echo
echo "Front CPU per request under tbccrd across hosts (repair lab: netns on one bridge), $NODES nodes, 1 KB files,"
echo "$CONNS connections of 10 requests at ${RATE:-full} req/s; median (range) of $RUNS rounds of $DURATION, GOMAXPROCS=1;"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| path | front µs/request | range | core $FRONT_CORE softirq µs/request | hit ratio | requests/run |"
echo "|---|---|---|---|---|---|"
mr=$(median_of ${COST[relay]:-0})
for path in $PATHS; do
	m=$(median_of ${COST[$path]})
	printf '| %s | %.2f (%.3f× relay) | %s | %.2f | %.4f | %s |\n' "$path" "$m" "$(python3 -c "print($m / max($mr, 1e-9))")" \
		"$(rng ${COST[$path]})" "$(median_of ${SOFT[$path]})" "$(median_of ${HIT[$path]})" "$(median_of ${N[$path]})"
done
