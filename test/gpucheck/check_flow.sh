#!/usr/bin/env bash
# The GPU check's whole flow without a GPU: process spawning, per-mode environments, the sweep
# with every result checked, the simulated-fault plan, the JSON and the Markdown table, through
# torch.distributed with the gloo backend on CPU (no NCCL, so no plugin is loaded). Then: a
# wrong element must fail the check, and the NCCL backend without a GPU must exit 77.
# Skips (77) when no Python here imports torch (Debian: python3-torch).
set -euo pipefail
SRC=$1
LIB=$2
PY=
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import torch.distributed' >/dev/null 2>&1; then
    PY=$(command -v "$py")
    break
  fi
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# Without a GPU (or without torch at all) the command says so and exits 77.
rc=0
CUDA_VISIBLE_DEVICES= "$SRC/scripts/gpu-check.sh" --out "$T/nogpu" >"$T/nogpu.txt" 2>&1 || rc=$?
cat "$T/nogpu.txt"
[ "$rc" = 77 ] || { echo "FAIL: exit $rc without a GPU, expected 77"; exit 1; }
grep -q "nothing checked" "$T/nogpu.txt" || { echo "FAIL: no 'nothing checked' message"; exit 1; }
[ ! -e "$T/nogpu/gpu-check.json" ] || { echo "FAIL: a report without a GPU"; exit 1; }

if [ -z "$PY" ]; then
  echo "SKIP: no Python with torch here (apt-get install python3-torch): gloo flow not run"
  exit 77
fi
export GPUCHECK_PYTHON=$PY
# Passing run: stock, plus the fault run (all three plugins' environment, a fault plan).
"$SRC/scripts/gpu-check.sh" --backend gloo --modes stock --max-bytes 64K --factor 8 \
    --fault-sizes 512,16K --lib "$LIB" --out "$T/ok" --budget 200 | tee "$T/ok.txt"
"$PY" - "$T/ok" <<'PYCHECK'
import json, os, sys
out = sys.argv[1]
r = json.load(open(os.path.join(out, "gpu-check.json")))
assert r["ok"], r["problems"]
# No MPS daemon for the CPU flow (--mps auto, the default, applies to NCCL on a GPU only).
assert r["mps"] == {"mode": "auto", "used": False, "why": "gloo backend, no GPU used"}, r["mps"]
assert [x["tag"] for x in r["runs"]] == ["stock", "fault"], [x["tag"] for x in r["runs"]]
sizes = [8, 64, 512, 4096, 32768, 65536]
for run in r["runs"][:1]:
    got = sorted({(x["collective"], x["bytes"]) for x in run["rows"]})
    want = sorted({(c, s) for c in ("all_reduce", "all_gather", "broadcast") for s in sizes})
    assert got == want, (run["tag"], got)
    assert all(x["wrong"] == 0 and x["time_us"] > 0 and x["iters"] >= 3 for x in run["rows"])
    assert "reduce_scatter: not supported by gloo" in run["skipped"], run["skipped"]
    assert run["env"]["NCCL_NET_PLUGIN"] == "none"
fault = r["runs"][1]
assert fault["env"]["NCCL_NET_PLUGIN"] == "autopilot", fault["env"]
assert fault["env"]["NCCL_AUTOPILOT_NET_ADDRS"] == "127.0.0.1,127.0.0.2"
assert {x["collective"] for x in fault["rows"]} == {"all_reduce"}
assert fault["env"]["NCCL_AUTOPILOT_FAULT_FILE"].endswith("fault.plan")
# The rank wrote the plan (down, then up) while the sweep ran; it ends with the rail up.
assert open(fault["env"]["NCCL_AUTOPILOT_FAULT_FILE"]).read() == "rail 1 up\n"
md = open(os.path.join(out, "gpu-check.md")).read()
assert "| size | stock busbw | stock us | fault busbw | fault us | fault ratio |" in md, md
assert "## all_gather" in md and "## reduce_scatter" not in md
assert "\n- MPS: off (gloo backend, no GPU used)\n" in md, md
for tag in ("stock", "fault"):
    for rank in (0, 1):
        assert os.path.exists(os.path.join(out, "%s.rank%d.out" % (tag, rank)))
print("gloo flow report: OK")
PYCHECK
grep -q "fault: rail 1 down (simulated) before all_reduce 512 B" "$T/ok.txt" ||
  { echo "FAIL: no progress line for the fault"; exit 1; }
grep -q "gpu-check: PASS in" "$T/ok.txt" || { echo "FAIL: no PASS line with the elapsed time"; exit 1; }

# A wrong element anywhere fails the check.
rc=0
GPUCHECK_TEST_CORRUPT=all_gather "$SRC/scripts/gpu-check.sh" --backend gloo --modes stock \
    --no-fault --collectives all_reduce,all_gather --max-bytes 1K --factor 8 \
    --out "$T/bad" >"$T/bad.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$T/bad.txt"; echo "FAIL: exit $rc with a wrong element, expected 1"; exit 1; }
grep -q "rank 1: all_gather 8 B: .* wrong elements" "$T/bad.txt" ||
  { cat "$T/bad.txt"; echo "FAIL: wrong element not reported"; exit 1; }
grep -q "rank 0: all_reduce" "$T/bad.txt" && { echo "FAIL: all_reduce flagged"; exit 1; }
echo "gpu-check flow (gloo): OK"
