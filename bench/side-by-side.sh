#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# A group of ldasync-bench and the same workloads for LaunchDarkly's Node
# server SDK (a script of bench/node/), alternated RUNS times (3) in the
# same minutes, so that the two are compared on the same machine load. Each
# side prints the medians of its own 3 runs per round. bench/stream-bench.sh,
# bench/events-bench.sh and bench/redis-bench.sh call it.
#
# usage: bench/side-by-side.sh BUILD_DIR GROUP NODE_SCRIPT, from the top of
# the tree; needs node and npm (`npm ci` runs once in bench/node).
set -eu

build=$1
group=$2
script=$3
runs=${RUNS:-3}
bench=$build/bench/ldasync-bench
[ -x "$bench" ] || { echo "side-by-side: build $bench first" >&2; exit 1; }
[ -d bench/node/node_modules/@launchdarkly/node-server-sdk ] &&
    [ -d bench/node/node_modules/@launchdarkly/node-server-sdk-redis ] ||
    (cd bench/node && npm ci --no-audit --no-fund)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$bench" --dump-eval-data >"$tmp/eval-data.json"
echo "# $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$runs"); do
    echo "## round $r: ldasync"
    "$bench" --runs 3 "$group"
    echo "## round $r: Node SDK"
    node "$script" --runs 3 "$tmp/eval-data.json"
done
