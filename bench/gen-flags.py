#!/usr/bin/env python3
# Copyright (c) 2026 The ldasync authors. SPDX-License-Identifier: MIT
"""Writes a flag data file of N flags (default 10,000) of the shape of
issue 18: each flag client-side, with targets, two rules and a rollout
(about 800 bytes a flag: about 8 MB at 10,000).

usage: bench/gen-flags.py [N] > flags.json"""
import json
import sys


def flag(i, version=1):
    key = "flag-%05d" % i
    return {
        "key": key, "version": version, "on": True,
        "variations": ["off", "on", "beta"],
        "offVariation": 0,
        "fallthrough": {"rollout": {"variations": [
            {"variation": 0, "weight": 50000}, {"variation": 1, "weight": 30000},
            {"variation": 2, "weight": 20000}], "bucketBy": "key"}},
        "targets": [{"values": ["user-%d" % (i + k) for k in range(5)], "variation": 1}],
        "contextTargets": [],
        "rules": [
            {"id": "rule-%d-a" % i, "variation": 2, "trackEvents": False,
             "clauses": [{"contextKind": "user", "attribute": "email", "op": "endsWith",
                          "values": ["@beta-%d.example.com" % i], "negate": False}]},
            {"id": "rule-%d-b" % i, "trackEvents": False,
             "rollout": {"variations": [{"variation": 1, "weight": 60000},
                                        {"variation": 2, "weight": 40000}]},
             "clauses": [{"contextKind": "user", "attribute": "country", "op": "in",
                          "values": ["fr", "de", "nl", "se", "no"], "negate": False}]}],
        "prerequisites": [], "salt": "salt-%d" % i, "trackEvents": False,
        "trackEventsFallthrough": False, "debugEventsUntilDate": None,
        "clientSide": True,
        "clientSideAvailability": {"usingEnvironmentId": True, "usingMobileKey": True},
    }


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    bump = int(sys.argv[2]) if len(sys.argv) > 2 else -1  # a flag whose version is 2
    flags = {}
    for i in range(n):
        f = flag(i, 2 if i == bump else 1)
        flags[f["key"]] = f
    json.dump({"flags": flags, "segments": {}}, sys.stdout, separators=(",", ":"))


main()
