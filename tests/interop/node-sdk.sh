#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# LaunchDarkly's Node server SDK (the version pinned in package.json) as a
# client of ldasync-serve serving data/flags.json: by polling and by
# streaming, its evaluations must equal those of the same SDK reading the
# file itself, and a change of the file must reach the streaming client.
# Then the same through a relay chain: the file -> ldasync-serve ->
# ldasync-serve relaying it by streaming -> the SDK (the change of the file
# must travel the whole chain), and the SDK's events must reach, through
# the relay, the events service the relay forwards to (events-receiver.mjs
# stands in for it). See node-sdk.mjs.
#
# usage, from the top of the tree: tests/interop/node-sdk.sh [BUILD_DIR]
# Needs node (18 or later) and npm with the npm registry (`npm ci` runs
# once, in tests/interop). Not part of `make check`.
set -eu

build=${1:-build}
port=${PORT:-18091}
key=sdk-interop-key
here=$(cd "$(dirname "$0")" && pwd)
serve=$build/serve/ldasync-serve
[ -x "$serve" ] || { echo "node-sdk: build $serve first" >&2; exit 1; }
[ -d "$here/node_modules/@launchdarkly/node-server-sdk" ] || (cd "$here" && npm ci --no-audit --no-fund)

tmp=$(mktemp -d)
pid=
relay=
receiver=
cleanup() {
    for p in $relay $pid $receiver; do
        # (a process ended by the signal makes `wait` fail: not the test's status)
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
cp data/flags.json "$tmp/flags.json"
wait_up() { # PORT LOG
    i=0
    until curl -fs "http://127.0.0.1:$1/status" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 100 ] && { echo "node-sdk: a server did not start" >&2; cat "$2" >&2; exit 1; }
        sleep 0.1
    done
}
"$serve" --data "$tmp/flags.json" --port "$port" --sdk-key "$key" 2>"$tmp/serve.log" &
pid=$!
wait_up "$port" "$tmp/serve.log"
status=0
node "$here/node-sdk.mjs" "http://127.0.0.1:$port" "$key" "$tmp/flags.json" || status=$?
if [ $status -eq 0 ]; then
    # the chain: a new file server (versions from the file again) -> a
    # streaming relay -> the SDK
    kill "$pid" && wait "$pid" 2>/dev/null || true
    cp data/flags.json "$tmp/flags.json"
    "$serve" --data "$tmp/flags.json" --port "$port" --sdk-key "$key" 2>"$tmp/serve.log" &
    pid=$!
    wait_up "$port" "$tmp/serve.log"
    : >"$tmp/events.jsonl"
    node "$here/events-receiver.mjs" $((port + 2)) "$tmp/events.jsonl" 2>"$tmp/receiver.log" &
    receiver=$!
    "$serve" --sdk-key "$key" --stream-uri "http://127.0.0.1:$port" --port $((port + 1)) \
        --events-uri "http://127.0.0.1:$((port + 2))" 2>"$tmp/relay.log" &
    relay=$!
    wait_up $((port + 1)) "$tmp/relay.log"
    node "$here/node-sdk.mjs" "http://127.0.0.1:$((port + 1))" "$key" "$tmp/flags.json" \
        "$tmp/events.jsonl" || status=$?
fi
if [ $status -ne 0 ]; then
    echo "---- ldasync-serve's log ----" >&2
    cat "$tmp/serve.log" >&2
    [ -f "$tmp/relay.log" ] && { echo "---- the relay's log ----" >&2; cat "$tmp/relay.log" >&2; }
fi
exit $status
