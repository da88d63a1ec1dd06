#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# check-serve-redis-refresh.sh: ldasync-serve --data FILE --redis URL with
# --cache-ttl 0 and 30, -1 (the default) too: Redis restarts empty, and
# the writer writes the data set again (the Redis store, or the cache in
# front of it, says needs_refresh when Redis is back; the data system then
# has the file read again). Second part: Redis absent when the writer
# starts, then started: the failed init is made again once Redis answers.
# Skipped (77) without redis-server or redis-cli.
#
# Environment (set by Makefile.am): top_builddir, top_srcdir.
set -u
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
serve=$top_builddir/serve/ldasync-serve
for tool in redis-server redis-cli; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: no $tool"; exit 77; }
done
tmp=$(mktemp -d)
sock=$tmp/redis.sock
rpid= w=
failures=0
cleanup() {
    for p in $w $rpid; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
start_redis() {
    rm -f "$sock"
    redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$tmp" \
        --logfile "$tmp/redis.log" &
    rpid=$!
    i=0
    until redis-cli -s "$sock" ping >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 200 ] && { echo "FAIL: redis-server did not start" >&2; exit 1; }
        sleep 0.05
    done
}
inited() { [ "$(redis-cli -s "$sock" exists 'launchdarkly:$inited')" = 1 ]; }
wait_inited() { # SECONDS
    i=0
    until inited; do
        i=$((i + 1))
        [ $i -gt $(($1 * 20)) ] && return 1
        sleep 0.05
    done
}
for ttl in -1 0 30; do
    start_redis
    "$serve" --data "$top_srcdir/data/flags.json" --redis "unix:$sock" --cache-ttl $ttl \
        --port 0 2>"$tmp/w.log" &
    w=$!
    wait_inited 10 || { echo "FAIL: ttl $ttl: the writer did not write" >&2; failures=$((failures + 1)); }
    kill -9 $rpid
    wait $rpid 2>/dev/null
    sleep 1
    start_redis
    if ! wait_inited 10; then
        echo "FAIL: --cache-ttl $ttl: Redis restarted empty is not written again within 10 s" >&2
        failures=$((failures + 1))
    fi
    kill $w
    wait $w
    w=
    kill $rpid
    wait $rpid 2>/dev/null
    rpid=
done
for ttl in -1 0; do
    rm -f "$sock"
    "$serve" --data "$top_srcdir/data/flags.json" --redis "unix:$sock" --cache-ttl $ttl \
        --port 0 2>"$tmp/w.log" &
    w=$!
    sleep 1
    start_redis
    if ! wait_inited 10; then
        echo "FAIL: --cache-ttl $ttl: Redis started after the writer is not written within 10 s" >&2
        failures=$((failures + 1))
    fi
    kill $w
    wait $w
    w=
    kill $rpid
    wait $rpid 2>/dev/null
    rpid=
done
[ $failures = 0 ] && echo "PASS" || exit 1
