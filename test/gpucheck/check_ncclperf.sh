#!/usr/bin/env bash
# ncclperf against the host-memory stand-in (fake_nccl.cc): every collective and size checked
# and reported in the GPU check's row schema; a wrong element fails it; a spent budget is
# reported; no GPU (the real CUDA runtime without a device, or none at all) exits 77.
set -euo pipefail
PERF=$1
FAKE=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export FAKE_NCCL_DIR=$T
"$PERF" --nccl "$FAKE" --cudart "$FAKE" --ranks 3 --max-bytes 64K --factor 8 --iters 4 \
    --time-per-size 0.001 --json "$T/r%r.json" | tee "$T/out.txt"
grep -q "ncclperf: NCCL 0.0.1" "$T/out.txt" || { echo "FAIL: version line"; exit 1; }
python3 - "$T" <<'PY'
import json, os, sys
t = sys.argv[1]
for rank in range(3):
    r = json.load(open(os.path.join(t, "r%d.json" % rank)))
    assert r["rank"] == rank and r["skipped"] == [], r
    got = sorted((x["collective"], x["bytes"]) for x in r["rows"])
    sizes = [8, 64, 512, 4096, 32768, 65536]
    # 8 B cannot give 3 ranks one float each in all-gather / reduce-scatter.
    want = sorted((c, s) for c in ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
                  for s in sizes if not (s < 12 and c in ("all_gather", "reduce_scatter")))
    assert got == want, (rank, got)
    for x in r["rows"]:
        assert x["wrong"] == 0 and x["time_us"] > 0 and 3 <= x["iters"] <= 4, x
        assert abs(x["busbw_gbs"] - x["algbw_gbs"] * {"all_reduce": 4 / 3, "broadcast": 1}.get(
            x["collective"], 2 / 3)) <= 1e-3 * x["busbw_gbs"] + 1e-9, x
print("ncclperf rows: OK")
PY
rc=0
FAKE_NCCL_CORRUPT=ReduceScatter "$PERF" --nccl "$FAKE" --cudart "$FAKE" --max-bytes 512 \
    --factor 8 --collectives reduce_scatter,broadcast --json "$T/bad%r.json" >"$T/bad.txt" || rc=$?
[ "$rc" = 1 ] || { cat "$T/bad.txt"; echo "FAIL: exit $rc with a wrong element, expected 1"; exit 1; }
python3 -c "
import json, sys
r = json.load(open('$T/bad1.json'))
assert all(x['wrong'] > 0 for x in r['rows'] if x['collective'] == 'reduce_scatter'), r
assert all(x['wrong'] == 0 for x in r['rows'] if x['collective'] == 'broadcast'), r
assert all(x['wrong'] == 0 for x in json.load(open('$T/bad0.json'))['rows'])"
"$PERF" --nccl "$FAKE" --cudart "$FAKE" --max-bytes 64K --budget-s 0.000001 \
    --json "$T/late%r.json" >"$T/late.txt"
python3 -c "
import json
r = json.load(open('$T/late0.json'))
assert r['rows'] == [] and r['skipped'] == ['sizes from 8 B: time budget spent'], r"
rc=0
"$PERF" --nccl "$FAKE" --cudart /nonexistent/libcudart.so >"$T/nocuda.txt" 2>&1 || rc=$?
[ "$rc" = 77 ] || { cat "$T/nocuda.txt"; echo "FAIL: exit $rc without a CUDA runtime"; exit 1; }
echo "ncclperf: OK"
