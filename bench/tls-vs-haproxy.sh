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

for t in nginx haproxy wrk taskset openssl curl python3; do
	command -v "$t" >/dev/null || { echo "tls-vs-haproxy: $t not found" >&2; exit 1; }
done
[ -n "${SHOAL:-}" ] || command -v go >/dev/null || { echo "tls-vs-haproxy: needs Go or SHOAL=path" >&2; exit 1; }

W=$(mktemp -d /tmp/shoal-tvh.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	for f in "$W"/nginx*.pid; do [ -f "$f" ] && kill "$(cat "$f" 2>/dev/null)" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

if command -v service >/dev/null; then
	service nginx stop >/dev/null 2>&1 || true
	service haproxy stop >/dev/null 2>&1 || true
fi

if [ -z "${SHOAL:-}" ]; then
	SHOAL=$W/shoal
	go build -o "$SHOAL" ./cmd/shoal
fi

# One certificate for both: ECDSA P-256, SANs localhost and 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
	-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$W/key.pem" -out "$W/cert.pem" 2>/dev/null
chmod 600 "$W/key.pem"
cat "$W/cert.pem" "$W/key.pem" >"$W/haproxy.pem"

mkdir -p "$W/www"
head -c 1024 /dev/urandom >"$W/www/1k"
chmod -R a+rX "$W/www"
chmod a+x "$W"

for i in 1 2; do
	addr=$([ $i = 1 ] && echo $N1 || echo $N2)
	cat >"$W/nginx$i.conf" <<NGX
worker_processes 1;
daemon off;
pid $W/nginx$i.pid;
error_log $W/nginx$i.err warn;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	keepalive_timeout 75s;
	client_body_temp_path $W/tmp$i;
	proxy_temp_path $W/tmp$i;
	fastcgi_temp_path $W/tmp$i;
	uwsgi_temp_path $W/tmp$i;
	scgi_temp_path $W/tmp$i;
	server { listen $addr; root $W/www; }
}
NGX
	nice -n "$NICE" taskset -c "$LOAD_CORE" nginx -c "$W/nginx$i.conf" -p "$W" &
	PIDS+=($!)
done

cat >"$W/haproxy.cfg" <<HAP
global
	nbthread 1
	maxconn 8192
	stats socket $W/haproxy.sock mode 600 level admin
defaults
	mode http
	timeout connect 5s
	timeout client 60s
	timeout server 60s
	option http-keep-alive
	http-reuse always
frontend fe
	bind $HAP ssl crt $W/haproxy.pem alpn http/1.1 ssl-min-ver TLSv1.2
	default_backend be
backend be
	balance roundrobin
	server n1 $N1
	server n2 $N2
HAP
nice -n "$NICE" taskset -c "$PROXY_CORE" haproxy -db -f "$W/haproxy.cfg" &
HPID=$!
PIDS+=($HPID)

GOMAXPROCS=1 nice -n "$NICE" taskset -c "$PROXY_CORE" "$SHOAL" front --listen "$SHO" --nodes "http://$N1,http://$N2" \
	--policy rr --health-interval 0 --max-conns-per-ip -1 --tls-cert "$W/cert.pem" --tls-key "$W/key.pem" 2>"$W/shoal.err" &
SPID=$!
PIDS+=($SPID)

for a in $HAP $SHO; do
	for _ in $(seq 100); do
		curl -sfk -o /dev/null "https://$a/1k" && break
		sleep 0.1
	done
	curl -sf --cacert "$W/cert.pem" -o /dev/null "https://$a/1k" ||
		{ echo "tls-vs-haproxy: https://$a does not answer with the certificate" >&2; cat "$W"/*.err >&2; exit 1; }
done

cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)

# run ADDR MODE PID → "rps p99ms cpu_us_per_request errors requests"
run() {
	local out rps p99 reqs t0 t1 hdr=()
	[ "$2" = close ] && hdr=(-H "Connection: close")
	t0=$(cputicks "$3")
	out=$(nice -n "$NICE" taskset -c "$LOAD_CORE" wrk -t1 -c"$CONNS" -d"$DURATION" --timeout 10s --latency "${hdr[@]}" "https://$1/1k")
	t1=$(cputicks "$3")
	if echo "$out" | grep -q "Non-2xx\|Socket errors"; then
		echo "tls-vs-haproxy: errors against $1 ($2):" >&2
		echo "$out" | grep "Non-2xx\|Socket errors" >&2
	fi
	rps=$(echo "$out" | awk '/Requests\/sec:/ {print $2}')
	reqs=$(echo "$out" | awk '/requests in/ {print $1}')
	if [ "${reqs:-0}" = 0 ]; then
		echo "tls-vs-haproxy: no request completed against $1 ($2):" >&2
		echo "$out" >&2
		reqs=0
	fi
	p99=$(echo "$out" | awk '$1=="99%" {v=$2; u=v; sub(/[0-9.]+/,"",u); sub(/[a-z]+$/,"",v);
		if (u=="us") v=v/1000; else if (u=="s") v=v*1000; print v}')
	echo "$rps $p99 $(awk -v d=$((t1 - t0)) -v n="$reqs" -v t="$TCK" 'BEGIN {printf "%.1f", n ? d * 1e6 / t / n : 0}') $(echo "$out" |
		awk '/Non-2xx/ {n += $NF} /Socket errors/ {for (i = 3; i <= NF; i++) n += $i} END {print n + 0}') $reqs"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
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
		if [ $((r % 2)) = 1 ]; then
			run $HAP "$m" $HPID >>"$W/h.$m"
			run $SHO "$m" $SPID >>"$W/s.$m"
		else
			run $SHO "$m" $SPID >>"$W/s.$m"
			run $HAP "$m" $HPID >>"$W/h.$m"
		fi
		if [ -n "${JSON_OUT:-}" ]; then
			read -r hr hp hc he hn < <(tail -1 "$W/h.$m")
			read -r sr sp sc se sn < <(tail -1 "$W/s.$m")
			label=$([ "$m" = close ] && echo "new connections" || echo "keep-alive")
			printf '{"comparison":"shoal front vs HAProxy, TLS %s","size":"1k","run":%d,"metric":"rps","peer":{"name":"HAProxy","rps":%s,"p99_ms":%s,"cpu_us":%s,"errors":%s,"requests":%s},"shoal":{"name":"shoal front","rps":%s,"p99_ms":%s,"cpu_us":%s,"errors":%s,"requests":%s}}\n' \
				"$label" "$r" "$hr" "$hp" "$hc" "$he" "$hn" "$sr" "$sp" "$sc" "$se" "$sn" >>"$JSON_OUT"
		fi
		echo "run $r/$RUNS $m: haproxy $(tail -1 "$W/h.$m")  shoal $(tail -1 "$W/s.$m")  (rps p99ms cpu-us/req errors requests)" >&2
	done
done
reuse=$(hapinfo SslFrontendSessionReuse_pct || echo "?")

echo
echo "shoal front vs HAProxy $(haproxy -v | awk 'NR==1{print $3}') over TLS ($(openssl version | awk '{print $1, $2}'), ECDSA P-256, same certificate): wrk -t1 -c$CONNS -d$DURATION https://…/1k, medians of $RUNS interleaved runs; proxies on core $PROXY_CORE, nginx and wrk on core $LOAD_CORE, nice $NICE; HAProxy's TLS session reuse ${reuse}%"
echo
echo "| 1 KB over TLS | HAProxy req/s | shoal req/s | ratio | HAProxy p99 ms | shoal p99 ms | HAProxy CPU µs/req | shoal CPU µs/req | CPU ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for m in $MODES; do
	hr=$(awk '{print $1}' "$W/h.$m" | median); sr=$(awk '{print $1}' "$W/s.$m" | median)
	hp=$(awk '{print $2}' "$W/h.$m" | median); sp=$(awk '{print $2}' "$W/s.$m" | median)
	hc=$(awk '{print $3}' "$W/h.$m" | median); sc=$(awk '{print $3}' "$W/s.$m" | median)
	label=$([ "$m" = close ] && echo "new connection per request" || echo "keep-alive")
	printf "| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f |\n" "$label" "$hr" "$sr" \
		"$(echo "$sr $hr" | awk '{print $1/$2}')" "$hp" "$sp" "$hc" "$sc" "$(echo "$sc $hc" | awk '{print $1/$2}')"
done
echo
echo "ratio = shoal/HAProxy requests per second (>= 1: shoal at least as fast); CPU ratio = shoal/HAProxy CPU per request (<= 1: shoal cheaper)."
