#!/bin/sh
# Generate ./configure and the Makefile.in files from configure.ac and Makefile.am.
# Needs autoconf, automake, libtool and pkg-config (Debian/Ubuntu:
# apt-get install autoconf automake libtool pkg-config).
set -e
cd "$(dirname "$0")"
autoreconf -fi "$@"
echo "Now run ./configure (or, out of tree: mkdir build && cd build && ../configure)."
