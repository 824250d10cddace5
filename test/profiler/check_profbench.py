#!/usr/bin/env python3
"""CTest profbench_quick: the profiler's overhead targets (README, "Cost"), enforced.

1. `autopilot profbench --quick --json`: per callback and per all-reduce above the empty plugin,
   within 3x README's targets (30 ns per callback and 0.5 us per all-reduce with the default mask
   and through v7; 60 ns and 3.5 us with every export on): medians over alternating rounds, so a
   loaded machine slows both sides alike. Resident memory over the run's 500k callbacks: at most
   256 KiB of growth (pools and queues are fixed; one leaked byte per callback would be 500 KB).
2. `autopilot profbench --instructions`: instructions per callback above empty under callgrind,
   within their budgets (3x the targets at 3 instructions per ns; see cmd_profbench.cc).
   Without valgrind: exit 77 (skip) with the reason, a failure under CI=true.
With --sanitized (ASan/UBSan builds) only the shape is checked: instrumented code is several
times slower by design, and valgrind cannot run it.
usage: check_profbench.py TOOL JSON_PREFIX [--sanitized]
"""
import json
import os
import subprocess
import sys
import time

tool, prefix = sys.argv[1], sys.argv[2]
sanitized = "--sanitized" in sys.argv[3:]
failures = []

limits = {  # config: (ns per callback, us per all-reduce): 3x README's targets
    "default": (90.0, 1.5),
    "v7": (90.0, 1.5),
    "exports": (180.0, 10.5),
}


def quick_run(attempt):
    """One timed quick run: its time-bound failures and its memory failures."""
    quick = f"{prefix}-quick{attempt}.json"
    r = subprocess.run([tool, "profbench", "--quick", "--json", quick], capture_output=True,
                       text=True)
    print(r.stdout, end="")
    if r.returncode != 0:
        print(r.stderr, end="")
        sys.exit(f"FAIL: autopilot profbench --quick exited {r.returncode}")
    d = json.load(open(quick))
    assert d["callbacks_per_allreduce"] == 58, d
    timing, memory = [], []
    print(f"{'config':9} {'ns/cb above empty':>18} {'limit':>7} {'us/all-reduce':>14} "
          f"{'limit':>7} {'RSS growth':>11} {'limit':>8}")
    for config, (ns_limit, us_limit) in limits.items():
        x = d if config == "default" else d[config]
        ns, us, grow = (float(x["ns_per_callback_above_empty"]),
                        float(x["us_per_allreduce_above_empty"]), int(x["memory_growth_bytes"]))
        print(f"{config:9} {ns:18.1f} {ns_limit:7.0f} {us:14.3f} {us_limit:7.1f} {grow:11d} "
              f"{256 << 10:8d}")
        if sanitized:
            continue
        if ns > ns_limit:
            timing.append(f"{config}: {ns:.1f} ns per callback above empty > {ns_limit:.0f} "
                          "(3x target)")
        if us > us_limit:
            timing.append(f"{config}: {us:.3f} us per all-reduce above empty > {us_limit} "
                          "(3x target)")
        if grow > 256 << 10:
            memory.append(f"{config}: resident memory grew {grow} B over {x['memory_events']} "
                          "callbacks")
    return timing, memory


# The time bounds are medians over alternating rounds, and still a busy spell of the host moves
# them: other work's memory traffic evicts the profiler's records from the cache, and the same
# instructions take longer (docs/profiler-overhead.md; a CI run measured 26.6 ns per callback, 1.54
# us per all-reduce; the same build alone minutes later 13.8 ns, at the same instruction count).
# Such a spell can outlast two back-to-back runs: on 2026-12-05 a CI run measured 1.527 and then
# 1.542 us, 20 s apart, with the instruction count in budget (78.6 per callback, as always). So a
# run that misses only a time bound is timed again after a pause, up to three runs, and judged on
# the last. A real slowdown misses every one (a 1 us sleep in startEvent: 54 us per callback), and
# the instruction count below catches it without a clock.
ATTEMPTS, PAUSE_S = 3, 20
timing, memory = quick_run(1)
failures += memory
attempt = 1
while timing and not memory and attempt < ATTEMPTS:
    attempt += 1
    print("time bounds missed (" + "; ".join(timing) + f"): timing again in {PAUSE_S} s "
          f"(run {attempt} of {ATTEMPTS})")
    time.sleep(PAUSE_S)
    timing, memory = quick_run(attempt)
    failures += memory
failures += timing

if sanitized:
    print("sanitizer build: shape checked; overhead bounds and instruction counts are checked by "
          "the plain build's profbench_quick")
else:
    instr = prefix + "-instructions.json"
    r = subprocess.run([tool, "profbench", "--instructions", "--json", instr], capture_output=True,
                       text=True)
    print(r.stdout, end="")
    if r.returncode == 77:
        if os.environ.get("CI") == "true":
            failures.append("instruction counts not measured under CI=true: " + r.stdout.strip())
        elif not failures:
            print("SKIP: instruction counts: " + r.stdout.strip())
            sys.exit(77)
    elif r.returncode != 0:
        print(r.stderr, end="")
        failures.append(f"autopilot profbench --instructions exited {r.returncode} (over budget?)")
    else:
        counts = json.load(open(instr))
        for config in ("default", "v7", "exports"):
            if not counts[config]["within_budget"]:
                failures.append(f"{config}: instructions over budget: {counts[config]}")

for f in failures:
    print("FAIL: " + f)
sys.exit(1 if failures else 0)
