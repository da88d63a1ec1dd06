#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# smoke.sh: ldasync-test-service driven as LaunchDarkly's SDK test harness
# drives it, with ldasync-serve (on data/flags.json) in the harness's place
# as the streaming and polling service:
#   - GET / names the SDK and its capabilities;
#   - POST / makes a streaming client and a polling client (201 and a
#     Location), with every configuration field the harness sends, ignored
#     ones included; 400 for a body that is not JSON, a missing credential,
#     a field of the wrong type;
#   - a refused SDK key (401) or a source that never answers within
#     startWaitTimeMs: 500, or 201 with initCanFail;
#   - evaluate (typed, detail, old-style user, missing flag, invalid
#     context), evaluateAll, secureModeHash (checked against openssl's
#     HMAC-SHA256 of the key, computed when this test was written),
#     contextBuild, contextConvert; an unknown command is 400, an unknown
#     client 404;
#   - events: identifyEvent, customEvent (with a metric) and flushEvents
#     reach an events service (a python3 receiver, when python3 is there)
#     as one POST to /bulk; what a client holds is sent when it is deleted;
#   - big segments through the harness's callback store (bigseg-fixture):
#     memberships evaluated and cached, the store's status, and its
#     changes seen by a client polling every 10 ms;
#   - DELETE /clients/N, then DELETE / stops the service (exit 0).
#
# SERVICE_WRAPPER, when set, runs the service under it (make check-valgrind
# sets it to valgrind). Needs curl; without it the test is skipped (77).
#
# Environment (set by Makefile.am): top_builddir, top_srcdir.
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
serve=$top_builddir/serve/ldasync-serve
service=$top_builddir/contract-tests/ldasync-test-service
fixture=$top_builddir/contract-tests/bigseg-fixture
wrap=${SERVICE_WRAPPER:-}
data=$top_srcdir/data/flags.json
key=sdk-smoke-key
tmp=$(mktemp -d)
serve_pid=
service_pid=
fixture_pid=
recv_pid=
failures=0

cleanup() {
    [ -n "$fixture_pid" ] && kill -9 "$fixture_pid" 2>/dev/null
    [ -n "$recv_pid" ] && kill -9 "$recv_pid" 2>/dev/null
    [ -n "$serve_pid" ] && kill -9 "$serve_pid" 2>/dev/null
    [ -n "$service_pid" ] && kill -9 "$service_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

command -v curl >/dev/null || { echo "smoke: no curl: skipped"; exit 77; }

. "$top_srcdir/contract-tests/common.sh"

: >"$tmp/serve.log"
: >"$tmp/service.log"
: >"$tmp/fixture.log"
# A flag on a big segment (generation 3), beside data/flags.json.
cat >"$tmp/bigseg.json" <<'EOF'
{"flags": {"big-flag": {"key": "big-flag", "version": 1, "on": true, "variations": [false, true],
  "offVariation": 0, "fallthrough": {"variation": 0}, "salt": "s",
  "rules": [{"id": "in-big", "variation": 1,
    "clauses": [{"attribute": "key", "op": "segmentMatch", "values": ["big-seg"], "negate": false}]}]}},
 "segments": {"big-seg": {"key": "big-seg", "version": 1, "unbounded": true, "generation": 3,
  "included": [], "excluded": [], "rules": [], "salt": "s"}}}
EOF
"$fixture" 2>"$tmp/fixture.log" &
fixture_pid=$!
fport=$(port_of "$tmp/fixture.log" "$fixture_pid") || { cat "$tmp/fixture.log"; echo "FAIL: bigseg-fixture did not start"; exit 1; }
callbacks=http://127.0.0.1:$fport/callbacks/bigseg
"$serve" --data "$data" --data "$tmp/bigseg.json" --port 0 --sdk-key "$key" --log-level info 2>"$tmp/serve.log" &
serve_pid=$!
sport=$(port_of "$tmp/serve.log" "$serve_pid") || { cat "$tmp/serve.log"; echo "FAIL: ldasync-serve did not start"; exit 1; }
i=0
until grep -q 'flag data loaded' "$tmp/serve.log"; do
    i=$((i + 1))
    [ $i -gt 300 ] && { echo "FAIL: no flag data: $(cat "$tmp/serve.log")"; exit 1; }
    sleep 0.1
done
upstream=http://127.0.0.1:$sport

$wrap "$service" --port 0 --verbose 2>"$tmp/service.log" &
service_pid=$!
port=$(port_of "$tmp/service.log" "$service_pid") || { cat "$tmp/service.log"; echo "FAIL: the service did not start"; exit 1; }
url=http://127.0.0.1:$port

# req METHOD PATH [BODY]: the status in $code, the body in $tmp/body, the
# headers in $tmp/headers.
req() {
    if [ $# -ge 3 ]; then
        code=$(curl -s -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' -X "$1" \
            -H 'Content-Type: application/json' --data-binary "$3" "$url$2")
    else
        code=$(curl -s -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' -X "$1" "$url$2")
    fi
}

# expect_code WANT WHAT
expect_code() {
    [ "$code" = "$1" ] || fail "$2: status $code, not $1: $(cat "$tmp/body")"
}

# expect_body WANT WHAT: the body is exactly WANT (the service writes
# compact JSON with sorted keys).
expect_body() {
    [ "$code" = 200 ] || fail "$2: status $code: $(cat "$tmp/body")"
    got=$(cat "$tmp/body")
    [ "$got" = "$1" ] || fail "$2: got $got, not $1"
}

# The status resource.
req GET /
expect_code 200 "GET /"
for cap in '"name":"ldasync"' '"server-side"' '"server-side-polling"' '"strongly-typed"' \
    '"secure-mode-hash"' '"tags"' '"service-endpoints"' '"filtering"' '"tls:custom-ca"' \
    '"all-flags-with-reasons"' '"context-type"' '"user-type"' '"big-segments"' \
    '"event-gzip"' '"optional-event-gzip"' '"omit-anonymous-contexts"' '"inline-context-all"'; do
    grep -q "$cap" "$tmp/body" || fail "GET / lacks $cap: $(cat "$tmp/body")"
done
for cap in '"event-sampling"' '"client-prereq-events"' '"migrations"'; do
    grep -q "$cap" "$tmp/body" && fail "GET / has $cap: $(cat "$tmp/body")"
done

# create JSON: POST /, the client's path in $client.
create() {
    req POST / "$1"
    client=$(sed -n 's|^[Ll]ocation: \(/clients/[0-9]*\).*|\1|p' "$tmp/headers" | tr -d '\r')
}

# A streaming client, with every field the harness may send.
create '{"tag":"smoke streaming","configuration":{"credential":"'$key'","startWaitTimeMs":5000,
  "initCanFail":false,"serviceEndpoints":{"streaming":"http://127.0.0.1:1","polling":null,"events":""},
  "streaming":{"baseUri":"'$upstream'","initialRetryDelayMs":100,"filter":null},
  "events":{"baseUri":"http://127.0.0.1:1","capacity":100,"enableDiagnostics":false,
    "allAttributesPrivate":false,"globalPrivateAttributes":["email"],"flushIntervalMs":1000,
    "omitAnonymousContexts":false,"enableGzip":false},
  "tags":{"applicationId":"smoke-app","applicationVersion":"1.0"},
  "wrapper":{"name":"smoke-wrapper","version":"2.0"},
  "tls":{"skipVerifyPeer":false},
  "clientSide":{"initialContext":{"kind":"user","key":"x"},"evaluationReasons":true},
  "hooks":{"hooks":[]},"persistentDataStore":null,"bigSegments":null}}'
expect_code 201 "create a streaming client"
[ -n "$client" ] || fail "create: no Location: $(cat "$tmp/headers")"
streaming=$client

req POST "$streaming" '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","context":{"kind":"org","key":"org-acme"},"valueType":"bool","defaultValue":false,"detail":true}}'
expect_body '{"reason":{"kind":"TARGET_MATCH"},"value":true,"variationIndex":0}' "evaluate, detail"
req POST "$streaming" '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","context":{"kind":"user","key":"u9","email":"u9@example.com"},"valueType":"bool","defaultValue":false}}'
expect_body '{"value":true}' "evaluate, a rule"
req POST "$streaming" '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","user":{"key":"u5","email":"u5@example.com"},"valueType":"bool","defaultValue":false}}'
expect_body '{"value":true}' "evaluate, an old-style user"
req POST "$streaming" '{"command":"evaluate","evaluate":{"flagKey":"no-such-flag","context":{"kind":"user","key":"u1"},"valueType":"string","defaultValue":"dflt","detail":true}}'
expect_body '{"reason":{"errorKind":"FLAG_NOT_FOUND","kind":"ERROR"},"value":"dflt"}' "evaluate, a missing flag"
req POST "$streaming" '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","context":{"kind":"user","key":""},"valueType":"bool","defaultValue":false,"detail":true}}'
expect_body '{"reason":{"errorKind":"USER_NOT_SPECIFIED","kind":"ERROR"},"value":false}' "evaluate, an invalid context"
req POST "$streaming" '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","context":{"kind":"user","key":"user-alice"},"valueType":"string","defaultValue":"x","detail":true}}'
expect_body '{"reason":{"errorKind":"WRONG_TYPE","kind":"ERROR"},"value":"x"}' "evaluate, the wrong type"

req POST "$streaming" '{"command":"evaluateAll","evaluateAll":{"context":{"kind":"user","key":"u6","email":"u6@example.com"},"withReasons":true}}'
[ "$code" = 200 ] || fail "evaluateAll: $code"
grep -q '"new-checkout":true' "$tmp/body" || fail "evaluateAll: $(cat "$tmp/body")"
grep -q '"$valid":true' "$tmp/body" || fail "evaluateAll not valid: $(cat "$tmp/body")"
grep -q '"new-checkout":{"reason":{"kind":"RULE_MATCH","ruleId":"beta-testers","ruleIndex":0},"variation":0,"version":12}' "$tmp/body" ||
    fail "evaluateAll without the reason: $(cat "$tmp/body")"
req POST "$streaming" '{"command":"evaluateAll","evaluateAll":{"context":{"kind":"user","key":"u6"},"clientSideOnly":true}}'
grep -q '"api-rate-limit"' "$tmp/body" && fail "evaluateAll, client-side only, has a server-side flag: $(cat "$tmp/body")"
grep -q '"reason"' "$tmp/body" && fail "evaluateAll without withReasons has reasons: $(cat "$tmp/body")"
req POST "$streaming" '{"command":"evaluateAll","evaluateAll":{"context":{"kind":"user","key":""}}}'
expect_body '{"state":{"$flagsState":{},"$valid":false}}' "evaluateAll, an invalid context"

# openssl dgst -sha256 -hmac sdk-smoke-key of "user-alice"
req POST "$streaming" '{"command":"secureModeHash","secureModeHash":{"context":{"kind":"user","key":"user-alice"}}}'
expect_body '{"result":"974c654cb9b8b4f22fe614e02f187ce87d3fbcfffdae4f4a11b0d1bd0f6019ae"}' "secureModeHash"
req POST "$streaming" '{"command":"secureModeHash","secureModeHash":{"user":{"key":"user-alice"}}}'
expect_body '{"result":"974c654cb9b8b4f22fe614e02f187ce87d3fbcfffdae4f4a11b0d1bd0f6019ae"}' "secureModeHash, an old-style user"

req POST "$streaming" '{"command":"contextConvert","contextConvert":{"input":"{\"kind\":\"org\",\"key\":\"x\",\"name\":null,\"_meta\":{}}"}}'
expect_body '{"output":"{\"key\":\"x\",\"kind\":\"org\"}"}' "contextConvert"
req POST "$streaming" '{"command":"contextConvert","contextConvert":{"input":"{"}}'
[ "$code" = 200 ] && grep -q '"error"' "$tmp/body" || fail "contextConvert of bad JSON: $code $(cat "$tmp/body")"
req POST "$streaming" '{"command":"contextBuild","contextBuild":{"multi":[{"kind":"org","key":"a"},{"key":"b","name":"n","private":["name"],"custom":{"c":1,"d":null}}]}}'
expect_body '{"output":"{\"kind\":\"multi\",\"org\":{\"key\":\"a\"},\"user\":{\"_meta\":{\"privateAttributes\":[\"name\"]},\"c\":1,\"key\":\"b\",\"name\":\"n\"}}"}' "contextBuild, multi"
req POST "$streaming" '{"command":"contextBuild","contextBuild":{"single":{"kind":"kind","key":"a"}}}'
[ "$code" = 200 ] && grep -q '"error"' "$tmp/body" || fail "contextBuild of kind \"kind\": $code $(cat "$tmp/body")"

req POST "$streaming" '{"command":"noSuchCommand"}'
expect_code 400 "an unknown command"
req POST "$streaming" '{"command":"evaluate","evaluate":{"flagKey":7}}'
expect_code 400 "a flag key of the wrong type"
req POST /clients/999 '{"command":"evaluate"}'
expect_code 404 "an unknown client"

# A polling client, the filter refused as invalid and left out.
create '{"tag":"smoke polling","configuration":{"credential":"'$key'",
  "polling":{"baseUri":"'$upstream'","pollIntervalMs":30000,"filter":"not a valid key"}}}'
expect_code 201 "create a polling client"
polling=$client
req POST "$polling" '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","context":{"kind":"org","key":"org-acme"},"valueType":"any","defaultValue":null}}'
expect_body '{"value":true}' "evaluate with the polling client"

# Events, to a receiver that writes each request as a JSON line
# {"method", "path", "body"} and answers 202.
rport=
if command -v python3 >/dev/null; then
    cat >"$tmp/recv.py" <<'EOF'
import http.server, json, sys
out = open(sys.argv[1], "a")
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        out.write(json.dumps({"method": "POST", "path": self.path,
                              "body": body.decode("utf-8", "replace")}) + "\n")
        out.flush()
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("listening on http://127.0.0.1:%d/" % s.server_address[1], file=sys.stderr, flush=True)
s.serve_forever()
EOF
    : >"$tmp/recv.log"
    : >"$tmp/received"
    python3 "$tmp/recv.py" "$tmp/received" 2>"$tmp/recv.log" &
    recv_pid=$!
    rport=$(port_of "$tmp/recv.log" "$recv_pid") || fail "the events receiver did not start: $(cat "$tmp/recv.log")"
fi
if [ -n "$rport" ]; then
    create '{"tag":"events","configuration":{"credential":"'$key'","streaming":{"baseUri":"'$upstream'"},
      "events":{"baseUri":"http://127.0.0.1:'$rport'","flushIntervalMs":600000,"enableDiagnostics":false}}}'
    expect_code 201 "create a client with events"
    events=$client
    req POST "$events" '{"command":"identifyEvent","identifyEvent":{"context":{"kind":"user","key":"ev-user","name":"Ev"}}}'
    expect_code 202 "identifyEvent"
    req POST "$events" '{"command":"customEvent","customEvent":{"eventKey":"ev-metric","context":{"kind":"user","key":"ev-user"},"data":{"a":1},"metricValue":2.5}}'
    expect_code 202 "customEvent"
    req POST "$events" '{"command":"customEvent","customEvent":{"eventKey":"ev-key","context":7}}'
    expect_code 202 "customEvent, an invalid context (dropped)"
    req POST "$events" '{"command":"customEvent","customEvent":{"eventKey":5,"context":{"key":"a"}}}'
    expect_code 400 "customEvent, an event key of the wrong type"
    req POST "$events" '{"command":"flushEvents"}'
    expect_code 202 "flushEvents"
    python3 - "$tmp/received" <<'EOF' || fail "the events received: $(cat "$tmp/received")"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
bulk = [r for r in reqs if r["method"] == "POST" and r["path"] == "/bulk"]
assert len(bulk) == 1, "not one POST to /bulk"
events = json.loads(bulk[0]["body"])
ident = [e for e in events if e["kind"] == "identify"]
assert len(ident) == 1 and ident[0]["context"] == {"kind": "user", "key": "ev-user", "name": "Ev"}, ident
custom = [e for e in events if e["kind"] == "custom"]
assert len(custom) == 1, custom
c = custom[0]
assert c["key"] == "ev-metric" and c["metricValue"] == 2.5 and c["data"] == {"a": 1}, c
assert c["context"]["key"] == "ev-user", c
assert not [r for r in reqs if r["path"] == "/diagnostic"], "diagnostics were not asked for"
EOF
    # Deleting the client closes it: what it holds is sent first.
    req POST "$events" '{"command":"customEvent","customEvent":{"eventKey":"ev-at-close","context":{"kind":"user","key":"ev-user"}}}'
    expect_code 202 "customEvent before the delete"
    req DELETE "$events"
    expect_code 204 "delete the client with events"
    grep '"/bulk"' "$tmp/received" | sed -n 2p | grep -q 'ev-at-close' ||
        fail "the events held were not sent at close: $(cat "$tmp/received")"
    kill "$recv_pid" 2>/dev/null
    wait "$recv_pid" 2>/dev/null
    recv_pid=
else
    echo "smoke: no python3: the events check skipped"
fi

# Big segments through the harness's callback store. The context hash of
# "user-key" is LaunchDarkly's (base64 of its SHA-256), as the harness
# checks it.
hash='CEXjZY7cHJG/ydFy7q4+YEFwVrG3/pkJwA4FAjrbfx0='
curl -s -o /dev/null -X POST --data-binary '{"memberships":{"'$hash'":{"big-seg.g3":true}}}' "$callbacks/control"
create '{"tag":"big segments","configuration":{"credential":"'$key'","streaming":{"baseUri":"'$upstream'"},
  "bigSegments":{"callbackUri":"'$callbacks'","userCacheSize":10,"userCacheTimeMs":60000,
    "statusPollIntervalMs":60000,"staleAfterMs":null}}}'
expect_code 201 "create a client with big segments"
bigseg=$client
req POST "$bigseg" '{"command":"evaluate","evaluate":{"flagKey":"big-flag","context":{"kind":"user","key":"user-key"},"valueType":"bool","defaultValue":false,"detail":true}}'
expect_body '{"reason":{"bigSegmentsStatus":"HEALTHY","kind":"RULE_MATCH","ruleId":"in-big","ruleIndex":0},"value":true,"variationIndex":1}' "evaluate, in a big segment"
req POST "$bigseg" '{"command":"evaluate","evaluate":{"flagKey":"big-flag","context":{"kind":"user","key":"user-other"},"valueType":"bool","defaultValue":false,"detail":true}}'
expect_body '{"reason":{"bigSegmentsStatus":"HEALTHY","kind":"FALLTHROUGH"},"value":false,"variationIndex":0}' "evaluate, not in a big segment"
req POST "$bigseg" '{"command":"evaluate","evaluate":{"flagKey":"big-flag","context":{"kind":"user","key":"user-key"},"valueType":"bool","defaultValue":false}}'
expect_body '{"value":true}' "evaluate again, in a big segment"
curl -s -o "$tmp/queries" "$callbacks/queries"
grep -q '"membership":\["'$hash'",' "$tmp/queries" || fail "the membership queries: $(cat "$tmp/queries")"
[ "$(grep -o "$hash" "$tmp/queries" | wc -l)" = 1 ] || fail "the membership was not cached: $(cat "$tmp/queries")"
grep -q '"metadata":1}' "$tmp/queries" || fail "one metadata poll, not: $(cat "$tmp/queries")"
req POST "$bigseg" '{"command":"getBigSegmentStoreStatus"}'
expect_body '{"available":true,"stale":false}' "the big segment store status"
req DELETE "$bigseg"
expect_code 204 "delete the big segment client"

# The store's status polled every 10 ms: each change shows within seconds.
create '{"tag":"big segment status","configuration":{"credential":"'$key'","streaming":{"baseUri":"'$upstream'"},
  "bigSegments":{"callbackUri":"'$callbacks'","statusPollIntervalMs":10}}}'
expect_code 201 "create a client polling the big segment status"
bigseg=$client
# status_becomes STATUS WANT: the fixture answers STATUS; the service says WANT within 5 s.
status_becomes() {
    curl -s -o /dev/null -X POST --data-binary '{"status":"'$1'"}' "$callbacks/control"
    i=0
    while :; do
        req POST "$bigseg" '{"command":"getBigSegmentStoreStatus"}'
        [ "$(cat "$tmp/body")" = "$2" ] && return 0
        i=$((i + 1))
        [ $i -gt 100 ] && { fail "big segment status $1: got $(cat "$tmp/body"), not $2"; return 1; }
        sleep 0.05
    done
}
status_becomes error '{"available":false,"stale":false}'
status_becomes stale '{"available":true,"stale":true}'
status_becomes healthy '{"available":true,"stale":false}'
req DELETE "$bigseg"
expect_code 204 "delete the client polling the big segment status"
create '{"tag":"bad callback","configuration":{"credential":"'$key'","bigSegments":{"callbackUri":"ftp://x"}}}'
expect_code 400 "a callback URI that is not http"
create '{"tag":"no callback","configuration":{"credential":"'$key'","bigSegments":{"userCacheSize":"x"}}}'
expect_code 400 "a cache size of the wrong type"

# Clients that do not initialize.
create '{"tag":"refused","configuration":{"credential":"sdk-wrong","streaming":{"baseUri":"'$upstream'"}}}'
expect_code 500 "a refused key"
create '{"tag":"refused, can fail","configuration":{"credential":"sdk-wrong","initCanFail":true,"streaming":{"baseUri":"'$upstream'"}}}'
expect_code 201 "a refused key with initCanFail"
req POST "$client" '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","context":{"kind":"user","key":"user-alice"},"valueType":"bool","defaultValue":false,"detail":true}}'
expect_body '{"reason":{"errorKind":"FLAG_NOT_FOUND","kind":"ERROR"},"value":false}' "evaluate without data"
req DELETE "$client"
expect_code 204 "delete the client that failed"
create '{"tag":"timeout","configuration":{"credential":"'$key'","startWaitTimeMs":300,"streaming":{"baseUri":"http://127.0.0.1:1"}}}'
expect_code 500 "a start wait that runs out"
create '{"tag":"timeout, can fail","configuration":{"credential":"'$key'","startWaitTimeMs":300,"initCanFail":true,"streaming":{"baseUri":"http://127.0.0.1:1"}}}'
expect_code 201 "a start wait that runs out, with initCanFail"
pending_client=$client

# Bad requests.
req POST / 'not json'
expect_code 400 "a body that is not JSON"
create '{"tag":"no key","configuration":{}}'
expect_code 400 "no credential"
create '{"tag":"a number","configuration":{"credential":"'$key'","streaming":{"baseUri":5}}}'
expect_code 400 "a base URI of the wrong type"
create '{"tag":"a bad URI","configuration":{"credential":"'$key'","streaming":{"baseUri":"ftp://x"}}}'
expect_code 400 "a base URI the SDK refuses"
create '{"tag":"events, a capacity","configuration":{"credential":"'$key'","events":{"capacity":"x"}}}'
expect_code 400 "an event capacity of the wrong type"
create '{"tag":"events, private","configuration":{"credential":"'$key'","events":{"globalPrivateAttributes":["a",1]}}}'
expect_code 400 "a private attribute of the wrong type"
create '{"tag":"events, gzip","configuration":{"credential":"'$key'","events":{"enableGzip":"yes"}}}'
expect_code 400 "enableGzip of the wrong type"

# Deleting.
req DELETE "$streaming"
expect_code 204 "delete the streaming client"
req POST "$streaming" '{"command":"evaluate","evaluate":{"flagKey":"new-checkout","context":{"kind":"user","key":"a"},"valueType":"bool","defaultValue":false}}'
expect_code 404 "a deleted client"
req DELETE "$polling"
expect_code 204 "delete the polling client"

# Stopping (a client still there, reconnecting: $pending_client).
req DELETE /
expect_code 204 "DELETE /"
i=0
while kill -0 "$service_pid" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 600 ] && { fail "the service did not stop"; break; }
    sleep 0.1
done
wait "$service_pid"
rc=$?
service_pid=
[ "$rc" = 0 ] || fail "the service exited $rc"
grep -q 'stopped' "$tmp/service.log" || fail "no 'stopped' in the log"
: "$pending_client"

curl -s -o /dev/null -X DELETE "$callbacks/stop"
wait "$fixture_pid"
fixture_pid=

if [ "$failures" -ne 0 ]; then
    echo "---- the service's log ----" >&2
    cat "$tmp/service.log" >&2
    echo "smoke: $failures failures" >&2
    exit 1
fi
echo "smoke: ok"
