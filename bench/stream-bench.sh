#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# The stream group of ldasync-bench (an ld_client streaming 10,000 flags
# from a fake LaunchDarkly stream in the same process) and the same
# workloads for LaunchDarkly's Node server SDK (bench/node/stream-bench.mjs),
# alternated RUNS times (3) in the same minutes (bench/side-by-side.sh).
#
# usage: bench/stream-bench.sh [BUILD_DIR] (default: build), from the top of
# the tree; needs node and npm (`npm ci` runs once in bench/node).
set -eu
exec sh bench/side-by-side.sh "${1:-build}" stream bench/node/stream-bench.mjs
