#!/usr/bin/env bash
# node-vs-nginx.sh — requests/s of `shoal node` against nginx serving the same
# static files (issue 2, "Speed"). Both servers run on one core (taskset, core
# SERVER_CPU): nginx with 1 worker, sendfile on, access_log off; shoal with
# GOMAXPROCS=1. wrk -t1 -c64 runs on another core (CLIENT_CPU). Runs alternate
# nginx/shoal RUNS times per file size; the table shows medians.
#
# Usage: bench/node-vs-nginx.sh            (from anywhere in the repo)
# Env:   RUNS=5 DUR=5s CONNS=64 SIZES="1k 64k 1m" SERVER_CPU=0 CLIENT_CPU=1 NICE=-15
#        NGINX_OPEN_FILE_CACHE=1 also turns on nginx's open_file_cache.
#        SHOAL_BIN=path uses a prebuilt shoal binary instead of go build.
#        JSON_OUT=FILE appends one JSON line per round (both servers, one
#        size) to FILE, the input of bench/report (see bench/compare.sh).
# Installs nginx and wrk with apt-get when missing. Prints a Markdown table.
set -euo pipefail

RUNS=${RUNS:-5}
DUR=${DUR:-5s}
CONNS=${CONNS:-64}
SIZES=${SIZES:-"1k 64k 1m"}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
# NICE raises the priority of both servers and wrk (as root) so that other
# work on the machine disturbs the comparison less; it is the same for both.
NICE=${NICE:--15}
nice_cmd=()
if [ "$(id -u)" = 0 ] && [ "$NICE" != 0 ]; then nice_cmd=(nice -n "$NICE"); fi

need() {
	if ! command -v "$1" >/dev/null 2>&1; then
		echo "installing $2 ..." >&2
		apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >&2
	fi
}
need nginx nginx
need wrk wrk
need taskset util-linux
NGINX=$(command -v nginx)

cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/shoal-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "server on port $1 did not start" >&2
	return 1
}

mkdir -p "$work/site" "$work/nginx"
chmod 755 "$work" "$work/site" # nginx workers run as an unprivileged user
head -c 1024 /dev/urandom >"$work/site/1k.bin"
head -c 65536 /dev/urandom >"$work/site/64k.bin"
head -c 1048576 /dev/urandom >"$work/site/1m.bin"
chmod 644 "$work"/site/*

if [ -n "${SHOAL_BIN:-}" ]; then
	cp "$SHOAL_BIN" "$work/shoal"
else
	echo "building shoal ..." >&2
	go build -o "$work/shoal" ./cmd/shoal
fi

nport=$(free_port)
ofc=""
if [ "${NGINX_OPEN_FILE_CACHE:-0}" = 1 ]; then ofc="open_file_cache max=1000 inactive=60s;"; fi
cat >"$work/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    keepalive_requests 100000000;
    default_type application/octet-stream;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    $ofc
    server {
        listen 127.0.0.1:$nport;
        root $work/site;
    }
}
CONF
"${nice_cmd[@]}" taskset -c "$SERVER_CPU" "$NGINX" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" 2>"$work/nginx/stderr" &
pids+=($!)
npid=$!

sport=$(free_port)
GOMAXPROCS=1 "${nice_cmd[@]}" taskset -c "$SERVER_CPU" "$work/shoal" node --root "$work/site" --listen "127.0.0.1:$sport" \
	--cache-mb 64 --cache lru 2>"$work/shoal.log" &
pids+=($!)
spid=$!
wait_port "$nport"
wait_port "$sport"

# cputicks PID -> utime+stime of PID and its children (nginx's worker), in clock ticks
cputicks() {
	local p t=0
	for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
HZ=$(getconf CLK_TCK)

# run PORT FILE PID -> "rps p99_us cpu_us_per_request errors requests" (CPU of the server PID)
run() {
	local t0 t1 out
	t0=$(cputicks "$3")
	out=$("${nice_cmd[@]}" taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"$DUR" --latency "http://127.0.0.1:$1/$2" 2>&1)
	t1=$(cputicks "$3")
	echo "$out" | awk -v ticks=$((t1 - t0)) -v hz="$HZ" '
		/ requests in / { n = $1 }
		/Requests\/sec:/ { rps = $2 }
		/^ +99%/ { v = $2; u = v; sub(/[a-z]+$/, "", v); sub(/^[0-9.]+/, "", u);
		           m = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1000000 : 1; p99 = v * m }
		/Non-2xx|Socket errors/ { print "wrk: " $0 > "/dev/stderr" }
		/Non-2xx/ { e += $NF }
		/Socket errors/ { for (i = 3; i <= NF; i++) e += $i }
		END { printf "%.0f %.0f %.1f %d %d\n", rps, p99, (n > 0) ? ticks * 1e6 / hz / n : 0, e, n }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

fmt_us() { awk -v v="$1" 'BEGIN { if (v >= 1000) printf "%.2f ms", v / 1000; else printf "%d µs", v }'; }

# shoal/nginx is the ratio of the medians; "paired" is the median of the
# per-round ratios (each round runs both servers back to back), which is
# steadier when other work on the machine comes and goes.
echo "| file | nginx req/s | shoal req/s | shoal/nginx | paired ratio | nginx p99 | shoal p99 |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for size in $SIZES; do
	f="$size.bin"
	run "$nport" "$f" "$npid" >/dev/null # warm-up (page cache, shoal's cache)
	run "$sport" "$f" "$spid" >/dev/null
	: >"$work/n.txt"
	: >"$work/s.txt"
	: >"$work/r.txt"
	for i in $(seq "$RUNS"); do
		if [ $((i % 2)) = 1 ]; then
			run "$nport" "$f" "$npid" >>"$work/n.txt"
			run "$sport" "$f" "$spid" >>"$work/s.txt"
		else
			run "$sport" "$f" "$spid" >>"$work/s.txt"
			run "$nport" "$f" "$npid" >>"$work/n.txt"
		fi
		paste -d' ' <(tail -1 "$work/s.txt") <(tail -1 "$work/n.txt") |
			awk '{ printf "%.4f\n", ($6 > 0) ? $1 / $6 : 0 }' >>"$work/r.txt"
		if [ -n "${JSON_OUT:-}" ]; then # one JSON line per round for bench/compare.sh (bench/report)
			paste -d' ' <(tail -1 "$work/n.txt") <(tail -1 "$work/s.txt") | awk -v size="$size" -v run="$i" '{
				printf "{\"comparison\":\"shoal node vs nginx\",\"size\":\"%s\",\"run\":%d,\"metric\":\"rps\",", size, run
				printf "\"peer\":{\"name\":\"nginx\",\"rps\":%s,\"p99_ms\":%.3f,\"cpu_us\":%s,\"errors\":%d,\"requests\":%d},", $1, $2 / 1000, $3, $4, $5
				printf "\"shoal\":{\"name\":\"shoal node\",\"rps\":%s,\"p99_ms\":%.3f,\"cpu_us\":%s,\"errors\":%d,\"requests\":%d}}\n", $6, $7 / 1000, $8, $9, $10 }' >>"$JSON_OUT"
		fi
		echo "  $size run $i: nginx $(tail -1 "$work/n.txt")  shoal $(tail -1 "$work/s.txt")  (rps p99_us cpu_us/req errors requests)" >&2
	done
	nr=$(cut -d' ' -f1 "$work/n.txt" | median)
	sr=$(cut -d' ' -f1 "$work/s.txt" | median)
	np=$(cut -d' ' -f2 "$work/n.txt" | median)
	sp=$(cut -d' ' -f2 "$work/s.txt" | median)
	ratio=$(awk -v a="$sr" -v b="$nr" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
	paired=$(median <"$work/r.txt" | awk '{ printf "%.2f", $1 }')
	echo "| $size | $nr | $sr | $ratio | $paired | $(fmt_us "$np") | $(fmt_us "$sp") |"
done
