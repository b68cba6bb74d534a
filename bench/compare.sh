#!/usr/bin/env bash
# compare.sh — the side-by-side benchmark harness (issue 5, SPEC §7: every
# performance claim of shoal is a ratio against a peer measured in the same
# run). One command runs the whole matrix and prints ONE ratio table:
#
#   node     `shoal node` vs nginx serving 1 KB / 64 KB / 1 MB files
#            (bench/node-vs-nginx.sh)
#   front    `shoal front` vs HAProxy relaying to two nginx back-ends
#            (bench/front-vs-haproxy.sh)
#   handoff  the front's CPU per request: passfd handoff vs relay
#            (bench/handoff-cpu.sh; skipped with a reason if it fails)
#   tls      `shoal front` vs HAProxy terminating TLS with one certificate,
#            1 KB, keep-alive and a new connection per request
#            (bench/tls-vs-haproxy.sh; not in the default ONLY, run ONLY=tls)
#   h2       `shoal front` vs HAProxy's HTTP/2 front over TLS, 1 KB, h2load
#            16 connections × 10 streams (bench/h2-vs-haproxy.sh; run ONLY=h2)
#
# Servers run pinned to one core (taskset), one at a time; the load
# generator (wrk -t1 -c$CONNS; `shoal bench http` for handoff, which is how
# handoff-cpu.sh loads) runs on another. The whole matrix runs once per core
# layout in LAYOUTS (by default both ways round), and a comparison is called
# won only when every round of every layout favours shoal (the verdict
# table under the ratios; bench/report's Judge). Each cell is RUNS paired rounds
# (peer and shoal back to back, alternating who goes first); the ratio column
# is min / median / max over the rounds of shoal÷peer req/s — or, for the
# handoff rows, relay÷passfd front CPU per request (how many more requests
# the front serves per CPU second). Above 1 favours shoal in every row.
#
# The sub-scripts stay usable on their own; with JSON_OUT=FILE each appends
# one JSON line per round, and bench/report (Go, gonum/plot) turns the lines
# into the table, bench/results/latest.json (+ latest.md) and
# bench/results/latest.svg / latest.png (grouped bars, min–max whiskers).
#
# Usage: bench/compare.sh                 (from anywhere in the repo; as root
#                                          on a fresh Debian it apt-installs
#                                          nginx, haproxy, wrk; needs Go)
# Knobs (env), with the defaults that fit in ~14 minutes on a 2-core machine (both layouts):
#   RUNS=3            paired rounds per cell (median of 3; use 5+ on a quiet box)
#   DURATION=3s       length of one load run (node, front, handoff)
#   CONNS=64          wrk connections (node, front)
#   HANDOFF_CONNS=32  `shoal bench http` connections for handoff
#   SIZES="1k 64k 1m" object sizes (node, front)
#   HANDOFF_SIZES="1k 100k 1m"  the sizes bench/handoff-cpu.sh serves
#   ONLY="node front handoff"  which comparisons to run (also: tls, h2)
#   LAYOUTS="0:1 1:0" core layouts SERVER:LOAD, each runs the whole matrix
#   SERVER_CPU=0 CLIENT_CPU=1  one layout only (sets LAYOUTS to it)
#   NICE=-10          niceness of servers and load (node, front; as root)
#   OUT=bench/results where latest.{json,md,svg,png} go
#   SHOAL=path        use a prebuilt shoal; else HEAD is built (git archive),
#                     or the working tree with SHOAL_WORKTREE=1
#   GUARD_RUNS=5      the regression guard compares with this many of the last
#                     accepted runs (OUT/accepted.jsonl) and exits 3 when a
#                     ratio falls below their spread
#   ACCEPT=1          append this run to OUT/accepted.jsonl when the guard
#                     passes and the 1-minute load average before it was
#                     below MAX_LOAD=1.5 (a busy machine's spread hides
#                     regressions)
# Every process it starts runs in its own process group and is killed on
# exit, error, Ctrl-C or SIGTERM.
set -euo pipefail

RUNS=${RUNS:-3}
DURATION=${DURATION:-3s}
CONNS=${CONNS:-64}
HANDOFF_CONNS=${HANDOFF_CONNS:-32}
SIZES=${SIZES:-"1k 64k 1m"}
HANDOFF_SIZES=${HANDOFF_SIZES:-"1k 100k 1m"}
ONLY=${ONLY:-"node front handoff"}
if [ -n "${SERVER_CPU:-}${CLIENT_CPU:-}" ]; then
	LAYOUTS=${LAYOUTS:-"${SERVER_CPU:-0}:${CLIENT_CPU:-1}"}
fi
LAYOUTS=${LAYOUTS:-"0:1 1:0"}
NICE=${NICE:--10}
GUARD_RUNS=${GUARD_RUNS:-5}
ACCEPT=${ACCEPT:-0}
MAX_LOAD=${MAX_LOAD:-1.5}

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
OUT=${OUT:-bench/results}
start=$(date +%s)

# --- tools -------------------------------------------------------------------
missing=()
tools="nginx:nginx haproxy:haproxy wrk:wrk taskset:util-linux curl:curl python3:python3 openssl:openssl"
case " $ONLY " in *" h2 "*) tools="$tools h2load:nghttp2-client" ;; esac
for t in $tools; do
	command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t#*:}")
done
if ((${#missing[@]})); then
	if [ "$(id -u)" != 0 ]; then
		echo "compare: missing ${missing[*]}; run as root or: apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
	echo "compare: installing ${missing[*]} ..." >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
command -v go >/dev/null || [ -n "${SHOAL:-}" ] || { echo "compare: needs Go (go.mod's version) to build shoal" >&2; exit 1; }
# Debian starts the packaged services on install; they would hold the cores.
if command -v service >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	service nginx stop >/dev/null 2>&1 || true
	service haproxy stop >/dev/null 2>&1 || true
fi

# --- processes and cleanup -----------------------------------------------------
W=$(mktemp -d /tmp/shoal-compare.XXXXXX)
set -m # background jobs get their own process group: one kill reaches every child
GROUPS_=()
cleanup() {
	local g
	trap - INT TERM EXIT
	for g in "${GROUPS_[@]:-}"; do [ -n "$g" ] && kill -TERM -- "-$g" 2>/dev/null || true; done
	for _ in $(seq 20); do
		local alive=0
		for g in "${GROUPS_[@]:-}"; do [ -n "$g" ] && kill -0 -- "-$g" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for g in "${GROUPS_[@]:-}"; do [ -n "$g" ] && kill -KILL -- "-$g" 2>/dev/null || true; done
	rm -rf "$W"
	if [ -n "${AUTOGROUP_OLD:-}" ]; then echo "$AUTOGROUP_OLD" >/proc/self/autogroup 2>/dev/null || true; fi
}
trap cleanup EXIT
# The session's autogroup gets NICE too (see bench_autogroup in lib.sh):
# with autogroups, a process's nice alone does not keep other sessions off
# the cores.
if [ -e /proc/self/autogroup ] && [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
	AUTOGROUP_OLD=$(awk '{print $NF}' /proc/self/autogroup)
	echo "$NICE" >/proc/self/autogroup 2>/dev/null || AUTOGROUP_OLD=
fi
trap 'echo "compare: interrupted, cleaning up" >&2; exit 130' INT TERM

# job NAME CMD...: run CMD in its own process group, stdout to $W/NAME.out,
# stderr (progress) to $W/NAME.err and, prefixed with NAME, to the terminal;
# returns CMD's status.
job() {
	local name=$1 pid tpid rc=0 g rest=()
	shift
	: >"$W/$name.err"
	"$@" >"$W/$name.out" 2>"$W/$name.err" &
	pid=$!
	GROUPS_+=("$pid")
	{ tail -s 0.2 -n +1 -f --pid="$pid" "$W/$name.err" | sed -u "s/^/  [$name] /" >&2; } &
	tpid=$!
	GROUPS_+=("$tpid")
	wait "$pid" || rc=$?
	wait "$tpid" || true
	for g in "${GROUPS_[@]}"; do [ "$g" = "$pid" ] || [ "$g" = "$tpid" ] || rest+=("$g"); done
	GROUPS_=("${rest[@]:-}")
	return $rc
}

# --- build once ----------------------------------------------------------------
if [ -z "${SHOAL:-}" ]; then
	echo "compare: building shoal and bench/report ..." >&2
	src=$repo
	if [ "${SHOAL_WORKTREE:-0}" != 1 ] && git -C "$repo" rev-parse HEAD >/dev/null 2>&1; then
		# The committed HEAD, not a working tree where others may be half-way.
		mkdir -p "$W/src"
		git -C "$repo" archive HEAD | tar -x -C "$W/src"
		src=$W/src
	fi
	(cd "$src" && go build -o "$W/shoal" ./cmd/shoal && go build -o "$W/report" ./bench/report)
	SHOAL=$W/shoal
else
	(cd "$repo" && go build -o "$W/report" ./bench/report)
fi

RUNSF=$W/runs.jsonl
: >"$RUNSF"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${load_before%% *}" -v m="$MAX_LOAD" 'BEGIN { exit !(l >= m) }'; then
	echo "compare: load average $load_before (≥ $MAX_LOAD): requests/s will be noisy and the run cannot be accepted" >&2
fi
skipped=()
echo "compare: RUNS=$RUNS DURATION=$DURATION CONNS=$CONNS SIZES=\"$SIZES\" HANDOFF_SIZES=\"$HANDOFF_SIZES\" ONLY=\"$ONLY\"; load average $load_before" >&2

want() { [[ " $ONLY " == *" $1 "* ]]; }
rows() { wc -l <"$RUNSF"; }
# produced NAME BEFORE: a sub-script that exits 0 without writing rows would
# silently drop its comparison from the table; say so instead.
produced() { [ "$(rows)" -gt "$2" ] || skipped+=("$1: the script wrote no JSON_OUT rows"); }

# comparison JOB LABEL SCRIPT VAR=VALUE...: run one comparison sub-script
# under job with that environment and JSON_OUT, noting in skipped a failure
# or a run that wrote no rows.
comparison() {
	local name=$1 label=$2 script=$3 n0
	shift 3
	echo "compare: $label ..." >&2
	n0=$(rows)
	job "$name" env "$@" JSON_OUT="$RUNSF" "$script" || skipped+=("$label: $script failed ($?)")
	produced "$label" "$n0"
}

for layout in $LAYOUTS; do
	SERVER_CPU=${layout%%:*} CLIENT_CPU=${layout#*:}
	tag="servers $SERVER_CPU, load $CLIENT_CPU"
	echo "compare: layout $tag" >&2
	n_layout=$(rows)
	if want node; then
		comparison node "node vs nginx" bench/node-vs-nginx.sh SHOAL_BIN="$SHOAL" RUNS="$RUNS" DUR="$DURATION" CONNS="$CONNS" \
			SIZES="$SIZES" SERVER_CPU="$SERVER_CPU" CLIENT_CPU="$CLIENT_CPU" NICE="$NICE"
	fi
	if want front; then
		comparison front "front vs HAProxy" bench/front-vs-haproxy.sh SHOAL="$SHOAL" RUNS="$RUNS" DURATION="$DURATION" CONNS="$CONNS" \
			SIZES="$SIZES" PROXY_CORE="$SERVER_CPU" LOAD_CORE="$CLIENT_CPU" NICE="$NICE"
	fi
	if want tls; then
		comparison tls "front vs HAProxy over TLS" bench/tls-vs-haproxy.sh SHOAL="$SHOAL" RUNS="$RUNS" DURATION="$DURATION" \
			CONNS="$CONNS" PROXY_CORE="$SERVER_CPU" LOAD_CORE="$CLIENT_CPU" NICE="$NICE"
	fi
	if want h2; then
		comparison h2 "front vs HAProxy over HTTP/2" bench/h2-vs-haproxy.sh SHOAL="$SHOAL" RUNS="$RUNS" DURATION="$DURATION" \
			PROXY_CORE="$SERVER_CPU" LOAD_CORE="$CLIENT_CPU" NICE="$NICE"
	fi

	# handoff-cpu.sh prints only medians, so it runs once per round (RUNS=1) and
	# its Markdown rows are read back:
	#   | 1k | close | 170.6 (3752.0) | 129.9 = 0.761× (308.0) | 114.9 = 0.674× (3219.0) |
	#   object, connection, relay µs (requests), passfd µs = ratio× (requests), passfd-return …
	# with the errors it reports on stderr ("handoff-cpu: passfd 1m keepalive=false:
	# 12 errors"): bench/report leaves runs with errors or too few requests out.
	# Two rows go into the table: passfd with Connection: close (every request is
	# a new connection the front hands off) and passfd-return with keep-alive
	# (content-aware: the node hands each connection back after every request).
	if want handoff; then
		dur_s=$(awk -v d="$DURATION" 'BEGIN { v = d + 0; if (d ~ /ms$/) v /= 1000; else if (d ~ /m$/) v *= 60; print v }')
		for r in $(seq "$RUNS"); do
			echo "compare: handoff vs relay, round $r/$RUNS ..." >&2
			if ! job "handoff$r" env -u CURVE SHOAL="$SHOAL" RUNS=1 DURATION="$DURATION" CONNS="$HANDOFF_CONNS" SIZES="$HANDOFF_SIZES" \
				FRONT_CORE="$SERVER_CPU" LOAD_CORE="$CLIENT_CPU" bench/handoff-cpu.sh; then
				skipped+=("handoff vs relay: bench/handoff-cpu.sh failed in round $r (see its output above)")
				break
			fi
			if ! awk -v run="$r" -v dur="$dur_s" -v sizes=" $HANDOFF_SIZES " -v errfile="$W/handoff$r.err" '
				FILENAME == errfile {
					# handoff-cpu: PATH SIZE keepalive=BOOL: N errors
					if ($1 == "handoff-cpu:" && $NF == "errors") { k = $4; sub(/:$/, "", k); errs[$2, $3, k] = $(NF - 1) }
					next
				}
				function num(s) { gsub(/^ +| +$/, "", s); return s + 0 }
				function reqs(s) { if (match(s, /\(([0-9.]+)\)/)) return substr(s, RSTART + 1, RLENGTH - 2) + 0; return -1 }
				function side(name, f, e) {
					return sprintf("{\"name\":\"%s\",\"rps\":%.1f,\"cpu_us\":%s,\"requests\":%d,\"errors\":%d}", name, reqs(f) / dur, num(f), reqs(f), e + 0)
				}
				function line(cmp, size, shoal, sf, pf, ka) {
					if (reqs(pf) < 0 || reqs(sf) < 0) { bad = 1; return }
					printf "{\"comparison\":\"%s\",\"size\":\"%s\",\"run\":%d,\"metric\":\"cpu\",\"peer\":%s,\"shoal\":%s}\n", cmp, size, run,
						side("relay", pf, errs["relay", size, ka]), side(shoal, sf, errs[shoal, size, ka])
					n++
				}
				NF >= 7 {
					size = $2; mode = $3; gsub(/ /, "", size); gsub(/ /, "", mode)
					if (index(sizes, " " size " ") == 0) next
					if (mode == "close") line("front CPU: passfd vs relay, close", size, "passfd", $5, $4, "keepalive=false")
					if (mode == "keep-alive") line("front CPU: passfd-return vs relay, keep-alive", size, "passfd-return", $6, $4, "keepalive=true")
				}
				END { exit (bad || n == 0) }' "$W/handoff$r.err" FS='|' "$W/handoff$r.out" >"$W/handoff$r.jsonl"; then
				skipped+=("handoff vs relay: could not read bench/handoff-cpu.sh's table (format changed?)")
				break
			fi
			cat "$W/handoff$r.jsonl" >>"$RUNSF"
		done
	fi
	# Every row of this layout names it (bench/report groups by it).
	awk -v n0="$n_layout" -v tag="$tag" 'NR > n0 { sub(/^\{/, "{\"layout\":\"" tag "\",") } { print }' "$RUNSF" >"$RUNSF.tmp"
	mv "$RUNSF.tmp" "$RUNSF"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# --- summary ----------------------------------------------------------------------
if [ ! -s "$RUNSF" ]; then
	echo "compare: no comparison produced results:" >&2
	printf '  %s\n' "${skipped[@]}" >&2
	exit 1
fi
mkdir -p "$OUT"
date_utc=$(date -u '+%Y-%m-%d %H:%M UTC')
elapsed=$(($(date +%s) - start))
meta=(
	--meta "date=$date_utc"
	--meta "loadavg_before=$load_before" --meta "loadavg_after=$load_after"
	--meta "runs=$RUNS" --meta "duration=$DURATION" --meta "conns=$CONNS" --meta "handoff_conns=$HANDOFF_CONNS"
	--meta "layouts=$LAYOUTS" --meta "nice=$NICE"
	--meta "cpus=$(nproc) × $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
	--meta "kernel=$(uname -r)"
	--meta "nginx=$(nginx -v 2>&1 | sed 's/.*\///')" --meta "haproxy=$(haproxy -v | awk 'NR==1 { print $3 }')"
	--meta "shoal=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	--meta "elapsed_s=$elapsed"
)
for s in "${skipped[@]:-}"; do [ -n "$s" ] && meta+=(--meta "skipped=$s"); done
"$W/report" summarize --runs "$RUNSF" --out "$OUT/latest.json" "${meta[@]}" >"$W/table.md"
"$W/report" plot --in "$OUT/latest.json" --out "$OUT/latest.svg" --out "$OUT/latest.png"
cp "$RUNSF" "$OUT/latest-runs.jsonl"
# The regression guard: this run against the last accepted ones
# (bench/report guard.go); status 3 when a ratio fell below their spread.
guard_rc=0
"$W/report" guard --in "$OUT/latest.json" --history "$OUT/accepted.jsonl" --last "$GUARD_RUNS" >"$W/guard.md" 2>"$W/guard.err" || guard_rc=$?
accepted=""
if [ "$guard_rc" = 0 ] && [ "$ACCEPT" = 1 ]; then
	if "$W/report" accept --in "$OUT/latest.json" --history "$OUT/accepted.jsonl" 2>"$W/accept.err"; then
		accepted="accepted: appended to $OUT/accepted.jsonl"
	else
		accepted="not accepted: $(cat "$W/accept.err")"
	fi
fi
{
	echo "shoal side by side, $date_utc; load average $load_before before, $load_after after ($(nproc) CPUs)"
	echo "RUNS=$RUNS paired rounds × DURATION=$DURATION; core layouts (servers:load) $LAYOUTS; wrk -t1 -c$CONNS (front CPU rows: shoal bench http -c $HANDOFF_CONNS, sizes $HANDOFF_SIZES)"
	echo
	cat "$W/table.md"
	echo
	echo "ratio: shoal ÷ peer req/s per paired round, min / **median** / max; (CPU) rows: relay ÷ handoff front CPU µs per request."
	echo "Above 1 favours shoal. p99 and CPU columns are medians over the rounds; – = not measured."
	echo "verdict: won only when every round of every layout is above 1 (lost: every round below); else within spread."
	dropped=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("meta", {}).get("dropped", ""))' "$OUT/latest.json")
	[ -z "$dropped" ] || echo "Runs left out (errors, stalls): $dropped."
	for s in "${skipped[@]:-}"; do [ -n "$s" ] && echo "skipped: $s"; done
	echo
	echo "Regression guard (against $OUT/accepted.jsonl; a flag below the spread is a prompt to look and rerun):"
	echo
	cat "$W/guard.md"
	[ "$guard_rc" = 0 ] || [ "$guard_rc" = 3 ] || echo "guard failed: $(cat "$W/guard.err")"
	[ -z "$accepted" ] || echo "$accepted"
} >"$OUT/latest.md"
echo
cat "$OUT/latest.md"
echo
echo "wrote $OUT/latest.json, latest.md, latest.svg, latest.png, latest-runs.jsonl; total time ${elapsed}s"
if [ "$guard_rc" = 3 ]; then
	echo "compare: $(cat "$W/guard.err")" >&2
	exit 3
fi
