#!/usr/bin/env python3
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
"""What the loop probe of ldasync-serve (--loop-probe) counted between two
/status answers: the 99th percentile and the maximum of the loop thread's
CPU time between two runs of the probe's timer (the work of about one
pass of the loop when it is busy), and of how late the timer ran (which
also counts time the machine gave to other processes), each as the
bucket it fell in ("<3" is 2 to 3 ms).

usage: bench/loop-delta.py BEFORE.json AFTER.json"""
import json
import sys


def bucket(bounds, i):
    if i == 0:
        return "<%d" % bounds[0]
    if i >= len(bounds):
        return ">=%d" % bounds[-1]
    return "<%d" % bounds[i]


def summary(bounds, before, after):
    d = [a - b for a, b in zip(after, before)]
    n = sum(d)
    if n == 0:
        return "no ticks"
    p99 = next(i for i in range(len(d)) if sum(d[: i + 1]) >= 0.99 * n)
    top = max(i for i in range(len(d)) if d[i] > 0)
    return "p99 %s ms, max %s ms" % (bucket(bounds, p99), bucket(bounds, top))


def main():
    a = json.load(open(sys.argv[1]))["loop"]
    b = json.load(open(sys.argv[2]))["loop"]
    bounds = b["boundsMs"]
    print("loop cpu per tick: %s; timer late: %s; %d ticks" % (
        summary(bounds, a["cpu"], b["cpu"]), summary(bounds, a["late"], b["late"]),
        b["ticks"] - a["ticks"]))


main()
