#!/usr/bin/env bash
# tls-vs-haproxy.sh — HTTPS request rate of `shoal front` against HAProxy,
# side by side, with the same certificate (issue 14 "HTTPS").
#
# Two nginx back-ends (1 worker each, on core 1) serve a 1 KB file over plain
# HTTP. HAProxy 2.6 (nbthread 1, http-reuse always, roundrobin, `bind … ssl
# crt … alpn http/1.1 ssl-min-ver TLSv1.2`) and `shoal front --policy rr
# --tls-cert … --tls-key …` (GOMAXPROCS=1) each terminate TLS on core 0 with
# one ECDSA P-256 self-signed certificate made here by openssl. wrk (-t1,
# core 1; OpenSSL) loads one proxy at a time, interleaved (alternating which
# goes first), RUNS times per mode:
#
#   keepalive  -c$CONNS persistent connections: the cost of TLS records
#   close      -c$CONNS, "Connection: close" on every request: a new TCP
#              connection and a full TLS handshake per request (wrk 4.1 does
#              not resume sessions; the script prints HAProxy's session
#              reuse percentage to show it)
#
# wrk runs with --timeout 10s, so that slow handshakes on a loaded machine
# count as latency rather than vanish as timeouts. Printed: medians of
# requests/s and p99 latency, and each proxy's CPU time
# per request (utime+stime from /proc/PID/stat over the run ÷ requests), as a
# Markdown table with shoal/HAProxy ratios.
#
# Usage: bench/tls-vs-haproxy.sh            (from the repo root; builds shoal)
#        bench/compare.sh with ONLY=tls runs it inside the harness.
# Env:   RUNS=5 DURATION=5s CONNS=64 SHOAL=path/to/shoal MODES="keepalive close"
#        JSON_OUT=FILE appends one JSON line per round and mode (bench/report)
#        NICE=-10 PROXY_CORE=0 LOAD_CORE=1
set -euo pipefail

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
MODES=${MODES:-"keepalive close"}
PROXY_CORE=${PROXY_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
NICE=${NICE:--10}
# Below the ephemeral range (32768+), where a client port may hold the address.
BASE=${PORT_BASE:-$((22000 + (RANDOM % 1000) * 10))}
N1=127.0.0.1:$BASE N2=127.0.0.1:$((BASE + 1)) HAP=127.0.0.1:$((BASE + 2)) SHO=127.0.0.1:$((BASE + 3))

BENCH=tls-vs-haproxy
. "$(dirname "$0")/lib.sh"
bench_need nginx haproxy wrk taskset openssl curl python3
[ -n "${SHOAL:-}" ] || command -v go >/dev/null || { echo "tls-vs-haproxy: needs Go or SHOAL=path" >&2; exit 1; }
bench_workdir shoal-tvh
bench_autogroup
bench_stop_services
bench_build_shoal

bench_tls_site

start_nginx 1 "$N1"
start_nginx 2 "$N2"
start_haproxy 8192 "ssl crt $W/haproxy.pem alpn http/1.1 ssl-min-ver TLSv1.2" "stats socket $W/haproxy.sock mode 600 level admin"

bench_tls_front "$SHO" "$N1" "$N2"

for a in $HAP $SHO; do bench_wait_https "$a" >/dev/null; done

# run ADDR MODE PID → "rps p99ms cpu_us_per_request errors requests"
run() {
	local out t0 t1 hdr=()
	[ "$2" = close ] && hdr=(-H "Connection: close")
	t0=$(cputicks "$3")
	out=$(nice -n "$NICE" taskset -c "$LOAD_CORE" wrk -t1 -c"$CONNS" -d"$DURATION" --timeout 10s --latency "${hdr[@]}" "https://$1/1k")
	t1=$(cputicks "$3")
	wrk_summary "$out" "$t0" "$t1" "$1 ($2)"
}

hapinfo() {
	python3 - "$W/haproxy.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"show info\n")
out = b""
while True:
    b = s.recv(65536)
    if not b: break
    out += b
for line in out.decode().splitlines():
    if line.startswith(sys.argv[2] + ":"): print(line.split(":", 1)[1].strip())
PY
}

for m in $MODES; do : >"$W/h.$m"; : >"$W/s.$m"; done
for r in $(seq "$RUNS"); do
	for m in $MODES; do
		pair_round "$r" "$m"
		pair_json "shoal front vs HAProxy, TLS $([ "$m" = close ] && echo "new connections" || echo "keep-alive")" 1k "$r" "$m"
	done
done
reuse=$(hapinfo SslFrontendSessionReuse_pct || echo "?")

echo
echo "shoal front vs HAProxy $(haproxy -v | awk 'NR==1{print $3}') over TLS ($(openssl version | awk '{print $1, $2}'), ECDSA P-256, same certificate): wrk -t1 -c$CONNS -d$DURATION https://…/1k, medians of $RUNS interleaved runs; proxies on core $PROXY_CORE, nginx and wrk on core $LOAD_CORE, nice $NICE; HAProxy's TLS session reuse ${reuse}%"
echo
pair_table_header "1 KB over TLS"
for m in $MODES; do
	pair_table_row "$([ "$m" = close ] && echo "new connection per request" || echo "keep-alive")" "$m"
done
echo
echo "ratio = shoal/HAProxy requests per second (>= 1: shoal at least as fast); CPU ratio = shoal/HAProxy CPU per request (<= 1: shoal cheaper)."
