#!/usr/bin/env bash
# loadgen-vs-wrk.sh — is `shoal bench http` fast enough not to be the
# bottleneck? (issue 5, SPEC §7)
#
# nginx (1 worker, pinned to core 0, access log off, keep-alive without a
# request cap — as fast as it gets, which makes the test strict) serves a
# 1 KB file on loopback. wrk -t1 -c64 and `shoal bench http` with 64
# connections and GOMAXPROCS=1 each run pinned to core 1, interleaved RUNS
# times (alternating which goes first); the script prints every run, the
# medians, the per-run ratio shoal/wrk (median, min–max) and each client's
# CPU time per request. Target: ratio ≥ 0.90.
#
# With SYSCALLS=N it then counts each client's system calls per request
# (perf stat on the syscall tracepoints): shoal over --requests N, wrk over
# DURATION, both still pinned next to nginx.
#
# Usage: bench/loadgen-vs-wrk.sh            (env: RUNS=5 DURATION=5s CONNS=64
#        SYSCALLS=0 REV=HEAD: the commit to build, SHOAL_WORKTREE=1 the tree,
#        SERVER_CPU=0 CLIENT_CPU=1, CLIENT_SCHED=batch)
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

REV=${REV:-HEAD}
# How both clients start: pinned, and with CLIENT_SCHED=batch as SCHED_BATCH
# threads, which do not preempt nginx when they wake (see docs/benchmarks.md).
client=(taskset -c "$CLIENT_CPU")
[[ "${CLIENT_SCHED:-}" == batch ]] && client=(chrt --batch 0 "${client[@]}")
# Build the committed REV (HEAD) (not the working tree, where other work may be
# half-written), or the working tree with SHOAL_WORKTREE=1.
echo "building shoal…" >&2
if [[ "${SHOAL_WORKTREE:-0}" == 1 ]]; then
	(cd "$repo" && go build -o "$tmp/shoal" ./cmd/shoal)
else
	mkdir -p "$tmp/src"
	git -C "$repo" archive "$REV" | tar -x -C "$tmp/src"
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

# Each run prints "requests/s  client-CPU-µs-per-request". The CPU cost per
# request (user+sys of the client process, from bash's time) is the
# noise-robust view of "is the generator the bottleneck": it barely moves
# when other processes steal the cores, while requests/s does. Under
# background load requests/s also favours shoal: the Go runtime puts a
# thread stuck in a syscall aside and runs on another, so the process holds
# more than one scheduler share of the contended core while wrk holds one.
# Trust ratios from a quiet machine (load average below 1 per core).
TIMEFORMAT='%U %S'
run_wrk() {
	{ time "${client[@]}" wrk -t1 -c"$CONNS" -d"$DURATION" "$url" >"$tmp/wrk.out"; } 2>"$tmp/wrk.time"
	local rps
	rps=$(awk '/^Requests\/sec:/ {print $2}' "$tmp/wrk.out")
	# wrk prints "N requests in 5.00s"
	awk -v rps="$rps" 'NR==FNR && / requests in / {n=$1; next} NR!=FNR {printf "%s %.2f\n", rps, ($1+$2)*1e6/n}' "$tmp/wrk.out" "$tmp/wrk.time"
}
run_shoal() {
	{ time GOMAXPROCS=1 "${client[@]}" "$tmp/shoal" bench http --url "$url" --connections "$CONNS" \
		--duration "$DURATION" --json >"$tmp/shoal.out"; } 2>"$tmp/shoal.time"
	local rps n
	rps=$(sed -n 's/.*"rps":\([0-9.e+]*\).*/\1/p' "$tmp/shoal.out")
	n=$(sed -n 's/.*"requests":\([0-9]*\).*/\1/p' "$tmp/shoal.out")
	awk -v rps="$rps" -v n="$n" '{printf "%s %.2f\n", rps, ($1+$2)*1e6/n}' "$tmp/shoal.time"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
minmax() { sort -g | awk 'NR==1 {min=$1} {max=$1} END {printf "%s–%s", min, max}'; }

echo "nginx 1 worker on cpu $SERVER_CPU; clients on cpu $CLIENT_CPU; $CONNS connections; $DURATION × $RUNS interleaved; $url"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
run_wrk >/dev/null # warm-up (page cache, nginx open_file_cache)
w_rps=() s_rps=() w_cpu=() s_cpu=() ratios=()
for i in $(seq "$RUNS"); do
	# Alternate who goes first so that a drift in background load
	# does not always favour the same tool.
	if ((i % 2)); then w=$(run_wrk); s=$(run_shoal); else s=$(run_shoal); w=$(run_wrk); fi
	read -r wr wc <<<"$w"
	read -r sr sc <<<"$s"
	[[ -n "$wr" && -n "$sr" ]] || { echo "run $i: could not read a result (wrk '$w', shoal '$s')" >&2; exit 1; }
	w_rps+=("$wr") s_rps+=("$sr") w_cpu+=("$wc") s_cpu+=("$sc")
	r=$(awk -v s="$sr" -v w="$wr" 'BEGIN {printf "%.3f", s/w}')
	ratios+=("$r")
	printf 'run %d: wrk %8.0f req/s %6.2f µs CPU/req   shoal %8.0f req/s %6.2f µs CPU/req   ratio %s\n' \
		"$i" "$wr" "$wc" "$sr" "$sc" "$r"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
wm=$(printf '%s\n' "${w_rps[@]}" | median)
sm=$(printf '%s\n' "${s_rps[@]}" | median)
wcm=$(printf '%s\n' "${w_cpu[@]}" | median)
scm=$(printf '%s\n' "${s_cpu[@]}" | median)
rm_=$(printf '%s\n' "${ratios[@]}" | median)
printf 'median requests/s: wrk %.0f  shoal %.0f  ratio of medians %.3f\n' "$wm" "$sm" "$(awk -v s="$sm" -v w="$wm" 'BEGIN {print s/w}')"
printf 'per-run ratio shoal/wrk: median %s (min–max %s)  target ≥ 0.90\n' "$rm_" "$(printf '%s\n' "${ratios[@]}" | minmax)"
printf 'median client CPU per request: wrk %.2f µs  shoal %.2f µs  (shoal/wrk %.2f)\n' "$wcm" "$scm" "$(awk -v s="$scm" -v w="$wcm" 'BEGIN {print s/w}')"

# System calls per request: total (raw_syscalls) and the ones that matter.
((${SYSCALLS:-0} > 0)) || exit 0
command -v perf >/dev/null || { echo "SYSCALLS needs perf" >&2; exit 1; }
events=raw_syscalls:sys_enter
for e in read write writev epoll_wait epoll_pwait futex nanosleep; do events+=",syscalls:sys_enter_$e"; done
per_request() { # $1 perf CSV, $2 requests
	awk -F, -v n="$2" '$1 ~ /^[0-9]+$/ && $1 > 0 {sub(/^(raw_)?syscalls:sys_enter_?/, "", $3); printf "%s %.3f  ", ($3 == "" ? "all" : $3), $1/n} END {print ""}' "$1"
}
perf stat -x, -o "$tmp/shoal.perf" -e "$events" -- env GOMAXPROCS=1 "${client[@]}" "$tmp/shoal" bench http \
	--url "$url" --connections "$CONNS" --requests "$SYSCALLS" --json >"$tmp/shoal.out"
n=$(sed -n 's/.*"requests":\([0-9]*\).*/\1/p' "$tmp/shoal.out")
echo "shoal system calls per request ($n requests): $(per_request "$tmp/shoal.perf" "$n")"
perf stat -x, -o "$tmp/wrk.perf" -e "$events" -- "${client[@]}" wrk -t1 -c"$CONNS" -d"$DURATION" "$url" >"$tmp/wrk.out"
n=$(awk '/ requests in / {print $1}' "$tmp/wrk.out")
echo "wrk system calls per request ($n requests): $(per_request "$tmp/wrk.perf" "$n")"
