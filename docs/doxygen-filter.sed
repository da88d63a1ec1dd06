# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
#
# doxygen-filter.sed: shows ldasync's public headers to doxygen (Doxyfile.in,
# FILTER_PATTERNS).  It changes comment openers (and escapes a `#` in comment
# text), and keeps every line where it is, so doxygen's line numbers stay right.
#
# In comment text, "#if" and the like are words, not links to doxygen.
/^ \*/s/\([^\\]\)#\([a-z]\)/\1\\#\2/g
# "e.g." and "i.e." do not end the first sentence (the brief description).
/^ \*/s/\([ (]\)\(e\.g\|i\.e\)\. /\1\2.\\ /g
# The first block comment of a header (a line that is only "/*") describes
# the file.
0,/^\/\*$/s//\/** @file/
# Every other block comment that opens alone on a line describes the
# declaration after it.
s/^\/\*$/\/**/
# So do one-line comments that carry an @since.
s/^\/\* \(.*@since.*\*\/\)$/\/** \1/
