# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# common.sh: what smoke.sh and attack.sh share, sourced by both (they set
# `failures` first).

# fail WHAT: counts a failure and says what it was.
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# port_of LOG PID: waits for "listening on http://127.0.0.1:PORT/" in LOG
# and prints PORT; fails when PID has died or after a minute.
port_of() {
    i=0
    while :; do
        p=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\)/.*|\1|p' "$1")
        [ -n "$p" ] && { echo "$p"; return 0; }
        i=$((i + 1))
        if [ $i -gt 600 ] || ! kill -0 "$2" 2>/dev/null; then
            return 1
        fi
        sleep 0.1
    done
}
