#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# check-serve-cli.sh: the command line of ldasync-serve, as a user types it.
#
#   - --help and --version print to stdout and exit 0;
#   - every bad option, option value or argument, and a missing --data, print
#     a message naming the option to stderr and exit 2, serving nothing;
#   - the program started on data/flags.json (--port 0: a free port, read
#     from its log) answers /status and a flag, then stops cleanly on
#     SIGTERM (exit 0, "stopped" logged), and on SIGINT;
#   - with --client-side-id, evalx answers for that ID and 404 for another;
#   - a port already taken is exit 1 with the reason logged.
#
# SERVE_WRAPPER, when set, runs the program under it (make check-valgrind
# sets it to valgrind, which must then find no error and no leak). The HTTP
# part needs curl; without it, that part is skipped (the rest still runs).
#
# Environment (set by Makefile.am): top_builddir, top_srcdir.
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
serve=$top_builddir/serve/ldasync-serve
wrap=${SERVE_WRAPPER:-}
data=$top_srcdir/data/flags.json
tmp=$(mktemp -d)
pid=
failures=0
cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# expect CODE PATTERN STREAM ARGS...: the program exits CODE and prints a
# line matching PATTERN (grep -E) on STREAM (out or err).
expect() {
    code=$1 pattern=$2 stream=$3
    shift 3
    $wrap "$serve" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    [ "$got" -eq "$code" ] || fail "ldasync-serve $*: exit $got, not $code: $(cat "$tmp/err")"
    grep -Eq -- "$pattern" "$tmp/$stream" || fail "ldasync-serve $*: no \"$pattern\" on std$stream: $(cat "$tmp/$stream")"
}

unset LDASYNC_SDK_KEY # without --data, a key makes a relay
expect 0 '^Usage: ldasync-serve --data FILE' out --help
expect 0 '^  --client-side-id ID' out --help
expect 0 '^ldasync-serve \(ldasync\) [0-9]+\.[0-9]+\.[0-9]+' out --version
expect 2 'no --data file' err
expect 2 'no --data file' err --port 8030
expect 2 '--port: not a port: 65536' err --data "$data" --port 65536
expect 2 '--port: not a port: -1' err --data "$data" --port -1
expect 2 '--port: not a port: 80x' err --data "$data" --port 80x
expect 2 '--port: not a port: $' err --data "$data" --port ''
expect 2 '--max-connections: 1 to 1000000: 0' err --data "$data" --max-connections 0
expect 2 '--heartbeat: 1 to 86400 seconds: 86401' err --data "$data" --heartbeat 86401
expect 2 '--poll-interval: 1 to 86400000 ms: 0' err --data "$data" --poll-interval 0
expect 2 '--log-level: error, warn, info or debug: loud' err --data "$data" --log-level loud
expect 2 '--client-side-id: empty' err --data "$data" --client-side-id ''
expect 0 '^  --loop-probe MS' out --help
expect 2 '--loop-probe: 1 to 1000 ms: 0' err --data "$data" --loop-probe 0
expect 2 '--loop-probe: 1 to 1000 ms: 1001' err --data "$data" --loop-probe 1001
expect 2 'unexpected argument: extra' err --data "$data" extra
expect 2 'unrecognized option' err --data "$data" --no-such-option
expect 2 'requires an argument' err --data
expect 0 '^  --stream-uri URI' out --help
expect 0 '^  --polling' out --help
expect 2 '--data serves files' err --data "$data" --polling
expect 2 '--data serves files' err --data "$data" --stream-uri http://127.0.0.1:1
expect 2 '--sdk-key: not valid' err --sdk-key 'a key'
expect 2 '--stream-uri: not valid' err --sdk-key sdk-1 --stream-uri ftp://127.0.0.1
expect 2 '--base-uri: not valid' err --sdk-key sdk-1 --base-uri http://
expect 2 '--proxy: not valid' err --sdk-key sdk-1 --proxy 'http://a b'
expect 2 '--events-uri: not valid' err --sdk-key sdk-1 --events-uri ftp://127.0.0.1
expect 2 '--data serves files' err --data "$data" --events-uri http://127.0.0.1:1
expect 0 '^  --events-uri URI' out --help

# The program serving: start it, find its port in the log, stop it with SIG.
# run_and_stop SIG
run_and_stop() {
    sig=$1
    shift
    # emptied here, not only by the child's redirection: the loop below
    # must not read the previous run's port before the child starts
    : >"$tmp/log"
    $wrap "$serve" --data "$data" --port 0 --log-level info "$@" 2>"$tmp/log" &
    pid=$!
    port=
    i=0
    while [ -z "$port" ]; do
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\)/.*|\1|p' "$tmp/log")
        i=$((i + 1))
        if [ $i -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
            fail "ldasync-serve did not start: $(cat "$tmp/log")"
            kill -9 "$pid" 2>/dev/null
            pid=
            return
        fi
        [ -n "$port" ] || sleep 0.1
    done
    # the data is loaded from the loop once it runs: wait for it
    i=0
    until grep -q 'flag data loaded' "$tmp/log"; do
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "no 'flag data loaded': $(cat "$tmp/log")"; break; }
        sleep 0.1
    done
    if command -v curl >/dev/null; then
        curl -fsS "http://127.0.0.1:$port/status" >"$tmp/status" ||
            fail "GET /status on port $port"
        grep -q '"state":"valid"' "$tmp/status" || fail "/status: $(cat "$tmp/status")"
        # with --loop-probe, /status has the probe's counts; without, not
        if [ "$probe" = yes ]; then
            grep -q '"loop":{' "$tmp/status" || fail "/status without the probe: $(cat "$tmp/status")"
        else
            grep -q '"loop"' "$tmp/status" && fail "/status with a probe: $(cat "$tmp/status")"
        fi
        curl -fsS "http://127.0.0.1:$port/sdk/latest-flags/new-checkout" >"$tmp/flag" ||
            fail "GET /sdk/latest-flags/new-checkout"
        grep -q '"key":"new-checkout"' "$tmp/flag" || fail "the flag: $(cat "$tmp/flag")"
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/sdk/latest-flags/no-such-flag")
        [ "$code" = 404 ] || fail "a missing flag answered $code, not 404"
        # {"kind":"user","key":"u1"}, base64url
        ctx=eyJraW5kIjoidXNlciIsImtleSI6InUxIn0
        for env in env-a env-b; do
            code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/sdk/evalx/$env/contexts/$ctx")
            want=200
            [ "$sig" = TERM ] && [ "$env" = env-b ] && want=404
            [ "$code" = "$want" ] || fail "evalx for $env answered $code, not $want ($*)"
        done
    else
        echo "check-serve-cli: no curl: the HTTP requests are skipped"
    fi
    if [ "$sig" = TERM ]; then
        # a second server on the same port cannot listen: exit 1, the reason logged
        expect 1 'cannot listen on 127.0.0.1 port [0-9]+: Address already in use' err --data "$data" --port "$port"
    fi
    kill "-$sig" "$pid"
    wait "$pid"
    got=$?
    pid=
    [ "$got" -eq 0 ] || fail "SIG$sig: exit $got, not 0: $(cat "$tmp/log")"
    grep -q "signal .*: shutting down" "$tmp/log" || fail "SIG$sig: no shutdown logged: $(cat "$tmp/log")"
    tail -n 1 "$tmp/log" | grep -q 'info  stopped$' || fail "SIG$sig: not 'stopped' last: $(cat "$tmp/log")"
}
probe=no
run_and_stop TERM --client-side-id env-a
probe=yes
run_and_stop INT --loop-probe 5

if [ $failures -ne 0 ]; then
    echo "check-serve-cli: $failures failed" >&2
    exit 1
fi
echo "check-serve-cli: all passed"
exit 0
