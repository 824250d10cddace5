#!/usr/bin/env python3
"""Validates the profiler's exports: a Chrome trace-event JSON file (the array form that Perfetto
and chrome://tracing open) and Inspector-compatible JSON lines. Prints one JSON object of counts
on success; exits non-zero with a reason on the first defect.

usage: check_exports.py TRACE.json INSPECTOR.jsonl EXPECTED_EXEC_US
"""
import json
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_trace(path):
    with open(path) as f:
        events = json.load(f)
    if not isinstance(events, list) or not events:
        fail("trace is not a non-empty JSON array")
    counts = {}
    for e in events:
        for key in ("name", "ph", "pid", "tid"):
            if key not in e:
                fail("trace event without %s: %r" % (key, e))
        ph = e["ph"]
        if ph not in ("X", "M", "i", "C"):
            fail("unexpected phase %r" % ph)
        if ph != "M":
            if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0:
                fail("bad ts in %r" % e)
        if ph == "X" and (not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0):
            fail("bad dur in %r" % e)
        if ph == "i" and e.get("s") not in ("g", "p", "t"):
            fail("bad instant scope in %r" % e)
        if ph == "C" and not isinstance(e.get("args"), dict):
            fail("counter without args: %r" % e)
        cat = e.get("cat", "meta")
        counts[ph + ":" + cat] = counts.get(ph + ":" + cat, 0) + 1
        if ph == "i":
            counts["instant:" + e["name"]] = counts.get("instant:" + e["name"], 0) + 1
    return counts


def check_inspector(path, expected_us):
    n = 0
    within = 0
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            for key in ("header", "metadata", "coll_perf"):
                if key not in rec:
                    fail("Inspector record without %s" % key)
            h, m, c = rec["header"], rec["metadata"], rec["coll_perf"]
            for key in ("id", "rank", "n_ranks", "nnodes"):
                if key not in h:
                    fail("header without %s" % key)
            for key in ("inspector_output_format_version", "dump_timestamp_us", "hostname", "pid"):
                if key not in m:
                    fail("metadata without %s" % key)
            for key in ("coll", "coll_sn", "coll_msg_size_bytes", "coll_exec_time_us",
                        "coll_timing_source", "coll_algobw_gbs", "coll_busbw_gbs"):
                if key not in c:
                    fail("coll_perf without %s" % key)
            if c["coll_timing_source"] == "kernel_gpu" and abs(c["coll_exec_time_us"] - expected_us) <= 0.01 * expected_us:
                within += 1
            n += 1
    return n, within


counts = check_trace(sys.argv[1])
n, within = check_inspector(sys.argv[2], float(sys.argv[3]))
counts["inspector_records"] = n
counts["inspector_within_1pct"] = within
print(json.dumps(counts, sort_keys=True))
