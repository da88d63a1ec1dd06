#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# The serve bench: ldasync-serve on loopback, measured with wrk (Debian's
# package) and bench/ldasync-streams.
#
#   - latest-flags: GET /sdk/latest-flags/{key} with the SDK key, 64
#     keep-alive connections over 2 wrk threads: requests per second and
#     latency percentiles;
#   - evalx: GET /sdk/evalx/{env}/contexts/{base64url context}, the same way;
#   - streams: N streaming connections to /all; the time from rewriting a
#     watched data file until every stream has the `patch`, and the server's
#     resident memory per stream; with RELAY=1 the streams connect to a
#     second ldasync-serve that relays the first by streaming (the file ->
#     ldasync-serve -> relay -> N streams), and the memory is the relay's;
#   - at 10,000 flags (BIG_FLAGS; 0: not run) of the shape bench/gen-flags.py
#     writes (each client-side, with targets, rules and a rollout: ~10 MB):
#     the time to first byte of each endpoint (the first answer after a
#     one-flag change of the file too), then latest-all,
#     latest-flags/{key}, evalx and evalx ?withReasons=true with wrk as
#     above, each while one more connection asks for /status over and over:
#     its p99 and max are how long the loop was held meanwhile (a pass of
#     the loop that takes longer delays it), as the server's loop probe
#     (--loop-probe 1) counts it too: the loop thread's CPU time between
#     two runs of a 1 ms timer, and how late that timer ran (the machine's
#     other processes count in that one). Side by side, in the same run:
#     latest-flags/{key} from a minimal Node http server serving the same
#     flags from memory (bench/node-serve.js) and from a bare evhttp server
#     answering that flag's text as a constant body (bench/bare-evhttp),
#     with its loop configured as ldasync-serve's, and with libevent's
#     defaults.
#
# usage: bench/serve-bench.sh [BUILD_DIR] (default: build), from the top of
# the tree. Environment: RUNS (3), SECONDS_PER_RUN (10), STREAMS (10000; 0:
# no streams run), BIG_FLAGS (10000), PARTS (all: or a list of small, big,
# streams),
# RELAY (0; 1: the streams through a relay), PORT (18090), LOOP_PROBE (1; 0: the server runs without --loop-probe),
# FLAG (max-upload-mb: a flag of data/flags.json with
# numbers for variations). wrk and the server share the machine's cores: the figures
# are those of one machine serving itself.
set -eu

build=${1:-build}
runs=${RUNS:-3}
secs=${SECONDS_PER_RUN:-10}
streams=${STREAMS:-10000}
big=${BIG_FLAGS:-10000}
parts=${PARTS:-small big streams}
port=${PORT:-18090}
relay=${RELAY:-0}
# LOOP_PROBE=0: no --loop-probe (its 1 ms timer and precise clock cost a
# little on every pass: for requests per second against the others)
probe_opt=
[ "${LOOP_PROBE:-1}" = 0 ] || probe_opt="--loop-probe 1"
key=sdk-bench-key
serve=$build/serve/ldasync-serve
client=$build/bench/ldasync-streams
command -v wrk >/dev/null || { echo "serve-bench: wrk is missing (apt-get install wrk)" >&2; exit 1; }
[ -x "$serve" ] && [ -x "$client" ] || { echo "serve-bench: build $serve and $client first" >&2; exit 1; }

tmp=$(mktemp -d)
pid=
others=
cleanup() {
    # (set -e: a wait for a killed process fails, which must not end this)
    for p in $pid $others; do
        { kill "$p" && wait "$p"; } 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
# Streams need a descriptor each, on both sides.
ulimit -n "$(ulimit -Hn)"

# start_server: a fresh ldasync-serve on a fresh copy of the sample data
# (each streams run starts from a fresh process, so that its growth in
# resident memory is what the streams cost).
start_server() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    fi
    data=${1:-data/flags.json}
    cp "$data" "$tmp/flags.json"
    "$serve" --data "$tmp/flags.json" --port "$port" --sdk-key "$key" \
        --max-connections $((streams + 1000)) --log-level warn $probe_opt \
        2>>"$tmp/serve.log" &
    pid=$!
    i=0
    until curl -fs "http://127.0.0.1:$port/status" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 100 ] && { echo "serve-bench: the server did not start" >&2; cat "$tmp/serve.log" >&2; exit 1; }
        sleep 0.1
    done
}

# wait_http URL: until URL answers
wait_http() {
    i=0
    until curl -fs "$1" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 300 ] && { echo "serve-bench: $1 did not answer" >&2; exit 1; }
        sleep 0.1
    done
}

# ttfb NAME URL: the time to first byte of one GET, in ms
ttfb() {
    curl -s -o /dev/null -H "Authorization: $key" -w "%{time_starttransfer}" "$2" |
        awk -v n="$1" '{printf "ttfb %-28s %7.1f ms\n", n, $1 * 1000}'
}

# wrk_line NAME URL: wrk -t2 -c64 on URL: requests per second, p50, p99
wrk_line() {
    wrk -t2 -c64 -d"${secs}s" --timeout 30s --latency -H "Authorization: $key" "$2" |
        awk -v n="$1" '/Requests\/sec/ {rps = $2} / 50%/ {p50 = $2} / 99%/ {p99 = $2}
            /Non-2xx|Socket errors/ {err = err " " $0}
            END {printf "%-28s %10s req/s  p50 %8s  p99 %8s%s\n", n, rps, p50, p99, err}'
}

# loaded NAME URL: wrk_line, while one more connection asks for /status
# over and over: its p99 and max; and what the server's loop probe
# counted meanwhile (bench/loop-delta.py)
loaded() {
    curl -s "http://127.0.0.1:$port/status" >"$tmp/status0"
    wrk -t1 -c1 -d"${secs}s" --latency "http://127.0.0.1:$port/status" >"$tmp/probe" &
    probe=$!
    wrk_line "$1" "$2"
    wait "$probe"
    awk '/ 99%/ {p99 = $2} $1 == "Latency" && NF >= 4 {max = $4}
        END {printf "%-28s /status meanwhile: p99 %s, max %s\n", "", p99, max}' "$tmp/probe"
    curl -s "http://127.0.0.1:$port/status" >"$tmp/status1"
    if [ -n "$probe_opt" ]; then
        printf '%-28s ' ""
        python3 bench/loop-delta.py "$tmp/status0" "$tmp/status1"
    fi
}

# The 10,000-flag part.
big_part() {
    python3 bench/gen-flags.py "$big" >"$tmp/big.json"
    one=flag-00042
    python3 -c 'import json,sys; sys.stdout.write(json.dumps(json.load(open(sys.argv[1]))["flags"][sys.argv[2]], separators=(",", ":")))' \
        "$tmp/big.json" "$one" >"$tmp/one.json"
    start_server "$tmp/big.json"
    base=http://127.0.0.1:$port
    node bench/node-serve.js $((port + 1)) "$tmp/big.json" &
    others="$others $!"
    "$build/bench/bare-evhttp" $((port + 2)) "$tmp/one.json" &
    others="$others $!"
    "$build/bench/bare-evhttp" $((port + 3)) "$tmp/one.json" --default &
    others="$others $!"
    wait_http "http://127.0.0.1:$((port + 1))/sdk/latest-flags/$one"
    wait_http "http://127.0.0.1:$((port + 2))/"
    wait_http "http://127.0.0.1:$((port + 3))/"
    bigctx=$(printf '{"kind":"user","key":"bench-user","email":"u@beta-7.example.com","country":"fr"}' |
        base64 -w0 | tr '+/' '-_' | tr -d '=')
    evalx="$base/sdk/evalx/bench-env/contexts/$bigctx"
    echo "## $big flags ($(wc -c <"$tmp/big.json") bytes), load $(cut -d' ' -f1-3 /proc/loadavg)"
    for u in sdk/latest-all sdk/latest-flags "sdk/latest-flags/$one"; do
        ttfb "$u (first)" "$base/$u"
        ttfb "$u" "$base/$u"
    done
    ttfb "evalx" "$evalx"
    ttfb "evalx ?withReasons=true" "$evalx?withReasons=true"
    # one flag changed in the file: the first latest-all and latest-flags
    # after it (once the server serves the change)
    for bump in 7 8; do
        python3 bench/gen-flags.py "$big" "$bump" >"$tmp/next.json"
        mv "$tmp/next.json" "$tmp/flags.json"
        until curl -s -H "Authorization: $key" "$base/sdk/latest-flags/flag-0000$bump" |
            grep -q '"version":2'; do sleep 0.05; done
        [ $bump = 7 ] && u=sdk/latest-all || u=sdk/latest-flags
        ttfb "$u (after a change)" "$base/$u"
    done
    for r in $(seq "$runs"); do
        echo "## run $r ($big flags), load $(cut -d' ' -f1-3 /proc/loadavg)"
        # latest-flags/{key} from each server, one after the other, alone,
        # once the server is done with what the previous run left (64
        # evalx clients gone at once: 0.2 s of its loop)
        sleep 2
        wrk_line "ldasync latest-flags/{key}" "$base/sdk/latest-flags/$one"
        wrk_line "node latest-flags/{key}" "http://127.0.0.1:$((port + 1))/sdk/latest-flags/$one"
        wrk_line "bare evhttp" "http://127.0.0.1:$((port + 2))/sdk/latest-flags/$one"
        wrk_line "bare evhttp, defaults" "http://127.0.0.1:$((port + 3))/sdk/latest-flags/$one"
        # each endpoint while /status is asked meanwhile
        loaded "latest-all" "$base/sdk/latest-all"
        loaded "latest-flags/{key}" "$base/sdk/latest-flags/$one"
        loaded "evalx" "$evalx"
        loaded "evalx ?withReasons=true" "$evalx?withReasons=true"
    done
}

start_server

flag=${FLAG:-max-upload-mb}
ctx=$(printf '{"kind":"user","key":"bench-user","email":"u@example.com"}' | base64 -w0 | tr '+/' '-_' | tr -d '=')

echo "# ldasync-serve $("$serve" --version 2>&1 | head -1), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M') UTC"
case " $parts " in *" small "*) ;; *) runs_small=0 ;; esac
for r in $(seq "${runs_small:-$runs}"); do
    echo "## run $r: latest-flags/$flag"
    wrk -t2 -c64 -d"${secs}s" --latency -H "Authorization: $key" \
        "http://127.0.0.1:$port/sdk/latest-flags/$flag" | grep -E 'Requests/sec|^ +(50|99)%|Non-2xx|errors'
    echo "## run $r: evalx"
    wrk -t2 -c64 -d"${secs}s" --latency \
        "http://127.0.0.1:$port/sdk/evalx/bench-env/contexts/$ctx" | grep -E 'Requests/sec|^ +(50|99)%|Non-2xx|errors'
done
case " $parts " in *" big "*) [ "$big" -gt 0 ] && big_part ;; esac
case " $parts " in *" streams "*) ;; *) streams=0 ;; esac
[ "$streams" -gt 0 ] || exit 0
for r in $(seq "$runs"); do
    echo "## run $r: $streams streams"
    start_server
    to_port=$port
    to_pid=$pid
    if [ "$relay" = 1 ]; then
        echo "(through a relay)"
        "$serve" --sdk-key "$key" --stream-uri "http://127.0.0.1:$port" --port $((port + 2)) \
            --max-connections $((streams + 1000)) --log-level warn 2>>"$tmp/relay.log" &
        to_pid=$!
        others="$others $to_pid"
        wait_http "http://127.0.0.1:$((port + 2))/status"
        to_port=$((port + 2))
    fi
    "$client" --port "$to_port" --key "$key" --streams "$streams" --pid "$to_pid" \
        --file "$tmp/flags.json" --flag "$flag"
    if [ "$relay" = 1 ]; then
        { kill "$to_pid" && wait "$to_pid"; } 2>/dev/null || true
    fi
done
