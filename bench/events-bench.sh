#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# Analytics events side by side: the client.eval workloads of ldasync-bench
# (an ld_client evaluating with events off, on, and for a tracked flag,
# sending to a local events service) and the same for LaunchDarkly's Node
# server SDK (bench/node/events-bench.mjs), alternated RUNS times (3) in the
# same minutes (bench/side-by-side.sh); then ldasync's flush of 10,000
# events (events.flush_10k).
#
# usage: bench/events-bench.sh [BUILD_DIR] (default: build), from the top of
# the tree; needs node and npm (`npm ci` runs once in bench/node).
set -eu
build=${1:-build}
sh bench/side-by-side.sh "$build" client.eval bench/node/events-bench.mjs
echo "## ldasync: a flush of 10,000 events"
"$build/bench/ldasync-bench" --runs 3 events.flush_10k
