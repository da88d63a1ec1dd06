#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# The stream group of ldasync-bench (an ld_client streaming 10,000 flags
# from a fake LaunchDarkly stream in the same process) and the same
# workloads for LaunchDarkly's Node server SDK (bench/node/stream-bench.mjs),
# alternated RUNS times (3) in the same minutes, so that the two are
# compared on the same machine load. Each side prints the medians of its own
# 3 runs per round.
#
# usage: bench/stream-bench.sh [BUILD_DIR] (default: build), from the top of
# the tree; needs node and npm (`npm ci` runs once in bench/node).
set -eu

build=${1:-build}
runs=${RUNS:-3}
bench=$build/bench/ldasync-bench
[ -x "$bench" ] || { echo "stream-bench: build $bench first" >&2; exit 1; }
[ -d bench/node/node_modules/@launchdarkly/node-server-sdk ] ||
    (cd bench/node && npm ci --no-audit --no-fund)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$bench" --dump-eval-data >"$tmp/eval-data.json"
echo "# $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$runs"); do
    echo "## round $r: ldasync"
    "$bench" --runs 3 stream
    echo "## round $r: Node SDK"
    node bench/node/stream-bench.mjs --runs 3 "$tmp/eval-data.json"
done
