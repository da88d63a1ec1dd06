/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/* error.c: names and messages of the error codes, generated from LD_ERRNO_MAP. */
#include <ldasync/error.h>

const char *ld_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define LD_STRERROR_CASE_(name, value, message) \
    case LD_##name:                             \
        return message;
        LD_ERRNO_MAP(LD_STRERROR_CASE_)
#undef LD_STRERROR_CASE_
    default:
        return "unknown error";
    }
}

const char *ld_err_name(int code)
{
    switch (code) {
    case 0:
        return "LD_OK";
#define LD_ERR_NAME_CASE_(name, value, message) \
    case LD_##name:                             \
        return "LD_" #name;
        LD_ERRNO_MAP(LD_ERR_NAME_CASE_)
#undef LD_ERR_NAME_CASE_
    default:
        return "LD_EUNKNOWN";
    }
}
