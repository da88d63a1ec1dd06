#!/bin/sh
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# The include direction of the library's layers (run by `make check`).
#
# The layers, lowest first, are the folders of lib/. A file of lib/LAYER/
# includes only headers of its own layer and of the layers below it: the
# internal header of a folder ("LAYER/LAYER-internal.h") and the public
# headers (<ldasync/NAME.h>), each of which belongs to the layer that
# implements it. A public header includes only public headers of its own
# layer or below. Each folder has at most one internal header, named after
# the folder. The order and the public headers' layers are written here
# once; a new folder or a new public header must be added below, or this
# check fails. A program of the tree (serve/, tests/interop/) includes public
# headers only.
#
# Usage: tests/check-layers.sh [SRCDIR]  (default: $top_srcdir, else .)
# Exit status: 0 when every include goes down or sideways, 1 otherwise.

LAYERS="core model store eval net sources events client redis testing"

# layer_of_header NAME: the layer of include/ldasync/NAME.h.
layer_of_header() {
    case $1 in
    common | alloc | error | future | json | version) echo core ;;
    kind | context) echo model ;;
    store | status | sink | big_segments | fdv2) echo store ;;
    eval) echo eval ;;
    network) echo net ;;
    file_source | data_system) echo sources ;;
    processor | events) echo events ;;
    client | ldasync) echo client ;;
    redis) echo redis ;;
    testing) echo testing ;;
    *) echo unknown ;;
    esac
}

rank() {
    i=0
    for l in $LAYERS; do
        [ "$l" = "$1" ] && { echo $i; return; }
        i=$((i + 1))
    done
    echo -1
}

src=${1:-${top_srcdir:-.}}
# check_program FILE: a program (serve/) uses the library as its users do:
# public headers only, nothing of lib/.
check_program() {
    sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*/[^"]*\)".*|\1|p' "$1" |
        while read -r path; do
            echo "$1 includes \"$path\": a program includes the library's public headers only"
        done
}

# check_file FILE LAYER: every include of FILE is of LAYER or below.
check_file() {
    own=$(rank "$2")
    # "FOLDER/...": an internal header; <ldasync/NAME.h>: a public one.
    sed -n -e 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*\.\./.*|up ..|p' \
        -e 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)/[^"]*".*|internal \1|p' \
        -e 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*<ldasync/\([a-z_0-9]*\)\.h>.*|public \1|p' \
        "$1" | while read -r what name; do
        shown="<ldasync/$name.h>"
        [ "$what" = internal ] && shown="\"$name/...\""
        if [ "$what" = up ]; then
            echo "$1 includes a header by a relative path (write \"FOLDER/FOLDER-internal.h\")"
            continue
        elif [ "$what" = internal ]; then
            layer=$name
        else
            layer=$(layer_of_header "$name")
        fi
        r=$(rank "$layer")
        if [ "$r" -lt 0 ]; then
            echo "$1 includes $shown, of no known layer (add it to tests/check-layers.sh)"
        elif [ "$r" -gt "$own" ]; then
            echo "$1 ($2) includes $shown, of the higher layer $layer"
        fi
    done
}

out=$(
    for dir in "$src"/lib/*/; do
        layer=$(basename "$dir")
        [ "$(rank "$layer")" -ge 0 ] || echo "lib/$layer: a folder that is no layer (add it to LAYERS)"
        for h in "$dir"*.h; do
            [ -e "$h" ] || continue
            [ "$(basename "$h")" = "$layer-internal.h" ] ||
                echo "$h: a folder's one internal header is lib/$layer/$layer-internal.h"
        done
        for f in "$dir"*.c "$dir"*.h; do
            [ -e "$f" ] && check_file "$f" "$layer"
        done
    done
    for f in "$src"/serve/*.c "$src"/serve/*.h "$src"/tests/interop/*.c; do
        [ -e "$f" ] && check_program "$f"
    done
    for h in "$src"/include/ldasync/*.h "$src"/include/ldasync/*.h.in; do
        [ -e "$h" ] || continue
        name=$(basename "$h" .in)
        name=${name%.h}
        layer=$(layer_of_header "$name")
        if [ "$layer" = unknown ]; then
            echo "$h: a public header of no known layer (add it to tests/check-layers.sh)"
        else
            check_file "$h" "$layer"
        fi
    done
)
if [ -n "$out" ]; then
    printf '%s\n' "$out" | sed 's/^/check-layers: /' >&2
    exit 1
fi
echo "check-layers: every include of lib/ and include/ldasync/ goes to its own layer or below ($LAYERS); serve/ and tests/interop/ include public headers only"
exit 0
