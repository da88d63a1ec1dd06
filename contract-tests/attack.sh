#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# attack.sh: ldasync-test-service driven as an adversary would, over HTTP:
#   - bodies of the wrong shape (empty, not JSON, invalid UTF-8, deep
#     nesting, fields of the wrong type): 400 with a message; a chunked
#     body is read; a body or headers larger than the service takes are
#     refused at once, without waiting for (and buffering) all of it;
#   - ints past 2^53 and reals past INT64_MAX: as ld_client_int_variation();
#   - a big segment callback service that accepts and never answers:
#     evaluations running side by side each answer STORE_ERROR within a
#     few seconds (not one after the other);
#   - a stream that accepts and never answers: a create that waits for it
#     does not stop the service; a requester that goes away while its
#     create waits; creating and deleting 200 clients leaves the open
#     descriptors as they were;
#   - DELETE / while a create waits: that create is answered 503, a
#     second DELETE / too (or finds nothing listening), the service
#     exits 0;
#   - SIGTERM while clients exist and a create waits: exit 0;
#   - out of descriptors: no busy loop of accept() errors, SIGTERM stops.
# bigseg-fixture ("hang") plays the silent peer, ldasync-serve the
# LaunchDarkly stream. Built with ASan or under SERVICE_WRAPPER
# (valgrind), an error or a leak makes the service's exit status non-zero;
# an UBSan report in its log fails the test too.
#
# Needs curl; without it the test is skipped (77).
# Environment (set by Makefile.am): top_builddir, top_srcdir.
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
serve=$top_builddir/serve/ldasync-serve
service=$top_builddir/contract-tests/ldasync-test-service
fixture=$top_builddir/contract-tests/bigseg-fixture
wrap=${SERVICE_WRAPPER:-}
data=$top_srcdir/data/flags.json
key=sdk-attack-key
tmp=$(mktemp -d)
serve_pid=
service_pid=
fixture_pid=
bg_pids=
failures=0

cleanup() {
    for p in $bg_pids $fixture_pid $serve_pid $service_pid; do
        kill -9 "$p" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

command -v curl >/dev/null || { echo "attack: no curl: skipped"; exit 77; }

. "$top_srcdir/contract-tests/common.sh"

# start_service: a service in $service_pid, its URL in $url, its log
# $tmp/service.log.
start_service() {
    : >"$tmp/service.log"
    $wrap "$service" --port 0 --verbose 2>"$tmp/service.log" &
    service_pid=$!
    port=$(port_of "$tmp/service.log" "$service_pid") ||
        { cat "$tmp/service.log"; echo "FAIL: the service did not start"; exit 1; }
    url=http://127.0.0.1:$port
}

# stopped WHAT: waits for the service to exit; 0 with "stopped" logged.
stopped() {
    i=0
    while kill -0 "$service_pid" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 600 ] && { fail "$1: the service did not stop"; kill -9 "$service_pid"; break; }
        sleep 0.1
    done
    wait "$service_pid"
    rc=$?
    service_pid=
    [ "$rc" = 0 ] || fail "$1: the service exited $rc: $(tail -20 "$tmp/service.log")"
    grep -q 'stopped' "$tmp/service.log" || fail "$1: no 'stopped' in the log"
    # UBSan reports without changing the exit status.
    ! grep -q 'runtime error' "$tmp/service.log" ||
        fail "$1: $(grep -m 3 'runtime error' "$tmp/service.log")"
}

# req METHOD PATH [BODY]: the status in $code, the body in $tmp/body.
req() {
    if [ $# -ge 3 ]; then
        code=$(curl -s -m 30 -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' -X "$1" \
            -H 'Content-Type: application/json' --data-binary "$3" "$url$2")
    else
        code=$(curl -s -m 30 -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' -X "$1" "$url$2")
    fi
}

# create JSON: POST /, the client's path in $client.
create() {
    req POST / "$1"
    client=$(sed -n 's|^[Ll]ocation: \(/clients/[0-9]*\).*|\1|p' "$tmp/headers" | tr -d '\r')
}

# bad WHAT PATH BODY: a 400 with a message.
bad() {
    req POST "$2" "$3"
    [ "$code" = 400 ] && [ -s "$tmp/body" ] || fail "$1: status $code, not 400 with a message: $(head -c 200 "$tmp/body")"
}

# nfds: the service's open descriptors (empty without /proc).
nfds() {
    [ -d "/proc/$service_pid/fd" ] && ls "/proc/$service_pid/fd" | wc -l | tr -d ' '
}

: >"$tmp/fixture.log"
: >"$tmp/serve.log"
cat >"$tmp/bigseg.json" <<'JSON'
{"flags": {"huge-int": {"key": "huge-int", "version": 1, "on": true, "variations": [1e300, -1e300],
  "offVariation": 0, "fallthrough": {"variation": 0}, "salt": "s"},
 "big-flag": {"key": "big-flag", "version": 1, "on": true, "variations": [false, true],
  "offVariation": 0, "fallthrough": {"variation": 0}, "salt": "s",
  "rules": [{"id": "in-big", "variation": 1,
    "clauses": [{"attribute": "key", "op": "segmentMatch", "values": ["big-seg"], "negate": false}]}]}},
 "segments": {"big-seg": {"key": "big-seg", "version": 1, "unbounded": true, "generation": 3,
  "included": [], "excluded": [], "rules": [], "salt": "s"}}}
JSON
"$fixture" 2>"$tmp/fixture.log" &
fixture_pid=$!
fport=$(port_of "$tmp/fixture.log" "$fixture_pid") || { cat "$tmp/fixture.log"; echo "FAIL: bigseg-fixture did not start"; exit 1; }
silent=http://127.0.0.1:$fport
curl -s -o /dev/null -X POST --data-binary '{"status":"hang"}' "$silent/control"
"$serve" --data "$data" --data "$tmp/bigseg.json" --port 0 --sdk-key "$key" 2>"$tmp/serve.log" &
serve_pid=$!
sport=$(port_of "$tmp/serve.log" "$serve_pid") || { cat "$tmp/serve.log"; echo "FAIL: ldasync-serve did not start"; exit 1; }
i=0
until grep -q 'flag data loaded' "$tmp/serve.log"; do
    i=$((i + 1))
    [ $i -gt 300 ] && { echo "FAIL: no flag data: $(cat "$tmp/serve.log")"; exit 1; }
    sleep 0.1
done
upstream=http://127.0.0.1:$sport

start_service

# ---- Bodies --------------------------------------------------------------
create '{"tag":"good","configuration":{"credential":"'$key'","streaming":{"baseUri":"'$upstream'"}}}'
[ "$code" = 201 ] && [ -n "$client" ] || fail "create: status $code: $(cat "$tmp/body")"
good=$client
bad "an empty body" / ''
bad "a body that is not JSON" / '{"configuration":'
bad "a JSON array" / '[]'
bad "invalid UTF-8" / "$(printf '{"configuration":{"credential":"k\377"}}')"
bad "deep nesting" / "$(printf '%01000d' 0 | sed 's/0/[/g')"
bad "no configuration" / '{"configuration":null}'
bad "a tag of the wrong type" / '{"tag":5,"configuration":{"credential":"'$key'"}}'
bad "a credential of the wrong type" / '{"configuration":{"credential":5}}'
bad "a negative startWaitTimeMs" / '{"configuration":{"credential":"'$key'","startWaitTimeMs":-1}}'
bad "a startWaitTimeMs string" / '{"configuration":{"credential":"'$key'","startWaitTimeMs":"5"}}'
bad "a huge startWaitTimeMs" / '{"configuration":{"credential":"'$key'","startWaitTimeMs":1e300}}'
bad "initCanFail of the wrong type" / '{"configuration":{"credential":"'$key'","initCanFail":1}}'
bad "streaming of the wrong type" / '{"configuration":{"credential":"'$key'","streaming":[]}}'
bad "a negative initialRetryDelayMs" / '{"configuration":{"credential":"'$key'","streaming":{"initialRetryDelayMs":-5}}}'
bad "an applicationId of the wrong type" / '{"configuration":{"credential":"'$key'","tags":{"applicationId":7}}}'
bad "a wrapper name with CR LF" / '{"configuration":{"credential":"'$key'","wrapper":{"name":"a\r\nX: 1"}}}'
bad "skipVerifyPeer of the wrong type" / '{"configuration":{"credential":"'$key'","tls":{"skipVerifyPeer":"yes"}}}'
bad "a callbackUri of the wrong type" / '{"configuration":{"credential":"'$key'","bigSegments":{"callbackUri":5}}}'
bad "hooks of the wrong type" / '{"configuration":{"credential":"'$key'","hooks":5}}'
bad "a command that is not JSON" "$good" 'x'
bad "a command of the wrong type" "$good" '{"command":5}'
bad "evaluate not an object" "$good" '{"command":"evaluate","evaluate":[]}'
bad "a valueType of the wrong type" "$good" '{"command":"evaluate","evaluate":{"flagKey":"f","valueType":5}}'
bad "detail of the wrong type" "$good" '{"command":"evaluate","evaluate":{"flagKey":"f","detail":"yes"}}'
bad "withReasons of the wrong type" "$good" '{"command":"evaluateAll","evaluateAll":{"withReasons":5}}'
bad "a contextConvert input of the wrong type" "$good" '{"command":"contextConvert","contextConvert":{"input":5}}'
bad "contextBuild multi of the wrong type" "$good" '{"command":"contextBuild","contextBuild":{"multi":{}}}'
# 1 MB of flag key: answered, not refused.
big=$(head -c 1048576 /dev/zero | tr '\0' x)
printf '{"command":"evaluate","evaluate":{"flagKey":"%s","context":{"kind":"user","key":"u"},"valueType":"bool","defaultValue":true}}' "$big" >"$tmp/bigkey.json"
code=$(curl -s -m 30 -o "$tmp/body" -w '%{http_code}' --data-binary @"$tmp/bigkey.json" "$url$good")
[ "$code" = 200 ] && [ "$(cat "$tmp/body")" = '{"value":true}' ] || fail "a 1 MB flag key: $code $(head -c 200 "$tmp/body")"
# A chunked body.
code=$(curl -s -m 30 -o "$tmp/body" -w '%{http_code}' -H 'Transfer-Encoding: chunked' \
    --data-binary '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","context":{"kind":"org","key":"org-acme"},"valueType":"bool","defaultValue":false}}' "$url$good")
[ "$code" = 200 ] && [ "$(cat "$tmp/body")" = '{"value":true}' ] || fail "a chunked body: $code $(cat "$tmp/body")"
# A body announced larger than the service takes (16 MB) is refused at
# once: the service does not wait for it, nor buffer it.
code=$(curl -s -m 5 -o "$tmp/body" -w '%{http_code}' -H 'Content-Length: 104857600' \
    --data-binary 'x' "$url/")
[ "$code" = 413 ] || fail "a 100 MB body announced: status $code, not 413 at once"
# 800 kB of headers (100 lines of 8 kB): refused, not buffered.
line=$(head -c 8000 /dev/zero | tr '\0' a)
i=0
: >"$tmp/hdr"
while [ $i -lt 100 ]; do
    echo "X-Big-$i: $line" >>"$tmp/hdr"
    i=$((i + 1))
done
code=$(curl -s -m 10 -o "$tmp/body" -w '%{http_code}' -H @"$tmp/hdr" "$url/")
case $code in
4??) ;;
*) fail "800 kB of headers: status $code, not 4xx" ;;
esac

# ---- Numbers at the edges ------------------------------------------------
# An int as ld_client_int_variation() serves it: integers exact (past
# 2^53), reals truncated and saturated at INT64_MIN and INT64_MAX, with or
# without detail.
ev_int() {
    req POST "$good" '{"command":"evaluate","evaluate":{"flagKey":"'$1'","context":{"kind":"user","key":"u"},"valueType":"int","defaultValue":'$2',"detail":'$3'}}'
}
ev_int no-such-flag 9007199254740993 false
[ "$(cat "$tmp/body")" = '{"value":9007199254740993}' ] || fail "an int default past 2^53: $code $(cat "$tmp/body")"
ev_int no-such-flag -9007199254740993 true
grep -q '"value":-9007199254740993}' "$tmp/body" || fail "an int default past -2^53, detail: $code $(cat "$tmp/body")"
ev_int huge-int 0 false
[ "$(cat "$tmp/body")" = '{"value":9223372036854775807}' ] || fail "an int flag of 1e300: $code $(cat "$tmp/body")"
ev_int huge-int 0 true
grep -q '"value":9223372036854775807,' "$tmp/body" || fail "an int flag of 1e300, detail: $code $(cat "$tmp/body")"
ev_int no-such-flag -1e300 true
grep -q '"value":-9223372036854775808}' "$tmp/body" || fail "an int default of -1e300, detail: $code $(cat "$tmp/body")"

# ---- A big segment store that never answers ------------------------------
create '{"tag":"silent store","configuration":{"credential":"'$key'","streaming":{"baseUri":"'$upstream'"},
  "bigSegments":{"callbackUri":"'$silent'/cb"}}}'
[ "$code" = 201 ] || fail "create with a silent big segment store: $code $(cat "$tmp/body")"
silent_client=$client
for n in 1 2 3; do
    curl -s -m 8 -o "$tmp/eval$n" -w '%{http_code}' -X POST --data-binary \
        '{"command":"evaluate","evaluate":{"flagKey":"big-flag","context":{"kind":"user","key":"user-'$n'"},"valueType":"bool","defaultValue":false,"detail":true}}' \
        "$url$silent_client" >"$tmp/eval$n.code" &
    bg_pids="$bg_pids $!"
done
req GET /
[ "$code" = 200 ] || fail "GET / while evaluations wait for the store: $code"
wait $bg_pids
bg_pids=
for n in 1 2 3; do
    [ "$(cat "$tmp/eval$n.code")" = 200 ] && grep -q '"bigSegmentsStatus":"STORE_ERROR"' "$tmp/eval$n" ||
        fail "evaluation $n of 3 with a silent store: not STORE_ERROR within 8 s: $(cat "$tmp/eval$n.code") $(cat "$tmp/eval$n")"
done
req DELETE "$silent_client"
[ "$code" = 204 ] || fail "delete the client with a silent store: $code"

# ---- Orders --------------------------------------------------------------
fds_before=$(nfds)
# A requester that goes away while its create waits for a silent stream.
curl -s -m 1 -o /dev/null -X POST --data-binary \
    '{"tag":"gone","configuration":{"credential":"'$key'","startWaitTimeMs":2000,"streaming":{"baseUri":"'$silent'"}}}' "$url/"
i=0
while [ $i -lt 200 ]; do
    create '{"tag":"churn","configuration":{"credential":"'$key'","streaming":{"baseUri":"'$upstream'"}}}'
    [ "$code" = 201 ] || { fail "create $i of 200: $code $(cat "$tmp/body")"; break; }
    req DELETE "$client"
    [ "$code" = 204 ] || { fail "delete $i of 200: $code"; break; }
    i=$((i + 1))
done
sleep 2
fds_after=$(nfds)
if [ -n "$fds_before" ] && [ "$fds_after" -gt $((fds_before + 2)) ]; then
    fail "open descriptors: $fds_before before 200 clients, $fds_after after"
fi
req POST "$good" '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","context":{"kind":"org","key":"org-acme"},"valueType":"bool","defaultValue":false}}'
[ "$code" = 200 ] && [ "$(cat "$tmp/body")" = '{"value":true}' ] || fail "evaluate after the churn: $code $(cat "$tmp/body")"

# DELETE / while a create waits for a silent stream: that create is
# answered (503), the service stops.
curl -s -m 20 -o "$tmp/pending.body" -w '%{http_code}' -X POST --data-binary \
    '{"tag":"pending","configuration":{"credential":"'$key'","startWaitTimeMs":60000,"streaming":{"baseUri":"'$silent'"}}}' \
    "$url/" >"$tmp/pending.code" &
pending=$!
bg_pids=$pending
sleep 1
req DELETE /
[ "$code" = 204 ] || fail "DELETE / with a create pending: $code"
# Two in a row: the second finds the service stopping, or gone.
req DELETE /
case $code in
503 | 000) ;;
*) fail "DELETE / again: $code" ;;
esac
wait $pending
bg_pids=
[ "$(cat "$tmp/pending.code")" = 503 ] || fail "the create pending at DELETE /: status $(cat "$tmp/pending.code"), not 503"
stopped "DELETE / with a create pending"

# SIGTERM while clients exist and a create waits.
start_service
create '{"tag":"live","configuration":{"credential":"'$key'","streaming":{"baseUri":"'$upstream'"}}}'
[ "$code" = 201 ] || fail "create before SIGTERM: $code"
create '{"tag":"can fail","configuration":{"credential":"'$key'","startWaitTimeMs":100,"initCanFail":true,"streaming":{"baseUri":"'$silent'"}}}'
[ "$code" = 201 ] || fail "create with initCanFail before SIGTERM: $code"
curl -s -m 20 -o /dev/null -X POST --data-binary \
    '{"tag":"pending","configuration":{"credential":"'$key'","startWaitTimeMs":60000,"streaming":{"baseUri":"'$silent'"}}}' \
    "$url/" &
bg_pids=$!
sleep 1
kill -TERM "$service_pid"
stopped "SIGTERM"
wait $bg_pids
bg_pids=

# Out of descriptors (32 at most, 40 requesters waiting on a silent
# stream): the service pauses accepting instead of trying again at once,
# and logging it, in a busy loop; SIGTERM still stops it.
: >"$tmp/service.log"
(ulimit -n 32 && exec $wrap "$service" --port 0 --verbose) 2>"$tmp/service.log" &
service_pid=$!
port=$(port_of "$tmp/service.log" "$service_pid") || fail "the service with 32 descriptors did not start"
url=http://127.0.0.1:$port
i=0
while [ $i -lt 40 ]; do
    curl -s -m 10 -o /dev/null -X POST --data-binary \
        '{"tag":"hold","configuration":{"credential":"'$key'","startWaitTimeMs":60000,"streaming":{"baseUri":"'$silent'"}}}' \
        "$url/" &
    bg_pids="$bg_pids $!"
    i=$((i + 1))
done
sleep 3
n=$(grep -c 'accept' "$tmp/service.log")
[ "$n" -lt 100 ] || fail "out of descriptors: $n lines about accept() in 3 s"
kill -TERM "$service_pid"
stopped "SIGTERM, out of descriptors"
wait $bg_pids
bg_pids=

curl -s -o /dev/null -X DELETE "$silent/stop"
wait "$fixture_pid"
fixture_pid=

if [ "$failures" -ne 0 ]; then
    echo "---- the service's log ----" >&2
    tail -50 "$tmp/service.log" >&2
    echo "attack: $failures failures" >&2
    exit 1
fi
echo "attack: ok"
