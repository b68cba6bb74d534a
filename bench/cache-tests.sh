#!/usr/bin/env bash
# cache-tests.sh — the HTTP caching conformance of a shoal PoP against nginx
# proxy_cache, with the third-party suite http-tests/cache-tests (the suite
# behind cache-tests.fyi), npm package http-cache-tests@0.4.5: its server is
# the origin and its cli the client, nothing in between.
#
# It starts the suite's origin, then a shoal PoP in front of it
#   shoal pop --name e1 --seed-file F --listen ADDR --peer ADDR --admin ADDR --origin URL --data DIR
# and nginx with proxy_cache (and proxy_cache_revalidate on, its switch for
# revalidating with conditional requests) in front of the same origin, runs the suite
# against each, and prints both tallies the way the suite's own display
# classes results (bench/cache-tests/tally.mjs): required tests passed,
# optimal ones passed, checks answered "yes". The JSON results stay in
# OUT (default bench/results/cache-tests).
#
# Usage: bench/cache-tests.sh              (from anywhere in the repo)
# Env:   SHOAL=path       a prebuilt shoal binary instead of go build
#        SHOAL_MODE=node  test one `shoal node --origin URL` instead of a PoP
#        NGINX=0          skip nginx
#        SUITE_DIR=DIR    where the npm package is installed (default
#                         ~/.cache/shoal/cache-tests; installed when missing)
#        ONLY=TEST-ID     run one test against shoal and print its exchange
#        CHECK=1          exit 1 unless shoal passes more than 132 required
#                         tests (Apache Traffic Server's published count) and
#                         no fewer optimal ones than nginx
# Needs node and npm (and nginx unless NGINX=0).
set -euo pipefail

BENCH=cache-tests
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
REPO=$PWD

bench_need node npm
SUITE_VERSION=0.4.5
SUITE_DIR=${SUITE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shoal/cache-tests}
SHOAL_MODE=${SHOAL_MODE:-pop}
NGINX=${NGINX:-1}
OUT=${OUT:-$REPO/bench/results/cache-tests}
[ "$NGINX" = 0 ] || bench_need nginx
bench_workdir shoal-cache-tests
bench_build_shoal

# The suite, installed once per version.
PKG=$SUITE_DIR/node_modules/http-cache-tests
if ! grep -q "\"version\": \"$SUITE_VERSION\"" "$PKG/package.json" 2>/dev/null; then
	echo "$BENCH: installing http-cache-tests@$SUITE_VERSION into $SUITE_DIR" >&2
	mkdir -p "$SUITE_DIR"
	(cd "$SUITE_DIR" && npm install --no-audit --no-fund --silent "http-cache-tests@$SUITE_VERSION" >&2)
fi

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

# The suite reads its settings from npm's environment; set what `npm run`
# would, without npm in between.
export npm_package_config_protocol=http npm_package_config_id= npm_package_config_base=
export npm_package_config_pidfile=$W/origin.pid

ORIGIN_PORT=$(free_port)
(cd "$PKG" && exec env npm_package_config_port="$ORIGIN_PORT" node server/server.mjs >"$W/origin.log" 2>&1) &
PIDS+=($!)
waitport "127.0.0.1:$ORIGIN_PORT"
ORIGIN=http://127.0.0.1:$ORIGIN_PORT

start_shoal() {
	SHOAL_PORT=$(free_port)
	mkdir -p "$W/shoal-data"
	if [ "$SHOAL_MODE" = node ]; then
		"$SHOAL" node --listen "127.0.0.1:$SHOAL_PORT" --origin "$ORIGIN" --data "$W/shoal-data" >"$W/shoal.log" 2>&1 &
	else
		(umask 077; head -c 32 /dev/urandom >"$W/seed")
		"$SHOAL" pop --name e1 --seed-file "$W/seed" --listen "127.0.0.1:$SHOAL_PORT" \
			--peer "127.0.0.1:$(free_port)" --admin "127.0.0.1:$(free_port)" \
			--origin "$ORIGIN" --data "$W/shoal-data" >"$W/shoal.log" 2>&1 &
	fi
	PIDS+=($!)
	waitlog "127.0.0.1:$SHOAL_PORT" $! "$W/shoal.log"
}

# waitlog ADDR PID LOG: wait up to 30 s (a loaded machine starts slowly) for
# ADDR to accept; if PID dies first, or never listens, show LOG and exit.
waitlog() {
	for _ in $(seq 300); do
		(exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	echo "$BENCH: nothing listening on $1; its log:" >&2
	tail -20 "$3" >&2
	exit 1
}

start_nginx() {
	NGINX_PORT=$(free_port)
	mkdir -p "$W/nginx-cache" "$W/nginx-tmp"
	local user=""
	# As root, nginx's worker would run as nobody and could not write W.
	[ "$(id -u)" = 0 ] && user="user root;"
	cat >"$W/nginx.conf" <<-EOF
		$user
		worker_processes 1;
		pid $W/nginx.pid;
		error_log $W/nginx-error.log;
		events { worker_connections 1024; }
		http {
		  access_log off;
		  client_body_temp_path $W/nginx-tmp/body;
		  proxy_temp_path $W/nginx-tmp/proxy;
		  fastcgi_temp_path $W/nginx-tmp/fastcgi;
		  uwsgi_temp_path $W/nginx-tmp/uwsgi;
		  scgi_temp_path $W/nginx-tmp/scgi;
		  proxy_cache_path $W/nginx-cache levels=1:2 keys_zone=c:10m max_size=1g inactive=1h use_temp_path=off;
		  server {
		    listen 127.0.0.1:$NGINX_PORT;
		    location / {
		      proxy_pass $ORIGIN;
		      proxy_cache c;
		      proxy_cache_revalidate on;
		      proxy_http_version 1.1;
		      proxy_set_header Connection "";
		      proxy_set_header Host \$http_host;
		      add_header X-Cache \$upstream_cache_status;
		    }
		  }
		}
	EOF
	nginx -c "$W/nginx.conf" -p "$W" -e "$W/nginx-error.log"
	waitport "127.0.0.1:$NGINX_PORT"
}

# run_suite NAME BASE: the whole suite against BASE, results in OUT/NAME.json.
run_suite() {
	(cd "$PKG" && npm_config_base="$2" node --no-warnings cli.mjs) >"$OUT/$1.json"
}

mkdir -p "$OUT"
start_shoal
if [ -n "${ONLY:-}" ]; then
	(cd "$PKG" && npm_config_base="http://127.0.0.1:$SHOAL_PORT" npm_config_id="$ONLY" node --no-warnings cli.mjs)
	exit 0
fi
echo "$BENCH: shoal $SHOAL_MODE in front of the suite's origin" >&2
run_suite shoal "http://127.0.0.1:$SHOAL_PORT"
files=("$OUT/shoal.json")
if [ "$NGINX" != 0 ]; then
	start_nginx
	echo "$BENCH: nginx $(nginx -v 2>&1 | sed 's/.*\///') proxy_cache in front of the same origin" >&2
	run_suite nginx "http://127.0.0.1:$NGINX_PORT"
	files+=("$OUT/nginx.json")
fi
tally=$(cd "$PKG" && node "$REPO/bench/cache-tests/tally.mjs" "${files[@]}")
echo "http-cache-tests $SUITE_VERSION (passed/total):"
echo "$tally"

if [ "${CHECK:-0}" = 1 ]; then
	req() { echo "$tally" | sed -n "s/^$1: required \([0-9]*\)\/.*/\1/p"; }
	opt() { echo "$tally" | sed -n "s/^$1: .*optimal \([0-9]*\)\/.*/\1/p"; }
	if [ "$(req shoal)" -le 132 ]; then
		echo "$BENCH: shoal passes $(req shoal) required tests, not more than 132" >&2
		exit 1
	fi
	if [ "$NGINX" != 0 ] && [ "$(opt shoal)" -lt "$(opt nginx)" ]; then
		echo "$BENCH: shoal passes $(opt shoal) optimal tests, nginx $(opt nginx)" >&2
		exit 1
	fi
fi
