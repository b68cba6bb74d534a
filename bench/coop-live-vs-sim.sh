#!/usr/bin/env bash
# coop-live-vs-sim.sh — the same trace through a live 4-node `shoal up`
# (relay, weblins, peer fetch on) and through `shoal sim` with the same cache
# size and replacement policy (issue 16, "Simulator and live agree"). For
# each cache policy it prints one Markdown row per side: miss ratio
# (requests whose object was read from a disk: local misses, owners' misses
# and files above 500 KiB) and internal bytes per request (objects moved
# between nodes' memories).
#
# Usage: flock /work/bench.lock bench/coop-live-vs-sim.sh
# Env:   TRACE=path (default the NASA day in ../shared/data/traces),
#        CACHES="gdsf cgdsf", CACHE_MB=2, NODES=4, CONNS=8, POLICY=weblins,
#        SHOAL_BIN=path (default: go build).
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE=${TRACE:-../shared/data/traces/nasa_aug95_19950801_fullday_derived.log.gz}
CACHES=${CACHES:-"gdsf cgdsf"}
CACHE_MB=${CACHE_MB:-2}
NODES=${NODES:-4}
CONNS=${CONNS:-8}
POLICY=${POLICY:-weblins}
BIN=${SHOAL_BIN:-}
if [ -z "$BIN" ]; then
	BIN=$(mktemp -d)/shoal
	go build -o "$BIN" ./cmd/shoal
fi
WORK=$(mktemp -d)
trap 'kill $UP 2>/dev/null || true; rm -rf "$WORK"' EXIT
PORT=18380
ADMIN=19390

# Requests for files above the nodes' 500 KiB cache threshold (always disk).
big=$(python3 - "$TRACE" <<'EOF'
import gzip, sys, re
sizes, urls = {}, []
for line in gzip.open(sys.argv[1], 'rt', errors='replace'):
    m = re.search(r'"[A-Z]+ (\S+)[^"]*" (\d{3}) (\d+|-)', line)
    if not m:
        continue
    u, st, sz = m.group(1), m.group(2), m.group(3)
    if st == '200' and sz != '-':
        sizes[u] = max(sizes.get(u, 0), int(sz))
    urls.append(u)
print(sum(1 for u in urls if sizes.get(u, 0) > 500 * 1024))
EOF
)

echo "| side | cache | requests (2xx) | miss ratio | internal B/request |"
echo "|---|---|---:|---:|---:|"
for cache in $CACHES; do
	"$BIN" sim --trace "$TRACE" --policies "$POLICY" --nodes "$NODES" --cache-mb "$CACHE_MB" --cache "$cache" --json 2>/dev/null |
		jq -r --arg c "$cache" '.[0] | "| sim | \($c) | \(.requests) | \(.miss_ratio*1000|round/1000) | \(.internal_bytes_per_request|round) |"'

	"$BIN" up --listen 127.0.0.1:$PORT --admin 127.0.0.1:$ADMIN --data "$WORK/$cache" --nodes "$NODES" \
		--cache-mb "$CACHE_MB" --cache "$cache" --policy "$POLICY" --site-from-trace "$TRACE" >"$WORK/up-$cache.log" 2>&1 &
	UP=$!
	for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$PORT/" && break || sleep 0.2; done
	sleep 2 # health checks mark every node up
	"$BIN" bench http --url "http://127.0.0.1:$PORT" --trace "$TRACE" --connections "$CONNS" --keepalive=false \
		--timeout 30s --json >"$WORK/bench-$cache.json"
	sleep 1
	tok=$(cat "$WORK/$cache/admin.token")
	nodes=$(curl -fs -H "Authorization: Bearer $tok" "http://127.0.0.1:$ADMIN/nodes" | jq -r '.[].url')
	: >"$WORK/status-$cache.json"
	for u in $nodes; do curl -fs "$u/.shoal/status" >>"$WORK/status-$cache.json"; done
	kill $UP; wait $UP 2>/dev/null || true
	jq -s -r --arg c "$cache" --argjson big "$big" --slurpfile b "$WORK/bench-$cache.json" '
		($b[0].ok) as $r
		| (map(.cache_misses) | add) as $miss
		| (map(.peer.fetches + .peer.collapsed) | add) as $fetched
		| (map(.peer.fetch_bytes) | add) as $ib
		| "| live | \($c) | \($r) | \((($miss - $fetched + $big) / $r)*1000|round/1000) | \(($ib / $r)|round) |"' \
		"$WORK/status-$cache.json"
done
