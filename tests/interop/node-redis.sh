#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# ldasync's Redis store (libldasync-redis, through tests/interop/redis-tool)
# against LaunchDarkly's Node SDK Redis store (@launchdarkly/node-server-sdk-redis,
# the version pinned in package.json) on a redis-server of the test's own,
# with data/flags.json's data:
#   A. Node writes (init with a tombstone of each kind, upserts, a delete),
#      ldasync reads: the same items, item by item, no tombstone,
#      initialized; ldasync's writes do not pass Node's tombstones;
#   B. ldasync writes (under a prefix other than the default), Node's store
#      reads the same items and initialized, and the Node SDK in daemon mode
#      (useLdd) on that Redis evaluates every flag for several contexts as
#      the same SDK reading the same data from a flag file;
#   C. the raw layout (redis-cli): the same keys, types, hash fields and
#      values from the same writes by each.
# See node-redis.mjs.
#
# usage, from the top of the tree: tests/interop/node-redis.sh [BUILD_DIR]
# Needs a build whose `make check` (or `make tests/interop/redis-tool`) has
# run, redis-server and redis-cli (Debian: redis-server, redis-tools), node
# (18 or later) and npm with the npm registry (`npm ci` runs once, in
# tests/interop). Not part of `make check`.
set -eu

build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
tool=$build/tests/interop/redis-tool
[ -x "$tool" ] || { echo "node-redis: build $tool first (make check, or make tests/interop/redis-tool)" >&2; exit 1; }
tool=$(cd "$(dirname "$tool")" && pwd)/redis-tool
for prog in redis-server redis-cli node; do
    command -v $prog >/dev/null || { echo "node-redis: $prog not found" >&2; exit 1; }
done
[ -d "$here/node_modules/@launchdarkly/node-server-sdk-redis" ] || (cd "$here" && npm ci --no-audit --no-fund)

tmp=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ]; then
        # (a process ended by the signal makes `wait` fail: not the test's status)
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
sock=$tmp/redis.sock
redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --save '' --appendonly no \
    --dir "$tmp" >"$tmp/redis.log" 2>&1 &
pid=$!
i=0
until redis-cli -s "$sock" ping 2>/dev/null | grep -q PONG; do
    i=$((i + 1))
    [ $i -gt 100 ] && { echo "node-redis: redis-server did not start" >&2; cat "$tmp/redis.log" >&2; exit 1; }
    sleep 0.1
done
echo "node-redis: $(redis-server --version | cut -d' ' -f1-3), $(node --version)," \
    "@launchdarkly/node-server-sdk $(node -p "require('$here/node_modules/@launchdarkly/node-server-sdk/package.json').version")," \
    "@launchdarkly/node-server-sdk-redis $(node -p "require('$here/node_modules/@launchdarkly/node-server-sdk-redis/package.json').version")"
mkdir "$tmp/work"
status=0
node "$here/node-redis.mjs" "$tool" "$sock" data/flags.json "$tmp/work" || status=$?
if [ $status -ne 0 ]; then
    echo "---- redis-server's log ----" >&2
    cat "$tmp/redis.log" >&2
fi
exit $status
