#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
# check-symbols.sh: compare the dynamic symbols that each built shared library
# exports with its committed list, so that nothing enters (or leaves) an ABI by
# accident:
#
#   lib/.libs/libldasync.so                   tests/exported-symbols.txt
#   lib/testing/.libs/libldasync-testing.so   tests/exported-symbols-testing.txt
#   lib/redis/.libs/libldasync-redis.so       tests/exported-symbols-redis.txt
#
#   check-symbols.sh            compare; print the diffs and fail on a mismatch
#   check-symbols.sh --update   rewrite the lists (make update-symbols)
#
# Environment (set by Makefile.am): top_builddir, top_srcdir, NM.
# Exits 77 (automake's SKIP) when no shared library was built (--disable-shared).

set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
NM=${NM:-nm}
update=no
test "${1:-}" = --update && update=yes

# Defined, global symbols of the dynamic symbol table of $1 (code, data, bss,
# read-only, weak, ...) without their version suffix ("name@@VERSION").
exported_symbols() {
    $NM -D --defined-only "$1" |
        awk 'NF >= 3 && $2 ~ /^[BDGRSTVWi]$/ { sub(/@.*/, "", $3); print $3 }' |
        LC_ALL=C sort -u
}

# check_library LIB LIST: compare (or, with --update, rewrite LIST).
# Returns 0 (same, or written), 1 (differs or error), 77 (LIB not built).
check_library() {
    lib=$1
    list=$2
    if test ! -e "$lib"; then
        echo "SKIP: $lib was not built (static-only build), nothing to compare"
        return 77
    fi
    actual=$(exported_symbols "$lib") || {
        echo "FAIL: could not list the symbols of $lib with '$NM -D --defined-only'"
        return 1
    }
    if test $update = yes; then
        printf '%s\n' "$actual" >"$list" || return 1
        echo "wrote $(printf '%s\n' "$actual" | wc -l | tr -d ' ') symbols to $list"
        return 0
    fi
    if test ! -r "$list"; then
        echo "FAIL: $list is missing"
        return 1
    fi
    if difference=$(printf '%s\n' "$actual" | diff -u "$list" -); then
        echo "PASS: $lib exports exactly the $(wc -l <"$list" | tr -d ' ') symbols of $list"
        return 0
    fi
    echo "FAIL: the symbols exported by $lib differ from $list"
    echo "('-' lines: listed but not exported; '+' lines: exported but not listed)"
    printf '%s\n' "$difference"
    echo "If the change is intended, run 'make update-symbols' and commit the new list."
    return 1
}

status=77
for pair in \
    "lib/.libs/libldasync.so:exported-symbols.txt" \
    "lib/testing/.libs/libldasync-testing.so:exported-symbols-testing.txt" \
    "lib/redis/.libs/libldasync-redis.so:exported-symbols-redis.txt"; do
    check_library "$top_builddir/${pair%%:*}" "$top_srcdir/tests/${pair#*:}"
    rc=$?
    if test $rc = 1; then
        status=1
    elif test $rc = 0 && test $status = 77; then
        status=0
    fi
done
exit $status
