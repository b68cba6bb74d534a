#!/usr/bin/env bash
# front-vs-haproxy.sh — relay speed of `shoal front` against HAProxy, side by side
# (issue 3 "Speed", SPEC §7: compare against a peer in one run, quote ratios).
#
# Two nginx back-ends (1 worker each, pinned to core 1) serve 1 KB, 64 KB and
# 1 MB files. HAProxy 2.6 (nbthread 1, http-reuse always, roundrobin) and
# `shoal front --policy rr` (GOMAXPROCS=1) are each pinned to core 0; wrk
# (-t1 -c64, pinned to core 1) loads one of them at a time, interleaved
# (alternating which goes first), RUNS times per size; the medians of
# requests/s and p99 latency are printed as a Markdown table with
# shoal/HAProxy ratios. Because this machine is shared and noisy, the
# table also gives each proxy's CPU time per request (utime+stime from
# /proc/PID/stat over the run, divided by the requests wrk completed): a
# cost that other load on the machine barely moves.
#
# Usage: bench/front-vs-haproxy.sh            (from the repo root; builds shoal)
# Env:   RUNS=5 DURATION=5s CONNS=64 SHOAL=path/to/shoal SIZES="1k 64k 1m"
#        JSON_OUT=FILE appends one JSON line per round (both proxies, one size)
#        to FILE, the input of bench/report (see bench/compare.sh).
#        NICE=-10 (every process of the benchmark runs at this niceness, to
#        keep other work on a shared machine from skewing one side)
set -euo pipefail

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
SIZES=${SIZES:-"1k 64k 1m"}
PROXY_CORE=${PROXY_CORE:-0}
LOAD_CORE=${LOAD_CORE:-1}
NICE=${NICE:--10}
# Other benchmarks may run on this machine: take a random block of ports.
BASE=${PORT_BASE:-$((20000 + (RANDOM % 2000) * 10))}
N1=127.0.0.1:$BASE N2=127.0.0.1:$((BASE + 1)) HAP=127.0.0.1:$((BASE + 2)) SHO=127.0.0.1:$((BASE + 3))

for t in nginx haproxy wrk taskset go; do
	command -v "$t" >/dev/null || { echo "front-vs-haproxy: $t not found" >&2; exit 1; }
done

W=$(mktemp -d /tmp/shoal-fvh.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	for f in "$W"/nginx*.pid; do [ -f "$f" ] && kill "$(cat "$f" 2>/dev/null)" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

# The Debian services would hold the same cores (and maybe ports).
if command -v service >/dev/null; then
	service nginx stop >/dev/null 2>&1 || true
	service haproxy stop >/dev/null 2>&1 || true
fi

if [ -z "${SHOAL:-}" ]; then
	SHOAL=$W/shoal
	go build -o "$SHOAL" ./cmd/shoal
fi

mkdir -p "$W/www"
head -c 1024 /dev/urandom >"$W/www/1k"
head -c 65536 /dev/urandom >"$W/www/64k"
head -c 1048576 /dev/urandom >"$W/www/1m"
chmod -R a+rX "$W" # nginx workers run as nobody

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
	sendfile on;
	tcp_nopush on;
	keepalive_requests 1000000;
	keepalive_timeout 75s;
	client_body_temp_path $W/tmp$i;
	proxy_temp_path $W/tmp$i;
	fastcgi_temp_path $W/tmp$i;
	uwsgi_temp_path $W/tmp$i;
	scgi_temp_path $W/tmp$i;
	types { application/octet-stream bin; }
	server { listen $addr; root $W/www; }
}
NGX
	nice -n "$NICE" taskset -c "$LOAD_CORE" nginx -c "$W/nginx$i.conf" -p "$W" &
	PIDS+=($!)
done

cat >"$W/haproxy.cfg" <<HAP
global
	nbthread 1
	maxconn 4096
defaults
	mode http
	timeout connect 5s
	timeout client 60s
	timeout server 60s
	option http-keep-alive
	http-reuse always
frontend fe
	bind $HAP
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
	--policy rr --health-interval 0 2>"$W/shoal.err" &
SPID=$!
PIDS+=($SPID)

# Wait until everything answers.
for a in $N1 $N2 $HAP $SHO; do
	for _ in $(seq 100); do
		curl -sf -o /dev/null "http://$a/1k" && break
		sleep 0.1
	done
	curl -sf -o /dev/null "http://$a/1k" || { echo "front-vs-haproxy: $a does not answer" >&2; cat "$W"/*.err >&2; exit 1; }
done

# cputicks PID → utime+stime in clock ticks
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)

# run ADDR SIZE PID → "rps p99ms cpu_us_per_request errors requests"
run() {
	local out rps p99 reqs t0 t1
	t0=$(cputicks "$3")
	out=$(nice -n "$NICE" taskset -c "$LOAD_CORE" wrk -t1 -c"$CONNS" -d"$DURATION" --latency "http://$1/$2")
	t1=$(cputicks "$3")
	if echo "$out" | grep -q "Non-2xx\|Socket errors"; then
		echo "front-vs-haproxy: errors against $1/$2:" >&2
		echo "$out" | grep "Non-2xx\|Socket errors" >&2
	fi
	rps=$(echo "$out" | awk '/Requests\/sec:/ {print $2}')
	reqs=$(echo "$out" | awk '/requests in/ {print $1}')
	p99=$(echo "$out" | awk '$1=="99%" {v=$2; u=v; sub(/[0-9.]+/,"",u); sub(/[a-z]+$/,"",v);
		if (u=="us") v=v/1000; else if (u=="s") v=v*1000; print v}')
	echo "$rps $p99 $(awk -v d=$((t1 - t0)) -v n="$reqs" -v t="$TCK" 'BEGIN {printf "%.1f", d * 1e6 / t / n}') $(echo "$out" |
		awk '/Non-2xx/ {n += $NF} /Socket errors/ {for (i = 3; i <= NF; i++) n += $i} END {print n + 0}') $reqs"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

for size in $SIZES; do
	: >"$W/h.$size"; : >"$W/s.$size"
done
for r in $(seq "$RUNS"); do
	for size in $SIZES; do
		if [ $((r % 2)) = 1 ]; then # alternate who goes first: drift in background load hits both
			run $HAP "$size" $HPID >>"$W/h.$size"
			run $SHO "$size" $SPID >>"$W/s.$size"
		else
			run $SHO "$size" $SPID >>"$W/s.$size"
			run $HAP "$size" $HPID >>"$W/h.$size"
		fi
		if [ -n "${JSON_OUT:-}" ]; then # one JSON line per round for bench/compare.sh (bench/report)
			read -r hr hp hc he hn < <(tail -1 "$W/h.$size")
			read -r sr sp sc se sn < <(tail -1 "$W/s.$size")
			printf '{"comparison":"shoal front vs HAProxy","size":"%s","run":%d,"metric":"rps","peer":{"name":"HAProxy","rps":%s,"p99_ms":%s,"cpu_us":%s,"errors":%s,"requests":%s},"shoal":{"name":"shoal front","rps":%s,"p99_ms":%s,"cpu_us":%s,"errors":%s,"requests":%s}}\n' \
				"$size" "$r" "$hr" "$hp" "$hc" "$he" "$hn" "$sr" "$sp" "$sc" "$se" "$sn" >>"$JSON_OUT"
		fi
		echo "run $r/$RUNS $size: haproxy $(tail -1 "$W/h.$size")  shoal $(tail -1 "$W/s.$size")  (rps p99ms cpu-us/req errors requests)" >&2
	done
done

echo
echo "shoal front vs HAProxy $(haproxy -v | awk 'NR==1{print $3}'): wrk -t1 -c$CONNS -d$DURATION, medians of $RUNS interleaved runs; proxies on core $PROXY_CORE, nginx and wrk on core $LOAD_CORE, nice $NICE"
echo
echo "| size | HAProxy req/s | shoal req/s | ratio | HAProxy p99 ms | shoal p99 ms | HAProxy CPU µs/req | shoal CPU µs/req | CPU ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for size in $SIZES; do
	hr=$(awk '{print $1}' "$W/h.$size" | median); sr=$(awk '{print $1}' "$W/s.$size" | median)
	hp=$(awk '{print $2}' "$W/h.$size" | median); sp=$(awk '{print $2}' "$W/s.$size" | median)
	hc=$(awk '{print $3}' "$W/h.$size" | median); sc=$(awk '{print $3}' "$W/s.$size" | median)
	printf "| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f |\n" "$size" "$hr" "$sr" \
		"$(echo "$sr $hr" | awk '{print $1/$2}')" "$hp" "$sp" "$hc" "$sc" "$(echo "$sc $hc" | awk '{print $1/$2}')"
done
echo
echo "ratio = shoal/HAProxy requests per second (>= 1 means shoal is at least as fast); CPU ratio = shoal/HAProxy CPU per request (<= 1 means shoal is cheaper)."
