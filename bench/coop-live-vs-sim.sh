#!/usr/bin/env bash
# coop-live-vs-sim.sh — the same trace through a live 4-node `shoal up`
# (relay, peer fetch and cache digests on) and through `shoal sim` with the
# same cache size and replacement policy (issue 16, "Simulator and live
# agree"), for every distribution policy × node cache policy. It prints one
# Markdown row per pair with both sides and the relative difference:
#   hit ratio       requests not read from a disk (local misses, owners'
#                   misses and files above 500 KiB are disk reads; a fetch
#                   from a peer's memory is a hit);
#   byte hit ratio  file bytes answered from a memory / all file bytes
#                   (live: the nodes' memory_bytes / object_bytes);
#   internal B/req  object bytes moved between the nodes' memories per
#                   request (live: the peer fetches' bytes; sim:
#                   fetch_bytes_per_request, i.e. internal_bytes_per_request
#                   without the 156 B location query and reply it charges
#                   weblins per request, seed 000 §3.2, which the live front,
#                   deciding itself, does not send).
# Raw per-run files are kept in OUT (default a temporary directory, printed).
#
# Usage: flock /work/bench.lock bench/coop-live-vs-sim.sh
# Env:   TRACE=path (default the NASA day in ../shared/data/traces),
#        POLICIES="weblins lard wrr", CACHES="lru gdsf cgdsf", CACHE_MB=2,
#        NODES=4, CONNS=8 (the live replay's connections; the simulator
#        keeps as many requests in the system, --per-node CONNS/NODES,
#        instead of LARD's admission bound of 219 at 4 nodes), PACE=sim (the live replay runs open loop at the
#        simulated throughput of the same configuration, so wall time on
#        the live cluster is the simulator's virtual time: as many requests
#        per popular-set period (5 s) and per digest period (2 s); PACE=none
#        replays closed loop, as fast as the cluster answers),
#        SIM_ARGS="--popular-n 100" (extra `shoal sim` flags; 100 files is
#        the live front's weblins popular set; add "--gdsf-cost disk
#        --digest-period -1s" for the simulator's pre-issue-16 cgdsf model),
#        UP_ARGS="" (extra `shoal up` flags, e.g. "--digest-period 100ms"),
#        OUT=dir, SHOAL_BIN=path (default: go build).
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE=${TRACE:-../shared/data/traces/nasa_aug95_19950801_fullday_derived.log.gz}
POLICIES=${POLICIES:-"weblins lard wrr"}
CACHES=${CACHES:-"lru gdsf cgdsf"}
CACHE_MB=${CACHE_MB:-2}
NODES=${NODES:-4}
CONNS=${CONNS:-8}
PER_NODE=$((CONNS / NODES))
if [ "$PER_NODE" -lt 1 ] || [ $((PER_NODE * NODES)) -ne "$CONNS" ]; then
	echo "CONNS=$CONNS must be a multiple of NODES=$NODES" >&2
	exit 2
fi
SIM_ARGS=${SIM_ARGS:---popular-n 100}
PACE=${PACE:-sim}
UP_ARGS=${UP_ARGS:-}
BIN=${SHOAL_BIN:-}
if [ -z "$BIN" ]; then
	BIN=$(mktemp -d)/shoal
	go build -o "$BIN" ./cmd/shoal
fi
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "raw results in $OUT" >&2
UP=
trap 'if [ -n "$UP" ]; then kill $UP 2>/dev/null || true; fi' EXIT
PORT=18380
ADMIN=19390

# Both sides replay the same records: the trace less those the simulator
# cannot replay (no 200 answer with a size in the whole log: 404s, 302s to
# a directory, 304-only URLs), less URLs with a query (the generated site
# has one file per path, the simulator one object per URL), less records
# whose path lies under another requested file (the NASA day's 3 requests
# for "/ksc.html/" would make /ksc.html a directory of the generated site
# and turn its 1,425 requests into redirects). big counts the requests for
# files above the nodes' 500 KiB cache threshold (always read from disk).
FILTERED=$OUT/trace.log
big=$(python3 - "$TRACE" "$FILTERED" <<'EOF'
import gzip, sys, re, posixpath
from urllib.parse import unquote
rx = re.compile(r'"[A-Z]+ (\S+)[^"]*" (\d{3}) (\d+|-)')
lines, sizes = [], {}
for line in gzip.open(sys.argv[1], 'rt', errors='replace'):
    m = rx.search(line)
    if not m:
        continue
    u, st, sz = m.group(1), m.group(2), m.group(3)
    lines.append((line, u))
    if st == '200' and sz != '-':
        sizes[u] = max(sizes.get(u, 0), int(sz))
def file_of(u):
    p = unquote(u)
    return posixpath.normpath(p + 'index.html' if p.endswith('/') else p)
files = {file_of(u) for u in sizes if '?' not in u}
def under_file(f):
    d = posixpath.dirname(f)
    while d not in ('/', '', '//'):  # normpath keeps a leading '//'
        if d in files:
            return True
        d = posixpath.dirname(d)
    return False
kept = big = 0
with open(sys.argv[2], 'w') as out:
    for line, u in lines:
        if u not in sizes or '?' in u or under_file(file_of(u)):
            continue
        out.write(line)
        kept += 1
        big += sizes[u] > 500 * 1024
print(big)
print(f"{kept} of {len(lines)} records replayed on both sides", file=sys.stderr)
EOF
)
TRACE=$FILTERED

echo "| policy | cache | hit ratio sim | live | Δ | byte hit ratio sim | live | Δ | internal B/req sim | live | Δ | requests/s sim / live |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for pol in $POLICIES; do
	for cache in $CACHES; do
		run=$pol-$cache
		# shellcheck disable=SC2086
		"$BIN" sim --trace "$TRACE" --policies "$pol" --nodes "$NODES" --cache-mb "$CACHE_MB" --cache "$cache" --per-node "$PER_NODE" $SIM_ARGS \
			--json 2>/dev/null | jq '.[0]' >"$OUT/sim-$run.json"

		rm -rf "$OUT/data-$run"
		# shellcheck disable=SC2086
		"$BIN" up --listen 127.0.0.1:$PORT --admin 127.0.0.1:$ADMIN --data "$OUT/data-$run" --nodes "$NODES" \
			--cache-mb "$CACHE_MB" --cache "$cache" --policy "$pol" --site-from-trace "$TRACE" $UP_ARGS >"$OUT/up-$run.log" 2>&1 &
		UP=$!
		for _ in $(seq 150); do curl -fs -o /dev/null "http://127.0.0.1:$PORT/" && break || sleep 0.2; done
		sleep 2 # health checks mark every node up
		rate=0
		if [ "$PACE" = sim ]; then
			rate=$(jq '.throughput_rps' "$OUT/sim-$run.json")
		fi
		"$BIN" bench http --url "http://127.0.0.1:$PORT" --trace "$TRACE" --connections "$CONNS" --keepalive=false \
			--rate "$rate" --timeout 30s --json >"$OUT/bench-$run.json"
		sleep 1
		tok=$(cat "$OUT/data-$run/admin.token")
		nodes=$(curl -fs -H "Authorization: Bearer $tok" "http://127.0.0.1:$ADMIN/nodes" | jq -r '.[].url')
		: >"$OUT/status-$run.json"
		for u in $nodes; do curl -fs "$u/.shoal/status" >>"$OUT/status-$run.json"; done
		kill $UP
		wait $UP 2>/dev/null || true
		UP=
		rm -rf "$OUT/data-$run"/trace-* # the generated site (the trace's files), not needed after the run

		jq -s -r --arg p "$pol" --arg c "$cache" --argjson big "$big" \
			--slurpfile b "$OUT/bench-$run.json" --slurpfile s "$OUT/sim-$run.json" '
			def r3: . * 1000 | round / 1000;
			def rel(a; b): if a == 0 then "–" else ((b - a) / a * 100 | round | tostring) + " %" end;
			($b[0].ok) as $r
			| (map(.cache_misses) | add) as $miss
			| (map((.peer.fetches // 0) + (.peer.collapsed // 0)) | add) as $fetched
			| (map(.peer.fetch_bytes // 0) | add) as $ib
			| (1 - ($miss - $fetched + $big) / $r) as $hit
			| ((map(.memory_bytes) | add) / (map(.object_bytes) | add)) as $bhit
			| $s[0] as $sim
			| "| \($p) | \($c) | \($sim.hit_ratio | r3) | \($hit | r3) | \(rel($sim.hit_ratio; $hit)) | \($sim.byte_hit_ratio | r3) | \($bhit | r3) | \(rel($sim.byte_hit_ratio; $bhit)) | \($sim.fetch_bytes_per_request | round) | \(($ib / $r) | round) | \(rel($sim.fetch_bytes_per_request; $ib / $r)) | \($sim.throughput_rps | round) / \($b[0].rps | round) |"' \
			"$OUT/status-$run.json"
	done
done
