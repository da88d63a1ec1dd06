#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# Analytics events side by side: the client.eval workloads of ldasync-bench
# (an ld_client evaluating with events off, on, and for a tracked flag,
# sending to a local events service) and the same for LaunchDarkly's Node
# server SDK (bench/node/events-bench.mjs), alternated RUNS times (3) in the
# same minutes; then ldasync's flush of 10,000 events (events.flush_10k).
# Each side prints the medians of its own 3 runs per round.
#
# usage: bench/events-bench.sh [BUILD_DIR] (default: build), from the top of
# the tree; needs node and npm (`npm ci` runs once in bench/node).
set -eu

build=${1:-build}
runs=${RUNS:-3}
bench=$build/bench/ldasync-bench
[ -x "$bench" ] || { echo "events-bench: build $bench first" >&2; exit 1; }
[ -d bench/node/node_modules/@launchdarkly/node-server-sdk ] ||
    (cd bench/node && npm ci --no-audit --no-fund)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$bench" --dump-eval-data >"$tmp/eval-data.json"
echo "# $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$runs"); do
    echo "## round $r: ldasync"
    "$bench" --runs 3 client.eval
    echo "## round $r: Node SDK"
    node bench/node/events-bench.mjs --runs 3 "$tmp/eval-data.json"
done
echo "## ldasync: a flush of 10,000 events"
"$bench" --runs 3 events.flush_10k
