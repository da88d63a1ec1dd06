/* Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT */
/*
 * ldasync/ldasync.h: the whole public ldasync API.
 *
 * Include this one header; build with `pkg-config --cflags --libs ldasync`.
 */
#ifndef LDASYNC_LDASYNC_H
#define LDASYNC_LDASYNC_H

#include <ldasync/alloc.h>
#include <ldasync/big_segments.h>
#include <ldasync/client.h>
#include <ldasync/common.h>
#include <ldasync/context.h>
#include <ldasync/data_system.h>
#include <ldasync/error.h>
#include <ldasync/eval.h>
#include <ldasync/events.h>
#include <ldasync/fdv2.h>
#include <ldasync/file_source.h>
#include <ldasync/future.h>
#include <ldasync/json.h>
#include <ldasync/kind.h>
#include <ldasync/network.h>
#include <ldasync/processor.h>
#include <ldasync/sink.h>
#include <ldasync/status.h>
#include <ldasync/store.h>
#include <ldasync/version.h>

#endif /* LDASYNC_LDASYNC_H */
