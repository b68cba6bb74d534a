#!/usr/bin/env bash
# budget.sh — what one request costs, counted per request for the server
# under test AND for what it makes the load side do: CPU time, context
# switches (each sleep and wake-up is one), and system calls by name. Unlike
# requests per second, these counts hardly move when other work shares the
# machine, so shoal's budget and its peer's can be set side by side on a
# busy box (docs/benchmarks.md, "Per-request budget").
#
# Each party runs in a cgroup (v2) of its own, and `perf stat -a -G` counts
# the tracepoints syscalls:sys_enter_* and the software events of every
# thread in it, threads the Go runtime starts mid-run included (perf stat -p
# misses those). Hardware counters (instructions, cycles) are not available
# in this VM; CPU time (task-clock) stands in for them.
#
# Targets (TARGETS, default every one):
#   haproxy  HAProxy 2.6 (nbthread 1) relaying 1 KB from two nginx back-ends,
#            loaded by wrk -t1 -cCONNS                   (front-vs-haproxy.sh)
#   front    `shoal front --policy rr` (GOMAXPROCS=1) relaying the same
#   nginx    nginx (1 worker, sendfile) serving the file (node-vs-nginx.sh)
#   node     `shoal node` (GOMAXPROCS=1) serving it
#   relay    `shoal front --path relay --policy wrr` before two `shoal node`s,
#            loaded by `shoal bench http -c HANDOFF_CONNS`, one request per
#            connection (Connection: close)                 (handoff-cpu.sh)
#   passfd   `shoal front --path passfd --policy wrr`, the same load
# Servers run on SERVER_CPU; the load generator and the back-ends on
# LOAD_CORE; one target at a time, RUNS rounds interleaved.
#
# Usage: sudo bench/budget.sh   (from the repo root; needs perf, wrk, nginx,
#                                haproxy, cgroup v2; builds shoal unless
#                                SHOAL names a binary)
# Env:   RUNS=3 DURATION=3s CONNS=64 SIZE=1k HANDOFF_SIZE=1m HANDOFF_CONNS=32
#        TARGETS="haproxy front nginx node relay passfd" SERVER_CPU=0
#        LOAD_CORE=1 NICE=-10 CGROOT=/sys/fs/cgroup/unified
# Prints one Markdown table per comparison: a column per target, a row per
# count, each the median over RUNS of (count ÷ requests completed).
set -euo pipefail

RUNS=${RUNS:-3}
DURATION=${DURATION:-3s}
CONNS=${CONNS:-64}
SIZE=${SIZE:-1k}
HANDOFF_SIZE=${HANDOFF_SIZE:-1m}
HANDOFF_CONNS=${HANDOFF_CONNS:-32}
TARGETS=${TARGETS:-"haproxy front nginx node relay passfd"}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CORE=${LOAD_CORE:-1}
NICE=${NICE:--10}
CGROOT=${CGROOT:-/sys/fs/cgroup/unified}
BASE=${PORT_BASE:-$((24000 + (RANDOM % 1000) * 10))}
N1=127.0.0.1:$BASE N2=127.0.0.1:$((BASE + 1)) HAP=127.0.0.1:$((BASE + 2)) SHO=127.0.0.1:$((BASE + 3))
NGX=127.0.0.1:$((BASE + 4)) NOD=127.0.0.1:$((BASE + 5)) HN1=127.0.0.1:$((BASE + 6)) HN2=127.0.0.1:$((BASE + 7))
REL=127.0.0.1:$((BASE + 8)) PFD=127.0.0.1:$((BASE + 9))

BENCH=budget
. "$(dirname "$0")/lib.sh"
bench_need nginx haproxy wrk taskset go perf python3
[ -w "$CGROOT/cgroup.procs" ] || { echo "budget: needs root and cgroup v2 at $CGROOT (CGROOT=...)" >&2; exit 1; }
bench_workdir shoal-budget
CG=$CGROOT/shoal-budget-$$
mkdir "$CG"
# bench_cleanup kills the processes; the cgroups go once they are empty.
bench_cleanup_more() {
	local d
	sleep 0.2
	for d in "$CG"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
	rmdir "$CG" 2>/dev/null || true
}
bench_stop_services
bench_build_shoal

want() { [[ " $TARGETS " == *" $1 "* ]]; }

mkdir -p "$W/www"
for s in "$SIZE" "$HANDOFF_SIZE"; do
	case $s in
	1k) n=1024 ;; 64k) n=65536 ;; 100k) n=102400 ;; 1m) n=1048576 ;;
	*) echo "budget: sizes are 1k, 64k, 100k or 1m" >&2; exit 1 ;;
	esac
	[ -f "$W/www/$s" ] || head -c "$n" /dev/urandom >"$W/www/$s"
done
chmod -R a+rX "$W"

# The system calls counted by name; the others are in "syscalls" only.
SYSCALLS="read write readv writev recvfrom sendto recvmsg sendmsg epoll_wait epoll_pwait epoll_ctl futex accept4
close splice sendfile64 openat newfstatat newfstat statx setsockopt getsockopt getsockname nanosleep sched_yield
tgkill getpid rt_sigreturn madvise mmap munmap connect socket shutdown ioctl fcntl"
EVENTS="task-clock,context-switches,raw_syscalls:sys_enter"
for s in $SYSCALLS; do EVENTS+=",syscalls:sys_enter_$s"; done

# in_cg NAME CMD...: run CMD (which starts something in the background)
# from inside cgroup NAME, so what it starts and forks later is counted
# there; this shell goes back to its own cgroup afterwards.
HOME_CG=$CGROOT$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
in_cg() {
	local name=$1
	shift
	mkdir -p "$CG/$name"
	echo "$BASHPID" >"$CG/$name/cgroup.procs"
	"$@"
	echo "$BASHPID" >"$HOME_CG/cgroup.procs"
}

# Everything starts in its cgroup: this shell joins it for the start.
# spawn NAME CMD...: run CMD in the background in cgroup NAME; pid in SPAWNED.
spawn() {
	local name=$1
	shift
	mkdir -p "$CG/$name"
	(echo "$BASHPID" >"$CG/$name/cgroup.procs" && exec "$@") &
	SPAWNED=$!
	PIDS+=($SPAWNED)
}

srv=(nice -n "$NICE" taskset -c "$SERVER_CPU")
load=(nice -n "$NICE" taskset -c "$LOAD_CORE")
if want haproxy || want front; then
	in_cg backends start_nginx 1 "$N1" "sendfile on;" "tcp_nopush on;"
	in_cg backends start_nginx 2 "$N2" "sendfile on;" "tcp_nopush on;"
fi
if want haproxy; then
	PROXY_CORE=$SERVER_CPU
	in_cg haproxy start_haproxy 4096 ""
fi
if want front; then
	spawn front env GOMAXPROCS=1 "${srv[@]}" "$SHOAL" front --listen "$SHO" --nodes "http://$N1,http://$N2" \
		--policy rr --health-interval 0
fi
if want nginx; then
	LOAD_CORE=$SERVER_CPU in_cg nginx start_nginx 3 "$NGX" "sendfile on;" "tcp_nopush on;"
fi
if want node; then
	spawn node env GOMAXPROCS=1 "${srv[@]}" "$SHOAL" node --root "$W/www" --listen "$NOD" --cache-mb 64 --cache lru
fi
if want relay || want passfd; then
	i=0
	for a in $HN1 $HN2; do
		spawn nodes "${load[@]}" "$SHOAL" node --root "$W/www" --listen "$a" --handoff-socket "$W/n$i.sock"
		i=$((i + 1))
	done
	want relay && spawn relay env GOMAXPROCS=1 "${srv[@]}" "$SHOAL" front --listen "$REL" \
		--nodes "http://$HN1,http://$HN2" --health-interval 200ms --path relay --policy wrr
	want passfd && spawn passfd env GOMAXPROCS=1 "${srv[@]}" "$SHOAL" front --listen "$PFD" \
		--nodes "http://$HN1,http://$HN2" --health-interval 200ms --path passfd --policy wrr
fi
for a in $N1 $N2 $HAP $SHO $NGX $NOD $HN1 $HN2 $REL $PFD; do
	case " $TARGETS " in
	*" haproxy "* | *" front "*) ;;
	*) [[ $a == "$N1" || $a == "$N2" ]] && continue ;;
	esac
	case $a in
	"$HAP") want haproxy || continue ;; "$SHO") want front || continue ;; "$NGX") want nginx || continue ;;
	"$NOD") want node || continue ;; "$REL") want relay || continue ;; "$PFD") want passfd || continue ;;
	"$HN1" | "$HN2") want relay || want passfd || continue ;;
	esac
	for _ in $(seq 100); do curl -sf -o /dev/null "http://$a/$SIZE" && break; sleep 0.1; done
	curl -sf -o /dev/null "http://$a/$SIZE" || { echo "budget: $a does not answer" >&2; exit 1; }
done
sleep 0.6 # the passfd front learns the handoff sockets from a health check

# per PERFOUT REQUESTS: "GROUP.event value-per-request" lines from a perf
# stat -x, -G file (task-clock as µs).
per() {
	awk -F, -v n="$2" '
		/^#/ || NF < 4 { next }
		{ v = $1 + 0; e = $3; g = $4; sub(/.*\//, "", g)
		  sub(/^syscalls:sys_enter_/, "", e); sub(/^raw_syscalls:sys_enter$/, "syscalls", e)
		  if (e == "task-clock") { e = "cpu_us"; v *= 1000 }
		  printf "%s.%s %.4f\n", g, e, (n > 0) ? v / n : 0 }' "$1"
}

# run TARGET ROUND: one measured run; its per-request counts go to
# $W/r.TARGET.ROUND. The load generator runs in cgroup "load".
run() {
	local t=$1 r=$2 groups url out reqs rps perfpid
	case $t in
	haproxy) groups=haproxy,backends url=http://$HAP/$SIZE ;;
	front) groups=front,backends url=http://$SHO/$SIZE ;;
	nginx) groups=nginx url=http://$NGX/$SIZE ;;
	node) groups=node url=http://$NOD/$SIZE ;;
	relay) groups=relay,nodes url=http://$REL/$HANDOFF_SIZE ;;
	passfd) groups=passfd,nodes url=http://$PFD/$HANDOFF_SIZE ;;
	esac
	mkdir -p "$CG/load"
	# -G names a cgroup per event: the event list once per group, plus load.
	local gl="" ev="" g
	for g in ${groups//,/ } load; do ev+="${ev:+,}$EVENTS"; for _ in ${EVENTS//,/ }; do gl+="${gl:+,}shoal-budget-$$/$g"; done; done
	perf stat -a -x, -o "$W/p.$t" -e "$ev" -G "$gl" &
	perfpid=$!
	sleep 0.5 # perf attached
	case $t in
	relay | passfd)
		(echo "$BASHPID" >"$CG/load/cgroup.procs" && exec "${load[@]}" "$SHOAL" bench http --url "$url" \
			--connections "$HANDOFF_CONNS" --duration "$DURATION" --keepalive=false --json) >"$W/out.json"
		read -r reqs rps < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["ok"], r["rps"])' "$W/out.json")
		;;
	*)
		out=$( (echo "$BASHPID" >"$CG/load/cgroup.procs" && exec "${load[@]}" wrk -t1 -c"$CONNS" -d"$DURATION" "$url"))
		reqs=$(echo "$out" | awk '/requests in/ {print $1}')
		rps=$(echo "$out" | awk '/Requests\/sec:/ {print $2}')
		if echo "$out" | grep -q "Non-2xx\|Socket errors"; then echo "budget: $t: $(echo "$out" | grep "Non-2xx\|Socket errors")" >&2; fi
		;;
	esac
	kill -INT "$perfpid"
	wait "$perfpid" || true
	{
		echo "requests $reqs"
		echo "rps $rps"
		per "$W/p.$t" "$reqs" | sed "s/^$t\./server./; s/^nodes\./backends./; s/^haproxy\./server./; s/^nginx\./server./"
	} >"$W/r.$t.$r"
	echo "budget: $t round $r: $reqs requests, $(awk '$1 == "server.cpu_us" {print $2}' "$W/r.$t.$r") µs server CPU/request" >&2
}

for r in $(seq "$RUNS"); do
	for t in $TARGETS; do run "$t" "$r"; done
done

# table TITLE TARGET...: a row per count non-zero for one of the TARGETs.
table() {
	local title=$1 t k v keys
	shift
	keys=$(for t in "$@"; do cat "$W"/r."$t".*; done | awk '$2 + 0 >= 0.0005 {print $1}' | sort -u | grep -v '^requests$\|^rps$' |
		awk -F. '{o = ($1 == "server") ? 1 : ($1 == "backends") ? 2 : 3; print o, ($2 == "cpu_us") ? 0 : ($2 == "context-switches") ? 1 : ($2 == "syscalls") ? 2 : 3, $0}' |
		sort -k1,1n -k2,2n -k3 | cut -d' ' -f3)
	echo
	echo "$title"
	echo
	printf '| per request |'; for t in "$@"; do printf ' %s |' "$t"; done; echo
	printf '|---|'; for t in "$@"; do printf -- '---:|'; done; echo
	printf '| requests/s (noisy) |'
	for t in "$@"; do printf ' %.0f |' "$(cat "$W"/r."$t".* | awk '$1 == "rps" {print $2}' | median)"; done
	echo
	for k in $keys; do
		printf '| %s |' "$k"
		for t in "$@"; do
			v=$(cat "$W"/r."$t".* 2>/dev/null | awk -v k="$k" '$1 == k {print $2}')
			if [ -z "$v" ]; then printf ' – |'; else printf ' %s |' "$(echo "$v" | median | awk '{printf ($1 >= 10) ? "%.1f" : ($1 >= 0.1) ? "%.2f" : "%.3f", $1}')"; fi
		done
		echo
	done
}

echo
echo "budget: $(date -u '+%Y-%m-%d %H:%M UTC'), shoal $(git rev-parse --short HEAD 2>/dev/null || echo '?'); median of $RUNS rounds × $DURATION; servers on core $SERVER_CPU, load and back-ends on core $LOAD_CORE; load average $(cut -d' ' -f1-3 /proc/loadavg)"
want haproxy || want front && table "Relay, $SIZE, wrk -t1 -c$CONNS (server: the proxy; backends: both nginx; load: wrk)" $(for t in haproxy front; do want $t && echo $t; done)
want nginx || want node && table "Static file, $SIZE, wrk -t1 -c$CONNS (load: wrk)" $(for t in nginx node; do want $t && echo $t; done)
want relay || want passfd && table "Front paths, $HANDOFF_SIZE, Connection: close, shoal bench http -c $HANDOFF_CONNS (backends: both shoal nodes; load: bench http)" $(for t in relay passfd; do want $t && echo $t; done)
exit 0
