#!/usr/bin/env bash
# h2-vs-haproxy.sh — HTTP/2 request rate of `shoal front` against HAProxy's
# HTTP/2 front, side by side, over TLS with the same certificate.
#
# Two nginx back-ends (1 worker each, on LOAD_CORE) serve a 1 KB file over
# plain HTTP/1.1. HAProxy 2.6 (nbthread 1, http-reuse always, roundrobin,
# `bind … ssl crt … alpn h2,http/1.1 ssl-min-ver TLSv1.2`) and `shoal front
# --policy rr --tls-cert … --tls-key …` (GOMAXPROCS=1, ALPN h2 and http/1.1)
# each terminate TLS on PROXY_CORE with one ECDSA P-256 self-signed
# certificate made here by openssl, and relay every stream to the nodes over
# pooled HTTP/1.1 connections. h2load (nghttp2-client, on LOAD_CORE) opens
# $CONNS connections with $STREAMS concurrent streams each (-c$CONNS
# -m$STREAMS) and loads one proxy at a time, interleaved (alternating which
# goes first), RUNS times.
#
# Printed: medians of requests/s and mean request time (h2load reports no
# percentiles), and each proxy's CPU time per request (utime+stime from
# /proc/PID/stat over the run ÷ requests, which other load on a shared
# machine moves least), as a Markdown table with shoal/HAProxy ratios.
#
# Usage: bench/h2-vs-haproxy.sh           (from the repo root; builds shoal)
#        bench/compare.sh with ONLY=h2 runs it inside the harness.
# Env:   RUNS=5 DURATION=5s CONNS=16 STREAMS=10 SHOAL=path/to/shoal
#        JSON_OUT=FILE appends one JSON line per round (bench/report)
#        NICE=-10 PROXY_CORE=0 LOAD_CORE=1
set -euo pipefail

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-16}
STREAMS=${STREAMS:-10}
PROXY_CORE=${PROXY_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
NICE=${NICE:--10}
BASE=${PORT_BASE:-$((22000 + (RANDOM % 1000) * 10))}
N1=127.0.0.1:$BASE N2=127.0.0.1:$((BASE + 1)) HAP=127.0.0.1:$((BASE + 2)) SHO=127.0.0.1:$((BASE + 3))

BENCH=h2-vs-haproxy
. "$(dirname "$0")/lib.sh"
bench_need nginx haproxy h2load taskset openssl curl
[ -n "${SHOAL:-}" ] || command -v go >/dev/null || { echo "h2-vs-haproxy: needs Go or SHOAL=path" >&2; exit 1; }
bench_workdir shoal-h2vh
bench_autogroup
bench_stop_services
bench_build_shoal

bench_tls_site

start_nginx 1 "$N1"
start_nginx 2 "$N2"
start_haproxy 8192 "ssl crt $W/haproxy.pem alpn h2,http/1.1 ssl-min-ver TLSv1.2"

bench_tls_front "$SHO" "$N1" "$N2"

for a in $HAP $SHO; do
	v=$(bench_wait_https "$a" --http2)
	[ "$v" = 2 ] || { echo "$BENCH: https://$a answered HTTP/$v, not HTTP/2" >&2; exit 1; }
done

# run ADDR CELL PID → "rps mean_ms cpu_us_per_request errors requests"
run() {
	local out t0 t1 ok fail rps mean
	t0=$(cputicks "$3")
	out=$(nice -n "$NICE" taskset -c "$LOAD_CORE" h2load -c"$CONNS" -m"$STREAMS" -D"$DURATION" "https://$1/1k" 2>&1)
	t1=$(cputicks "$3")
	rps=$(echo "$out" | awk '/^finished in/ {print $4}')
	ok=$(echo "$out" | awk '/^requests:/ {print $8}')
	fail=$(echo "$out" | awk '/^requests:/ {print $10 + $12 + $14}')
	mean=$(echo "$out" | awk '/^time for request:/ {v = $6; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
		if (u == "us") v /= 1000; else if (u == "s") v *= 1000; print v}')
	if [ "${ok:-0}" = 0 ]; then
		echo "$BENCH: no request completed against $1:" >&2
		echo "$out" >&2
		ok=0
	fi
	[ "${fail:-0}" = 0 ] || echo "$BENCH: $fail failed requests against $1" >&2
	echo "${rps:-0} ${mean:-0} $(awk -v d=$((t1 - t0)) -v n="$ok" -v t="$TCK" 'BEGIN {printf "%.1f", n ? d * 1e6 / t / n : 0}') ${fail:-0} $ok"
}

: >"$W/h.h2"
: >"$W/s.h2"
for r in $(seq "$RUNS"); do
	pair_round "$r" h2
	pair_json "shoal front vs HAProxy, HTTP/2 over TLS" 1k "$r" h2
done

echo
echo "shoal front vs HAProxy $(haproxy -v | awk 'NR==1{print $3}') over HTTP/2 + TLS ($(h2load --version 2>/dev/null | awk 'NR==1{print $1, $2}')), same certificate: h2load -c$CONNS -m$STREAMS -D$DURATION https://…/1k, medians of $RUNS interleaved runs; proxies on core $PROXY_CORE, nginx and h2load on core $LOAD_CORE, nice $NICE"
echo
echo "| 1 KB over HTTP/2 | HAProxy req/s | shoal req/s | ratio | HAProxy mean ms | shoal mean ms | HAProxy CPU µs/req | shoal CPU µs/req | CPU ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
pair_table_row "$CONNS connections × $STREAMS streams" h2 | sed 1q
echo
echo "ratio = shoal/HAProxy requests per second (>= 1: shoal at least as fast); CPU ratio = shoal/HAProxy CPU per request (<= 1: shoal cheaper)."
echo "each round (rps mean-ms cpu-us/req errors requests):"
paste "$W/h.h2" "$W/s.h2" | awk '{printf "  round %d: HAProxy %s %s %s | shoal %s %s %s\n", NR, $1, $2, $3, $6, $7, $8}'
