#!/bin/sh
# check-symbols.sh: compare the dynamic symbols that the built libldasync.so
# exports with the committed list tests/exported-symbols.txt, so that nothing
# enters (or leaves) the ABI by accident.
#
#   check-symbols.sh            compare; print the diff and fail on a mismatch
#   check-symbols.sh --update   rewrite tests/exported-symbols.txt (make update-symbols)
#
# Environment (set by Makefile.am): top_builddir, top_srcdir, NM.
# Exits 77 (automake's SKIP) when no shared library was built (--disable-shared).

set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
NM=${NM:-nm}

lib=$top_builddir/lib/.libs/libldasync.so
list=$top_srcdir/tests/exported-symbols.txt

if test ! -e "$lib"; then
    echo "SKIP: $lib was not built (static-only build), nothing to compare"
    exit 77
fi

# Defined, global symbols of the dynamic symbol table (code, data, bss, read-only,
# weak, ...) without their version suffix ("name@@VERSION").
exported_symbols() {
    $NM -D --defined-only "$lib" |
        awk 'NF >= 3 && $2 ~ /^[BDGRSTVWi]$/ { sub(/@.*/, "", $3); print $3 }' |
        LC_ALL=C sort -u
}

actual=$(exported_symbols) || {
    echo "FAIL: could not list the symbols of $lib with '$NM -D --defined-only'"
    exit 1
}

if test "${1:-}" = --update; then
    printf '%s\n' "$actual" >"$list" || exit 1
    echo "wrote $(printf '%s\n' "$actual" | wc -l | tr -d ' ') symbols to $list"
    exit 0
fi

if test ! -r "$list"; then
    echo "FAIL: $list is missing"
    exit 1
fi

if difference=$(printf '%s\n' "$actual" | diff -u "$list" -); then
    echo "PASS: $lib exports exactly the $(wc -l <"$list" | tr -d ' ') symbols of $list"
    exit 0
fi

echo "FAIL: the symbols exported by $lib differ from $list"
echo "('-' lines: listed but not exported; '+' lines: exported but not listed)"
printf '%s\n' "$difference"
echo "If the change is intended, run 'make update-symbols' and commit the new list."
exit 1
