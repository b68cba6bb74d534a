#!/usr/bin/env bash
# loadgen-vs-wrk.sh — is `shoal bench http` fast enough not to be the
# bottleneck? (issue 5, SPEC §7)
#
# nginx (1 worker, pinned to core 0, access log off, keep-alive without a
# request cap — as fast as it gets, which makes the test strict) serves a
# 1 KB file on loopback. wrk -t1 -c64 and `shoal bench http` with 64
# connections and GOMAXPROCS=1 each run pinned to core 1, interleaved RUNS
# times; the script prints every run, the medians and the ratio
# shoal/wrk. Target: ratio ≥ 0.90.
#
# Usage: bench/loadgen-vs-wrk.sh            (env: RUNS=5 DURATION=5s CONNS=64)
# Needs nginx and wrk (apt-get install -y nginx wrk), taskset, go.
set -euo pipefail

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

repo=$(cd "$(dirname "$0")/.." && pwd)
for tool in nginx wrk taskset go; do
	command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y nginx wrk)" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/loadgen-vs-wrk.XXXXXX)
nginx_pid=""
cleanup() {
	if [[ -n "$nginx_pid" ]] && kill -0 "$nginx_pid" 2>/dev/null; then
		kill -QUIT "$nginx_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$nginx_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free loopback port: ask the kernel for one.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

mkdir -p "$tmp/www" "$tmp/logs"
chmod 755 "$tmp" "$tmp/www" # nginx workers run as an unprivileged user when started by root
python3 -c 'print("x" * 1023)' >"$tmp/www/1k.html"
cat >"$tmp/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $tmp/nginx.pid;
error_log $tmp/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    open_file_cache max=100;
    client_body_temp_path $tmp/body;
    proxy_temp_path $tmp/proxy;
    fastcgi_temp_path $tmp/fastcgi;
    uwsgi_temp_path $tmp/uwsgi;
    scgi_temp_path $tmp/scgi;
    default_type text/html;
    server {
        listen 127.0.0.1:$port;
        root $tmp/www;
    }
}
CONF

# Build the committed HEAD (not the working tree, where other work may be
# half-written), or the working tree with SHOAL_WORKTREE=1.
echo "building shoal…" >&2
if [[ "${SHOAL_WORKTREE:-0}" == 1 ]]; then
	(cd "$repo" && go build -o "$tmp/shoal" ./cmd/shoal)
else
	mkdir -p "$tmp/src"
	git -C "$repo" archive HEAD | tar -x -C "$tmp/src"
	(cd "$tmp/src" && go build -o "$tmp/shoal" ./cmd/shoal)
fi

taskset -c "$SERVER_CPU" nginx -p "$tmp" -c "$tmp/nginx.conf" -e "$tmp/logs/error.log" &
nginx_pid=$!
url="http://127.0.0.1:$port/1k.html"
for _ in $(seq 50); do
	curl -fs -o /dev/null "$url" 2>/dev/null && break
	sleep 0.1
done
size=$(curl -fs "$url" | wc -c || true)
if [[ "$size" != 1024 ]]; then
	echo "nginx is not serving $url (got $size bytes); its error log:" >&2
	cat "$tmp/logs/error.log" >&2 || true
	exit 1
fi

run_wrk() {
	taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"$DURATION" "$url" | awk '/^Requests\/sec:/ {print $2}'
}
run_shoal() {
	GOMAXPROCS=1 taskset -c "$CLIENT_CPU" "$tmp/shoal" bench http --url "$url" --connections "$CONNS" \
		--duration "$DURATION" --json | sed -n 's/.*"rps":\([0-9.e+]*\).*/\1/p'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "nginx 1 worker on cpu $SERVER_CPU; clients on cpu $CLIENT_CPU; $CONNS connections; $DURATION × $RUNS interleaved; $url"
run_wrk >/dev/null # warm-up (page cache, nginx open_file_cache)
wrk_all=() shoal_all=()
for i in $(seq "$RUNS"); do
	w=$(run_wrk)
	s=$(run_shoal)
	[[ -n "$w" && -n "$s" ]] || { echo "run $i: could not read a result (wrk '$w', shoal '$s')" >&2; exit 1; }
	wrk_all+=("$w") shoal_all+=("$s")
	printf 'run %d: wrk %10.0f req/s   shoal %10.0f req/s\n' "$i" "$w" "$s"
done
wm=$(printf '%s\n' "${wrk_all[@]}" | median)
sm=$(printf '%s\n' "${shoal_all[@]}" | median)
ratio=$(awk -v s="$sm" -v w="$wm" 'BEGIN {printf "%.3f", s/w}')
printf 'median: wrk %.0f req/s   shoal %.0f req/s   ratio shoal/wrk %s (target ≥ 0.90)\n' "$wm" "$sm" "$ratio"
