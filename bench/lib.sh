# bench/lib.sh — what the bench scripts share, sourced by them (not run):
# the temporary directory and the cleanup of every process started, building
# shoal, waiting for a port, a process's CPU ticks, medians, wrk's summary,
# the nginx back-ends and HAProxy of the peer comparisons, and seed 002's
# crossover runs. Each script had its own copy of these; a fix made here
# (say, to the wrk parsing) now reaches every table alike.
#
# A script sets BENCH (its name, for messages) and sources this file:
#   BENCH=front-vs-haproxy
#   . "$(dirname "$0")/lib.sh"
# Then W is a fresh directory, PIDS collects what to kill on exit, and a
# script that needs more on exit defines bench_cleanup_more.

# bench_need TOOL...: exit with a message unless every TOOL is on PATH.
bench_need() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null || { echo "$BENCH: $t not found" >&2; exit 1; }
	done
}

# bench_workdir PREFIX: make W=/tmp/PREFIX.XXXXXX and, on exit, kill every
# PID in PIDS and every nginx whose pid file is in W, run
# bench_cleanup_more if defined, and remove W.
bench_workdir() {
	W=$(mktemp -d "/tmp/$1.XXXXXX")
	PIDS=()
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
}

bench_cleanup() {
	local p f
	if [ -n "${AUTOGROUP_OLD:-}" ]; then echo "$AUTOGROUP_OLD" >/proc/self/autogroup 2>/dev/null || true; fi
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	for f in "$W"/nginx*.pid; do [ -f "$f" ] && kill "$(cat "$f" 2>/dev/null)" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if declare -F bench_cleanup_more >/dev/null; then bench_cleanup_more || true; fi
	rm -rf "$W"
}

# bench_autogroup: with the kernel's autogroup scheduling on (the default of
# many distributions, and of this machine), CPU time is shared between
# sessions first and a process's nice counts only against processes of its
# own session, so NICE alone does not keep another session's builds and
# tests off the benchmark's cores: each busy session gets an equal share.
# This gives the benchmark's session (its autogroup) the nice NICE for the
# run, and bench_cleanup puts the old value back. Needs root for a negative
# NICE; without autogroups it does nothing.
bench_autogroup() {
	local f=/proc/self/autogroup old
	[ -e "$f" ] && [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ] || return 0
	old=$(awk '{print $NF}' "$f")
	if echo "${NICE:--10}" >"$f" 2>/dev/null; then
		AUTOGROUP_OLD=$old
	else
		echo "$BENCH: could not set the session's autogroup nice to ${NICE:--10}: other sessions share the cores equally" >&2
	fi
}

# bench_build_shoal: unless SHOAL names a binary, build the working tree's
# into W.
bench_build_shoal() {
	if [ -z "${SHOAL:-}" ]; then
		SHOAL=$W/shoal
		go build -o "$SHOAL" ./cmd/shoal
	fi
}

# bench_tls_site: one ECDSA P-256 self-signed certificate (SANs localhost and
# 127.0.0.1) for both proxies of a TLS comparison ($W/cert.pem, $W/key.pem and
# $W/haproxy.pem, the two concatenated), and the 1 KB file under $W/www.
bench_tls_site() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
		-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$W/key.pem" -out "$W/cert.pem" 2>/dev/null
	chmod 600 "$W/key.pem"
	cat "$W/cert.pem" "$W/key.pem" >"$W/haproxy.pem"
	mkdir -p "$W/www"
	head -c 1024 /dev/urandom >"$W/www/1k"
	chmod -R a+rX "$W/www"
	chmod a+x "$W"
}

# bench_tls_front ADDR NODES...: `shoal front --policy rr` terminating TLS with
# bench_tls_site's certificate on PROXY_CORE (GOMAXPROCS=1), in the background;
# SPID is its pid.
bench_tls_front() {
	local addr=$1 nodes
	shift
	nodes=$(printf 'http://%s,' "$@")
	GOMAXPROCS=1 nice -n "$NICE" taskset -c "$PROXY_CORE" "$SHOAL" front --listen "$addr" --nodes "${nodes%,}" \
		--policy rr --health-interval 0 --max-conns-per-ip -1 --admin 127.0.0.1:0 \
		--tls-cert "$W/cert.pem" --tls-key "$W/key.pem" 2>"$W/shoal.err" &
	SPID=$!
	PIDS+=($SPID)
}

# bench_wait_https ADDR [CURL-ARGS...]: waits until ADDR answers over HTTPS,
# then fetches /1k once more trusting only bench_tls_site's certificate and
# prints the HTTP version it spoke; exits the script when it does not answer.
bench_wait_https() {
	local a=$1
	shift
	for _ in $(seq 100); do
		curl -sfk -o /dev/null "https://$a/1k" && break
		sleep 0.1
	done
	curl -sf "$@" --cacert "$W/cert.pem" -o /dev/null -w '%{http_version}' "https://$a/1k" ||
		{ echo "$BENCH: https://$a does not answer with the certificate" >&2; cat "$W"/*.err >&2; exit 1; }
}

# bench_stop_services: the Debian nginx and HAProxy services would hold the
# same cores (and maybe ports).
bench_stop_services() {
	if command -v service >/dev/null; then
		service nginx stop >/dev/null 2>&1 || true
		service haproxy stop >/dev/null 2>&1 || true
	fi
}

# waitport HOST:PORT: wait up to 5 s for something to accept on it.
waitport() {
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "$BENCH: nothing listening on $1" >&2
	exit 1
}

# cputicks PID: utime+stime of PID in clock ticks (TCK per second). Unlike
# req/s, CPU per request is barely moved by other load on a shared machine.
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)

# cpuns PID: CPU time of PID's live threads in nanoseconds (the sum of
# /proc/PID/task/*/schedstat). cputicks rounds to clock ticks (10 ms): a
# handoff front that spends 150 ms of CPU in a run is off by up to 7 %
# there. Threads that exited are not counted; cpusecs notices.
cpuns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{t += $1} END {printf "%.0f\n", t}'; }

# cpusecs TICKS0 TICKS1 NS0 NS1: the CPU seconds between two readings of
# cputicks and cpuns of one process: the nanosecond count, unless it is
# more than a tick short of the tick count (a thread exited meanwhile).
cpusecs() {
	python3 -c "import sys; t = ($2 - $1) / $TCK; n = ($4 - $3) / 1e9; print(t if n < t - 1 / $TCK else n)"
}

# corestat CORE: that core's /proc/stat jiffies "busy softirq steal total".
corestat() { awk -v c="cpu$1" '$1 == c {t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, $8, $9, t}' /proc/stat; }

# corebusy WHAT BEFORE AFTER: print to stderr the share of a core's time
# between two corestat snapshots that was busy, in softirq and stolen by the
# hypervisor: which core saturates, and why, explains a layout's numbers.
corebusy() {
	echo "$2 $3" | awk -v w="$1" '{t = $8 - $4; if (t <= 0) t = 1
		printf "  %s: busy %.0f%%, softirq %.0f%%, steal %.0f%%\n", w, 100 * ($5 - $1) / t, 100 * ($6 - $2) / t, 100 * ($7 - $3) / t}' >&2
}

# median: the median of the numbers on stdin, one a line.
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) v = a[(NR+1)/2]; else v = (a[NR/2]+a[NR/2+1])/2; printf "%.10g\n", v}'; }

# median_of N...: the median of its arguments.
median_of() { printf '%s\n' "$@" | median; }

# wrk_summary OUT T0 T1 WHAT: from wrk --latency's output OUT and the
# server's CPU ticks before (T0) and after (T1) the run (WHAT names the
# target in messages), print
# "rps p99ms cpu_us_per_request errors requests".
wrk_summary() {
	local out=$1 rps p99 reqs
	if echo "$out" | grep -q "Non-2xx\|Socket errors"; then
		echo "$BENCH: errors against $4:" >&2
		echo "$out" | grep "Non-2xx\|Socket errors" >&2
	fi
	rps=$(echo "$out" | awk '/Requests\/sec:/ {print $2}')
	reqs=$(echo "$out" | awk '/requests in/ {print $1}')
	if [ "${reqs:-0}" = 0 ]; then
		echo "$BENCH: no request completed against $4:" >&2
		echo "$out" >&2
		reqs=0
	fi
	p99=$(echo "$out" | awk '$1=="99%" {v=$2; u=v; sub(/[0-9.]+/,"",u); sub(/[a-z]+$/,"",v);
		if (u=="us") v=v/1000; else if (u=="s") v=v*1000; print v}')
	echo "$rps $p99 $(awk -v d=$(($3 - $2)) -v n="$reqs" -v t="$TCK" 'BEGIN {printf "%.1f", n ? d * 1e6 / t / n : 0}') $(echo "$out" |
		awk '/Non-2xx/ {n += $NF} /Socket errors/ {for (i = 3; i <= NF; i++) n += $i} END {print n + 0}') $reqs"
}

# start_nginx I ADDR [DIRECTIVE...]: nginx number I (1 worker, no access
# log, long keep-alive) serving $W/www on ADDR, on LOAD_CORE at NICE; each
# DIRECTIVE goes into its http block.
start_nginx() {
	local i=$1 addr=$2 d extra=""
	shift 2
	for d in "$@"; do extra+=$'\t'"$d"$'\n'; done
	cat >"$W/nginx$i.conf" <<NGX
worker_processes 1;
daemon off;
pid $W/nginx$i.pid;
error_log $W/nginx$i.err warn;
events { worker_connections 4096; }
http {
	access_log off;
${extra}	keepalive_requests 1000000;
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
}

# start_haproxy MAXCONN BIND_OPTIONS [GLOBAL_LINE...]: HAProxy (nbthread 1,
# http-reuse always, round robin over N1 and N2) on HAP, on PROXY_CORE at
# NICE; its PID in HPID.
start_haproxy() {
	local maxconn=$1 bindopts=$2 g extra=""
	shift 2
	for g in "$@"; do extra+=$'\t'"$g"$'\n'; done
	cat >"$W/haproxy.cfg" <<HAP
global
	nbthread 1
	maxconn $maxconn
${extra}defaults
	mode http
	timeout connect 5s
	timeout client 60s
	timeout server 60s
	option http-keep-alive
	http-reuse always
frontend fe
	bind $HAP${bindopts:+ $bindopts}
	default_backend be
backend be
	balance roundrobin
	server n1 $N1
	server n2 $N2
HAP
	nice -n "$NICE" taskset -c "$PROXY_CORE" haproxy -db -f "$W/haproxy.cfg" &
	HPID=$!
	PIDS+=($HPID)
}

# pair_round R CELL: one interleaved round of the HAProxy comparisons — the
# script's run function against HAProxy (HAP, HPID) and shoal (SHO, SPID),
# HAProxy first in odd rounds, so drift in background load hits both; the
# results are appended to $W/h.CELL and $W/s.CELL.
pair_round() {
	if [ $(($1 % 2)) = 1 ]; then
		run "$HAP" "$2" "$HPID" >>"$W/h.$2"
		run "$SHO" "$2" "$SPID" >>"$W/s.$2"
	else
		run "$SHO" "$2" "$SPID" >>"$W/s.$2"
		run "$HAP" "$2" "$HPID" >>"$W/h.$2"
	fi
	echo "run $1/$RUNS $2: haproxy $(tail -1 "$W/h.$2")  shoal $(tail -1 "$W/s.$2")  (rps p99ms cpu-us/req errors requests)" >&2
}

# pair_json COMPARISON SIZE R CELL: with JSON_OUT set, append round R's line
# of CELL (bench/report's input, see bench/compare.sh).
pair_json() {
	[ -n "${JSON_OUT:-}" ] || return 0
	local hr hp hc he hn sr sp sc se sn
	read -r hr hp hc he hn < <(tail -1 "$W/h.$4")
	read -r sr sp sc se sn < <(tail -1 "$W/s.$4")
	printf '{"comparison":"%s","size":"%s","run":%d,"metric":"rps","peer":{"name":"HAProxy","rps":%s,"p99_ms":%s,"cpu_us":%s,"errors":%s,"requests":%s},"shoal":{"name":"shoal front","rps":%s,"p99_ms":%s,"cpu_us":%s,"errors":%s,"requests":%s}}\n' \
		"$1" "$2" "$3" "$hr" "$hp" "$hc" "$he" "$hn" "$sr" "$sp" "$sc" "$se" "$sn" >>"$JSON_OUT"
}

# pair_table_header FIRST_COLUMN and pair_table_row LABEL CELL: the Markdown
# table of medians over the rounds of CELL, with shoal/HAProxy ratios.
pair_table_header() {
	echo "| $1 | HAProxy req/s | shoal req/s | ratio | HAProxy p99 ms | shoal p99 ms | HAProxy CPU µs/req | shoal CPU µs/req | CPU ratio |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
}

pair_table_row() {
	local h=$W/h.$2 s=$W/s.$2 hr sr hp sp hc sc
	hr=$(awk '{print $1}' "$h" | median); sr=$(awk '{print $1}' "$s" | median)
	hp=$(awk '{print $2}' "$h" | median); sp=$(awk '{print $2}' "$s" | median)
	hc=$(awk '{print $3}' "$h" | median); sc=$(awk '{print $3}' "$s" | median)
	printf "| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f |\n" "$1" "$hr" "$sr" \
		"$(echo "$sr $hr" | awk '{print $1/$2}')" "$hp" "$sp" "$hc" "$sc" "$(echo "$sc $hc" | awk '{print $1/$2}')"
}

# tcp_run_json OUT PATH RUN BEFORE AFTER [SINKS_BEFORE SINKS_AFTER]: one
# JSON line of seed 002's crossover runs from `shoal bench tcp --json`'s
# output file OUT and the front's CPU ticks before and after (and the
# sinks', when given).
tcp_run_json() {
	python3 - "$@" "$TCK" <<'PY'
import json, sys
args = sys.argv[1:]
out, path, run, before, after = args[:5]
hz = int(args[-1])
lv = json.load(open(out))["levels"][0]
ops = lv["ops"]
row = {
    "level": lv["connections"], "path": path, "run": int(run), "ops": ops,
    "ops_per_sec": lv["ops_per_sec"], "mean_ms": lv["latency_ms"]["mean"],
    "p50_ms": lv["latency_ms"]["p50"], "p99_ms": lv["latency_ms"]["p99"],
    "errors": sum(lv["errors"].values()) if lv["errors"] else 0,
    "front_cpu_us_per_op": (int(after) - int(before)) / hz / max(ops, 1) * 1e6,
}
if len(args) == 8:
    row["sinks_cpu_us_per_op"] = (int(args[6]) - int(args[5])) / hz / max(ops, 1) * 1e6
print(json.dumps(row))
PY
}

# crossover_report NAME [--meta K=V ...]: copy the runs to
# $OUT/NAME-runs.jsonl and let bench/report's crossover mode write
# $OUT/NAME.{json,md,svg,png}; the common metadata (durations, cores, load
# average, commit) is added here. LOADAVG_BEFORE is the script's.
crossover_report() {
	local name=$1
	shift
	mkdir -p "$OUT"
	cp "$RUNSFILE" "$OUT/$name-runs.jsonl"
	go run ./bench/report crossover --runs "$OUT/$name-runs.jsonl" --out "$OUT/$name.json" \
		--md "$OUT/$name.md" --plot "$OUT/$name.svg" --plot "$OUT/$name.png" "$@" \
		--meta "duration=$DURATION" --meta "runs=$RUNS" --meta "bytes=$BYTES" --meta "nodes=$NODES" \
		--meta "cpus=$(nproc)" --meta "front_core=$FRONT_CORE" --meta "load_core=$LOAD_CORE" \
		--meta "loadavg_before=$LOADAVG_BEFORE" --meta "loadavg_after=$(cut -d' ' -f1-3 /proc/loadavg)" \
		--meta "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" --meta "date=$(date -u +%FT%TZ)"
}
