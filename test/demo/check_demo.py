#!/usr/bin/env python3
"""CTest: a short run of the main job (`autopilot demo --quick`) end to end, then checks of what
it must prove: every collective's result exact (0 bytes lost), identical decisions on all ranks,
the closed loop carrying on through the rail failure (failover happened), the static mode
stopping there, and the JSON shape of the phase table."""
import json
import os
import subprocess
import sys
import tempfile

tool = sys.argv[1]
extra = sys.argv[2:]
with tempfile.TemporaryDirectory() as out:
    result = os.path.join(out, "demo.json")
    run = subprocess.run([tool, "demo", "--quick", "--no-plot", "--out", out, "--json", result]
                         + extra, capture_output=True, text=True, timeout=600)
    print(run.stdout)
    print(run.stderr[-3000:], file=sys.stderr)
    if run.returncode != 0:
        sys.exit("autopilot demo exited with %d" % run.returncode)
    data = json.load(open(result))
    phases = {p["name"]: p for p in data["phases"]}
    problems = []
    if sorted(phases) != sorted(["healthy", "degraded", "failed", "healed"]):
        problems.append("phases %s" % sorted(phases))
    for p in data["phases"]:
        for key in ("closed_loop_gbps", "static_gbps", "speedup", "bytes_lost", "static_failed"):
            if key not in p:
                problems.append("%s lacks %s" % (p["name"], key))
        if p.get("bytes_lost", 1) != 0:
            problems.append("%s lost %s bytes" % (p["name"], p.get("bytes_lost")))
        if p.get("closed_loop_failed"):
            problems.append("the closed loop failed in %s" % p["name"])
    if not data.get("identical_decisions"):
        problems.append("decisions differed between ranks")
    failed = phases.get("failed", {})
    if not failed.get("closed_loop_gbps", 0) > 0:
        problems.append("the closed loop moved nothing while the rail was down")
    if sum(p.get("failovers", 0) for p in data["phases"]) < 1:
        problems.append("no rail failure was detected")
    if not failed.get("static_failed"):
        problems.append("the static mode did not stop at the rail failure")
    if problems:
        sys.exit("demo check failed: " + "; ".join(problems))
    print("demo check: OK")
