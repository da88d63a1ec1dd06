#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# check-serve-redis.sh: ldasync-serve with Redis, against a redis-server
# this script starts on a unix socket in a temporary directory:
#   - the Redis options refused as a user mistypes them (exit 2);
#   - serving data/flags.json with --redis writes LaunchDarkly's layout into
#     Redis ({prefix}:features, :segments, :$inited), with --redis-prefix;
#   - a second server in daemon mode (--redis alone) serves the same data,
#     and a change of the file reaches its stream (/all) through Redis;
#   - /status reports the Redis store's availability: Redis killed, the
#     writer says unavailable ("degraded"); Redis restarted empty, the
#     writer (its cache forever, by default) writes everything back, $inited included.
# Skipped (77) without redis-server, redis-cli or curl.
#
# Environment (set by Makefile.am): top_builddir, top_srcdir.
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
serve=$top_builddir/serve/ldasync-serve
for tool in redis-server redis-cli curl python3; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: no $tool"; exit 77; }
done
tmp=$(mktemp -d)
sock=$tmp/redis.sock
rpid= w= d=
failures=0
cleanup() {
    for p in $w $d $rpid; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}
rcli() { redis-cli -s "$sock" "$@"; }
start_redis() {
    rm -f "$sock"
    redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$tmp" \
        --logfile "$tmp/redis.log" &
    rpid=$!
    i=0
    until rcli ping >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 200 ] && { echo "FAIL: redis-server did not start" >&2; exit 1; }
        sleep 0.05
    done
}
# wait_for DESCRIPTION COMMAND...: up to 10 s for COMMAND to succeed
wait_for() {
    what=$1
    shift
    i=0
    until "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 200 ] && { fail "$what"; return 1; }
        sleep 0.05
    done
}
port_of() { # LOG: the port the server logged
    sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$1" | head -n 1
}
started() { [ -n "$(port_of "$1")" ]; }

# ---- options ----
unset LDASYNC_SDK_KEY
expect2() { # PATTERN ARGS...
    pattern=$1
    shift
    "$serve" "$@" >/dev/null 2>"$tmp/err"
    got=$?
    [ $got -eq 2 ] || fail "ldasync-serve $*: exit $got, not 2"
    grep -Eq -- "$pattern" "$tmp/err" || fail "ldasync-serve $*: no \"$pattern\": $(cat "$tmp/err")"
}
data=$top_srcdir/data/flags.json
expect2 '--redis: not a Redis URL' --data "$data" --redis localhost:6379
expect2 '--redis: not a Redis URL' --data "$data" --redis rediss://host
expect2 '--cache-ttl' --data "$data" --redis "unix:$sock" --cache-ttl -2
expect2 '--cache-ttl' --data "$data" --redis "unix:$sock" --cache-ttl x
expect2 'need --redis' --data "$data" --cache-ttl 5
expect2 'need --redis' --data "$data" --redis-prefix p
expect2 'need --redis' --daemon-mode
expect2 '--redis-prefix: empty' --data "$data" --redis "unix:$sock" --redis-prefix ""
expect2 '--daemon-mode serves what Redis holds' --data "$data" --redis "unix:$sock" --daemon-mode

# ---- a writer and a daemon ----
start_redis
cp "$data" "$tmp/flags.json"
"$serve" --data "$tmp/flags.json" --redis "unix:$sock" --redis-prefix ldx \
    --port 0 --poll-interval 50 2>"$tmp/w.log" &
w=$!
wait_for "the writer did not start: $(cat "$tmp/w.log")" started "$tmp/w.log"
wp=$(port_of "$tmp/w.log")
wait_for "no \$inited in Redis" sh -c "[ \"\$(redis-cli -s '$sock' exists 'ldx:\$inited')\" = 1 ]"
# flags and flagValues both become flags
nflags=$(curl -fs "http://127.0.0.1:$wp/sdk/latest-all" |
    python3 -c "import json,sys; print(len(json.load(sys.stdin)['flags']))")
[ "$(rcli hlen ldx:features)" = "$nflags" ] || fail "ldx:features has $(rcli hlen ldx:features) fields, not $nflags"
[ "$(rcli type ldx:segments)" = hash ] || fail "ldx:segments is not a hash"
[ "$(rcli exists launchdarkly:features)" = 0 ] || fail "wrote under the default prefix"

"$serve" --redis "unix:$sock" --redis-prefix ldx --port 0 --poll-interval 50 2>"$tmp/d.log" &
d=$!
wait_for "the daemon did not start: $(cat "$tmp/d.log")" started "$tmp/d.log"
dp=$(port_of "$tmp/d.log")
grep -q "daemon mode" "$tmp/d.log" || fail "no daemon mode logged"
same() {
    curl -fs "http://127.0.0.1:$wp/sdk/latest-all" >"$tmp/w.json" &&
        curl -fs "http://127.0.0.1:$dp/sdk/latest-all" >"$tmp/d.json" &&
        python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(a!=b)" \
            "$tmp/w.json" "$tmp/d.json"
}
wait_for "the daemon does not serve what the writer wrote" same
curl -fs "http://127.0.0.1:$dp/status" | grep -q '"persistentStore":{"description":"redis","available":true' ||
    fail "the daemon's /status: $(curl -fs "http://127.0.0.1:$dp/status")"

# a change of the file: writer -> Redis -> daemon -> its stream
curl -sN "http://127.0.0.1:$dp/all" >"$tmp/stream" 2>/dev/null &
cpid=$!
wait_for "no put on the daemon's stream" grep -q '^event: put' "$tmp/stream"
python3 - "$tmp/flags.json" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
k = sorted(d["flags"])[0]
d["flags"][k]["version"] = d["flags"][k].get("version", 1) + 1000
d["flags"][k]["offVariation"] = 0
json.dump(d, open(p + ".new", "w"))
PY
mv "$tmp/flags.json.new" "$tmp/flags.json"
wait_for "the change did not reach the daemon's stream" grep -q '^event: patch' "$tmp/stream"
kill $cpid 2>/dev/null

# Redis goes away: the writer's /status says so; it comes back empty: the
# writer (cache forever) writes everything back
kill -9 $rpid
wait $rpid 2>/dev/null
rpid=
unavailable() { curl -fs "http://127.0.0.1:$wp/status" | grep -q '"available":false'; }
wait_for "the writer's /status never said Redis was unavailable" unavailable
curl -fs "http://127.0.0.1:$wp/status" | grep -q '"status":"degraded"' ||
    fail "the writer is not degraded without Redis: $(curl -fs "http://127.0.0.1:$wp/status")"
start_redis
wait_for "the writer did not write the data back" sh -c "[ \"\$(redis-cli -s '$sock' hlen ldx:features)\" = $nflags ]"
wait_for "no \$inited after the write-back" sh -c "[ \"\$(redis-cli -s '$sock' exists 'ldx:\$inited')\" = 1 ]"
available() { curl -fs "http://127.0.0.1:$wp/status" | grep -q '"available":true'; }
wait_for "the writer's /status never said Redis was back" available

for p in $w $d; do
    kill -TERM "$p"
    wait "$p" || fail "a server exited $? on SIGTERM"
done
w= d=
[ $failures -eq 0 ] || exit 1
echo "PASS: ldasync-serve with Redis (writer, daemon, stream, outage, write-back)"
