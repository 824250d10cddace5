#!/usr/bin/env python3
"""CTest straggler_quick: `autopilot top` names a slowed rank, and only that one.

Runs the quick demo's closed loop with rank 2 made a straggler (`--slow-rank 2 --slow-ms 20`:
it starts every collective 20 ms late, as a rank busy elsewhere) and reads its Prometheus files
with one `autopilot top --json` (a frame a second) while it runs. Rank 2 must be named within
DETECT_S of the demo's start, in at least MIN_SHARE of the frames after that, with a lag within
LAG_RANGE of the injected delay, and no other rank may ever be named. (The healthy side, no rank
named while nobody is slowed, is checked in monitoring_stack.) The demo runs with `--top`, and
its own view, written to its log, must name rank 2 and no other too.

Usage: check_stragglers.py AUTOPILOT_TOOL"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SLOW_RANK, SLOW_MS = 2, 20.0
# Measured 2026-12-02 on this 2-core machine (idle): first named 3.0 s after the start (the demo
# needs about 1.5 s to start its ranks, the view one interval), then in every frame until the
# end, lag 15-26 ms. The bounds leave room for a loaded machine.
DETECT_S = 10.0
MIN_SHARE = 0.6
LAG_RANGE = (0.5 * SLOW_MS / 1e3, 2.0 * SLOW_MS / 1e3)

tool = sys.argv[1]
work = tempfile.mkdtemp(prefix="ap-stragglers-")
files = os.path.join(work, "closed-loop")
os.makedirs(files)
start = time.time()
demo = subprocess.Popen([tool, "demo", "--quick", "--no-plot", "--mode", "closed", "--no-netns",
                         "--out", work, "--slow-rank", str(SLOW_RANK), "--slow-ms", str(SLOW_MS),
                         "--top"],
                        stdout=open(os.path.join(work, "demo.log"), "w"), stderr=subprocess.STDOUT)
frames = []  # (seconds since start, [(rank, lag s)])
# One `autopilot top` for the whole run, as an operator would keep it open (a rank is named only
# once it has been late in consecutive frames).
top = subprocess.Popen([tool, "top", "--dir", files, "--json"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
for line in top.stdout:
    if demo.poll() is not None:
        break  # this frame may mix the final files' values
    frame = json.loads(line)
    frames.append((time.time() - start, [(s["rank"], s["lag_s"]) for s in frame["stragglers"]]))
top.kill()
top.wait()
demo.wait()
if demo.returncode != 0:
    sys.exit("autopilot demo exited with %d (log: %s)" % (demo.returncode,
                                                         os.path.join(work, "demo.log")))
problems = []
named = [t for t, found in frames if any(r == str(SLOW_RANK) for r, _ in found)]
others = sorted({r for _, found in frames for r, _ in found if r != str(SLOW_RANK)})
lags = [lag for _, found in frames for r, lag in found if r == str(SLOW_RANK)]
if not named:
    problems.append("rank %d was never named in %d frames" % (SLOW_RANK, len(frames)))
else:
    after = [t for t, _ in frames if t >= named[0]]
    share = len(named) / len(after)
    print("rank %d named %.1f s after the demo started, then in %d of %d frames (%.0f%%); "
          "lag %.1f-%.1f ms (injected %.0f ms)"
          % (SLOW_RANK, named[0], len(named), len(after), 100 * share, 1e3 * min(lags),
             1e3 * max(lags), SLOW_MS))
    if named[0] > DETECT_S:
        problems.append("named only %.1f s after the start (bound %.0f s)" % (named[0], DETECT_S))
    if share < MIN_SHARE:
        problems.append("named in only %.0f%% of the frames after that" % (100 * share))
    if not all(LAG_RANGE[0] <= lag <= LAG_RANGE[1] for lag in lags):
        problems.append("lags %s outside %s" % (lags, LAG_RANGE))
if others:
    problems.append("other ranks named: %s" % others)
# The demo's own --top view (frames in its log, since it is not a terminal) names it too.
log = open(os.path.join(work, "demo.log")).read()
in_demo = re.findall(r"autopilot-demo rank (\d+) on \S+: late by", log)
print("the demo's --top view: %d frames, rank %d named in %d"
      % (log.count("stragglers:"), SLOW_RANK, in_demo.count(str(SLOW_RANK))))
if in_demo.count(str(SLOW_RANK)) < 3 or set(in_demo) != {str(SLOW_RANK)}:
    problems.append("the demo's --top view named %s" % in_demo)
if problems:
    print("straggler check failed (files in %s):" % work)
    for p in problems:
        print("  " + p)
    sys.exit(1)
shutil.rmtree(work, ignore_errors=True)
print("straggler check passed")
