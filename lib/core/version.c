/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* version.c: the version this library was built as (see ldasync/version.h). */
#include <ldasync/version.h>

const char *ld_version_string(void)
{
    return LD_VERSION_STRING;
}

unsigned ld_version_hex(void)
{
    return LD_VERSION_HEX;
}
