#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# The Redis store side by side: the redis group of ldasync-bench (the
# Redis store of libldasync-redis: init of the eval group's 10,002 flags
# and its longest loop pass, uncached gets one at a time and 64 in flight,
# all of the features) and the same workloads for LaunchDarkly's Node
# server SDK's Redis store (bench/node/redis-bench.mjs: RedisFeatureStore,
# cacheTTL 0), alternated RUNS times (3) in the same minutes
# (bench/side-by-side.sh), both against one redis-server that this script
# starts on a unix socket in a temporary directory (given to both as
# $LDASYNC_BENCH_REDIS) and kills at the end. Then a table of the medians
# of the rounds (each round's figure is the median of its 3 runs).
#
# usage: bench/redis-bench.sh [BUILD_DIR] (default: build), from the top of
# the tree; needs redis-server ($REDIS_SERVER or PATH), node and npm
# (`npm ci` runs once in bench/node). Without a redis-server it says so and
# exits 0.
set -eu
build=${1:-build}
prog=${REDIS_SERVER:-$(command -v redis-server || true)}
if [ -z "$prog" ] || [ ! -x "$prog" ]; then
    echo "redis-bench: skipped: no redis-server (set REDIS_SERVER or put it in PATH)"
    exit 0
fi
dir=$(mktemp -d)
"$prog" --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$dir" --logfile "$dir/redis.log" --daemonize no &
pid=$!
trap 'kill "$pid" 2>/dev/null || :; wait "$pid" 2>/dev/null || :; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
i=0
until [ -S "$dir/redis.sock" ]; do
    i=$((i + 1))
    [ "$i" -le 500 ] || { echo "redis-bench: redis-server did not start" >&2; exit 1; }
    sleep 0.02
done
export LDASYNC_BENCH_REDIS="$dir/redis.sock"
echo "# $("$prog" --version)"
sh bench/side-by-side.sh "$build" redis bench/node/redis-bench.mjs | tee "$dir/out.txt"
echo "## medians of the rounds (min-max); ns per get unless the name says; gets/s = 1e9 / ns"
awk '
/^## round [0-9]+: ldasync/ { side = "c"; next }
/^## round [0-9]+: Node SDK/ { side = "n"; next }
/^redis\./ && $3 ~ /^[0-9.]+$/ {
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    v[side, $1] = v[side, $1] " " $3
}
function med(s,    a, k, i, j, t) {
    k = split(s, a, " ")
    if (k == 0) return ""
    for (i = 2; i <= k; i++)
        for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    lo = a[1]; hi = a[k]
    return a[int((k + 1) / 2)]
}
END {
    printf "| %-24s | %-26s | %-26s | %s |\n", "workload", "ldasync", "Node SDK", "Node / ldasync"
    for (i = 1; i <= n; i++) {
        w = order[i]
        c = med(v["c", w]); cs = c == "" ? "-" : sprintf("%s (%s-%s)", c, lo, hi)
        m = med(v["n", w]); ms = m == "" ? "-" : sprintf("%s (%s-%s)", m, lo, hi)
        r = (c != "" && m != "" && c + 0 > 0) ? sprintf("%.2f", m / c) : "-"
        printf "| %-24s | %-26s | %-26s | %s |\n", w, cs, ms, r
    }
}' "$dir/out.txt"
