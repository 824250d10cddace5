#!/usr/bin/env python3
"""CTest: a short run of the main job (`autopilot demo --quick`) end to end, then checks of what
it must prove, each of which fails when its behaviour is absent:
- every collective's result exact (0 bytes lost), identical decisions on all ranks;
- the tuner acted in the closed loop: some decisions differ from NCCL's own choice for the same
  cost table (none may in static mode, where the tuner is off); with NCCL_AUTOPILOT_TUNER_CHUNK=1
  some tasks ran at the tuner's chunk size;
- the scenario's phases are the documented ones, and the closed loop moves data in each, at an
  efficiency of at least MIN_EFFICIENCY and with no gap between completions over MAX_GAP_MS;
- the closed loop moves >= 1.5x the static mode's data while rail 1 is faulty (degraded and
  failed phases together; FAULTED_MIN_SPEEDUP);
- the closed loop carries on through the rail failure (failover counted, work done) and the
  rail re-joins (recovery counted);
- the static mode stops at the rail failure and, as README says, is restarted once the rail is
  repaired (and then makes progress).
With `--scenario mistuned` (healthy rails, a declared topology that makes NCCL's model choose
Tree for every all-reduce) it checks instead that the tuner left NCCL's choice for good at the
largest size (where Ring gains most), on every rank alike, exactly, and that the closed loop was
at least MISTUNED_MIN_SPEEDUP times as fast as the static mode (a run that misses only these two,
which depend on how many collectives a loaded machine completes, is run once more)."""
import json
import os
import subprocess
import sys
import tempfile

# Closed loop / static bus bandwidth over the faulted part of the run (degraded + failed phases).
# The degraded phase alone is not gated: in --quick (2.5 s phases) on the loaded 2-core machine
# its ratio measured 0.90x-3.37x (README, demo section), so neither 1.5x nor 1.0x holds there;
# over both faulted phases it measured 2.4x-5.9x in the same runs (some beside a CPU hog), so
# 1.5x fails only when the closed loop loses its edge (it still must move data in the degraded
# phase, checked below).
FAULTED_MIN_SPEEDUP = 1.5

# Loose bounds against the rails, fit for a loaded CI machine: the closed loop's efficiency (bus
# bandwidth / the live rails' capacity) in every phase, and its longest gap between completions.
# In --quick on this 2-core machine beside `stress-ng --cpu 2` (2026-12-02, one run each of the
# veth and loopback scenarios) efficiency was 0.12-0.38 per phase and the longest gap 260 ms
# (idle: 0.18-0.79 and 144 ms). A phase below 0.04 has all but stopped; a 3 s gap is a stall
# that the demo's own verdict (6 s without a completion) would not call one.
MIN_EFFICIENCY = 0.04
MAX_GAP_MS = 3000

# Mistuned scenario, --quick (one 30 s phase): closed loop / static. On this 2-core machine
# (2026-12-03) idle runs measured 1.26x and 1.33x, and beside `stress-ng --cpu 2` 1.08x, with the
# 256 KiB and 1 MiB sizes still on Tree at the end (noisier samples need more of them before a
# confident switch) and 4 MiB on Ring. Below 1.0 the tuner cost more than it found.
MISTUNED_MIN_SPEEDUP = 1.0

tool = sys.argv[1]
extra = sys.argv[2:]


def run_demo():
    """One `autopilot demo --quick` run: its JSON and the closed loop's warnings."""
    with tempfile.TemporaryDirectory() as out:
        result = os.path.join(out, "demo.json")
        run = subprocess.run([tool, "demo", "--quick", "--no-plot", "--out", out, "--json",
                              result] + extra, capture_output=True, text=True, timeout=600)
        print(run.stdout)
        print(run.stderr[-3000:], file=sys.stderr)
        if run.returncode != 0:
            sys.exit("autopilot demo exited with %d" % run.returncode)
        data = json.load(open(result))
        # The closed loop's warnings (rails failed, and why), printed when a check fails: the
        # logs go with the temporary directory, and a CI failure must be diagnosable from its
        # output alone.
        warnings = []
        logs = os.path.join(out, "closed-loop")
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            if name.endswith(".log"):
                with open(os.path.join(logs, name), errors="replace") as f:
                    warnings += ["%s: %s" % (name, l.rstrip()) for l in f if " WARN " in l]
        return data, warnings


data, warnings = run_demo()


def fail(message):
    print("closed loop's warnings (last run):\n  " + "\n  ".join(warnings[-60:]))
    sys.exit("demo check failed: " + message)


phases = {p["name"]: p for p in data["phases"]}
problems = []
if data.get("scenario") == "mistuned":
    # Invariants hold in every run. What the tuner learns within the 30 s phase depends on how
    # many collectives a loaded machine completes in it (a CI run measured 0.98x, with 4 MiB
    # still on Tree, while the same build alone measured 1.25x minutes later), so a run that
    # missed only the learning checks is run once more and judged on the second run; with the
    # tuner off both miss (0.98x, 4 MiB on Tree).
    for attempt in (1, 2):
        problems, learning = [], []
        if list(phases) != ["mistuned"]:
            fail("phases %s, expected ['mistuned']" % list(phases))
        p = phases["mistuned"]
        if not data.get("identical_decisions"):
            problems.append("decisions differed between ranks")
        if p.get("bytes_lost", 1) != 0:
            problems.append("lost %s bytes" % p.get("bytes_lost"))
        if p.get("closed_loop_failed") or p.get("static_failed"):
            problems.append("a job stopped")
        if p.get("static_tuner_changed", 1) != 0:
            problems.append("the static mode's decisions differ from NCCL's choice")
        arms = p.get("closed_loop_final_arms", {})
        if not arms:
            problems.append("no final arms reported")
        else:
            largest = max(arms, key=int)
            # NCCL's choice is Tree at every size here: the switch is to a Ring arm.
            if not arms[largest].startswith("Ring/"):
                learning.append("the largest all-reduce (%s B) ended on %s (NCCL's choice is "
                                "Tree)" % (largest, arms[largest]))
        if not (p.get("speedup") or 0) >= MISTUNED_MIN_SPEEDUP:
            learning.append("closed loop / static %s (needs >= %.2f)"
                            % (p.get("speedup"), MISTUNED_MIN_SPEEDUP))
        if problems or (learning and attempt == 2):
            fail("; ".join(problems + learning))
        if not learning:
            break
        print("demo check (mistuned): run %d missed %s; running once more"
              % (attempt, "; ".join(learning)))
        data, warnings = run_demo()
        phases = {p["name"]: p for p in data["phases"]}
    print("demo check (mistuned): OK (closed loop / static %.2fx; final arms %s; every size on "
          "the tuner's arm after %s s)" % (p["speedup"], arms, p.get("switched_after_s")))
    sys.exit(0)
EXPECTED_PHASES = ["healthy", "degraded", "failed", "healed", "half-rate", "two-degraded",
                   "failed+degraded", "healed+degraded", "flapping"]
if [p["name"] for p in data["phases"]] != EXPECTED_PHASES:
    fail("phases %s, expected %s" % ([p["name"] for p in data["phases"]], EXPECTED_PHASES))
for p in data["phases"]:
    for key in ("closed_loop_gbps", "static_gbps", "speedup", "bytes_lost", "static_failed",
                "static_restarted", "failovers", "recoveries", "closed_loop_calls",
                "closed_loop_tuner_changed", "static_tuner_changed", "closed_loop_decisions",
                "capacity_fraction", "efficiency", "recovery_ms", "max_gap_ms",
                "false_failovers"):
        if key not in p:
            problems.append("%s lacks %s" % (p["name"], key))
    if p.get("bytes_lost", 1) != 0:
        problems.append("%s lost %s bytes" % (p["name"], p.get("bytes_lost")))
    if p.get("closed_loop_failed"):
        problems.append("the closed loop stopped in the %s phase" % p["name"])
    if not p.get("closed_loop_gbps", 0) > 0:
        problems.append("the closed loop moved nothing in the %s phase" % p["name"])
    # Bus bandwidth against the live rails' rates: a ring cannot beat them (a broken capacity
    # or throughput account would).
    if not MIN_EFFICIENCY <= p.get("efficiency", 0) <= 1.1:
        problems.append("%s: efficiency %s outside [%s, 1.1]"
                        % (p["name"], p.get("efficiency"), MIN_EFFICIENCY))
    if not p.get("max_gap_ms", MAX_GAP_MS + 1) <= MAX_GAP_MS:
        problems.append("%s: the closed loop's longest gap between completions was %s ms (at "
                        "most %d)" % (p["name"], p.get("max_gap_ms"), MAX_GAP_MS))
if problems:
    fail("; ".join(problems))
if not data.get("identical_decisions"):
    problems.append("decisions differed between ranks")

# The tuner acted: decisions other than NCCL's own choice (probes or learned switches).
changed = sum(p["closed_loop_tuner_changed"] for p in data["phases"])
calls = sum(p["closed_loop_calls"] for p in data["phases"])
if changed < 1:
    problems.append("the tuner changed none of the closed loop's %d decisions (all NCCL's own "
                    "choice: is the tuner plugin loaded and enabled?)" % calls)
# NCCL_AUTOPILOT_TUNER_CHUNK=1 (demo_quick_loopback): the tuner's chunk sizes were played (a
# task at smaller steps, "(N KiB steps)"), on every rank alike (identical decisions above).
if os.environ.get("NCCL_AUTOPILOT_TUNER_CHUNK") == "1":
    halved = sum(n for p in data["phases"] for arm, n in p["closed_loop_decisions"].items()
                 if "KiB steps" in arm)
    if halved < 1:
        problems.append("NCCL_AUTOPILOT_TUNER_CHUNK=1, but no closed-loop task ran at the "
                        "tuner's chunk size")
    else:
        print("tasks at half the chunk size (closed loop): %d" % halved)
static_changed = sum(p["static_tuner_changed"] for p in data["phases"])
if static_changed != 0:
    problems.append("%d static-mode decisions differ from NCCL's choice with the tuner off"
                    % static_changed)

degraded, failed, healed = phases["degraded"], phases["failed"], phases["healed"]
c = degraded["closed_loop_gbps"] + failed["closed_loop_gbps"]
s = degraded["static_gbps"] + failed["static_gbps"]
if not c >= FAULTED_MIN_SPEEDUP * s:
    problems.append("degraded + failed phases: closed loop %.3f Gbit/s vs static %.3f Gbit/s "
                    "(%.2fx, needs >= %.2fx)" % (c / 2, s / 2, c / s if s > 0 else float("inf"),
                                                FAULTED_MIN_SPEEDUP))
degraded_ratio = (degraded["closed_loop_gbps"] / degraded["static_gbps"]
                  if degraded["static_gbps"] > 0 else float("inf"))

if sum(p["failovers"] for p in data["phases"]) < 1:
    problems.append("no rail failure was detected in the closed loop")
if sum(p["recoveries"] for p in data["phases"]) < 1:
    problems.append("the failed rail never re-joined in the closed loop (0 recoveries)")

if not failed["static_failed"]:
    problems.append("the static mode did not stop at the rail failure")
if not healed["static_restarted"]:
    problems.append("the static mode was not restarted after the repair")
elif healed["static_failed"] or not healed["static_gbps"] > 0:
    problems.append("the restarted static job made no progress in the healed phase")

if problems:
    fail("; ".join(problems))
print("demo check: OK (tuner changed %d of %d closed-loop decisions; degraded + failed %.2fx "
      "(degraded alone %.2fx, not gated); failovers %d, recoveries %d; static stopped at the "
      "failure and restarted)"
      % (changed, calls, c / s if s > 0 else float("inf"), degraded_ratio,
         sum(p["failovers"] for p in data["phases"]),
         sum(p["recoveries"] for p in data["phases"])))
