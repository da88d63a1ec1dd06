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
#     resident memory per stream.
#
# usage: bench/serve-bench.sh [BUILD_DIR] (default: build), from the top of
# the tree. Environment: RUNS (3), SECONDS_PER_RUN (10), STREAMS (10000),
# PORT (18090), FLAG (max-upload-mb: a flag of data/flags.json with
# numbers for variations). wrk and the server share the machine's cores: the figures
# are those of one machine serving itself.
set -eu

build=${1:-build}
runs=${RUNS:-3}
secs=${SECONDS_PER_RUN:-10}
streams=${STREAMS:-10000}
port=${PORT:-18090}
key=sdk-bench-key
serve=$build/serve/ldasync-serve
client=$build/bench/ldasync-streams
command -v wrk >/dev/null || { echo "serve-bench: wrk is missing (apt-get install wrk)" >&2; exit 1; }
[ -x "$serve" ] && [ -x "$client" ] || { echo "serve-bench: build $serve and $client first" >&2; exit 1; }

tmp=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
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
    cp data/flags.json "$tmp/flags.json"
    "$serve" --data "$tmp/flags.json" --port "$port" --sdk-key "$key" \
        --max-connections $((streams + 1000)) --log-level warn 2>>"$tmp/serve.log" &
    pid=$!
    i=0
    until curl -fs "http://127.0.0.1:$port/status" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 100 ] && { echo "serve-bench: the server did not start" >&2; cat "$tmp/serve.log" >&2; exit 1; }
        sleep 0.1
    done
}
start_server

flag=${FLAG:-max-upload-mb}
ctx=$(printf '{"kind":"user","key":"bench-user","email":"u@example.com"}' | base64 -w0 | tr '+/' '-_' | tr -d '=')

echo "# ldasync-serve $("$serve" --version 2>&1 | head -1), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M') UTC"
for r in $(seq "$runs"); do
    echo "## run $r: latest-flags/$flag"
    wrk -t2 -c64 -d"${secs}s" --latency -H "Authorization: $key" \
        "http://127.0.0.1:$port/sdk/latest-flags/$flag" | grep -E 'Requests/sec|^ +(50|99)%|Non-2xx|errors'
    echo "## run $r: evalx"
    wrk -t2 -c64 -d"${secs}s" --latency \
        "http://127.0.0.1:$port/sdk/evalx/bench-env/contexts/$ctx" | grep -E 'Requests/sec|^ +(50|99)%|Non-2xx|errors'
done
for r in $(seq "$runs"); do
    echo "## run $r: $streams streams"
    start_server
    "$client" --port "$port" --key "$key" --streams "$streams" --pid "$pid" \
        --file "$tmp/flags.json" --flag "$flag"
done
