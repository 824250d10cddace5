#!/usr/bin/env bash
# bench/nccl-tests end to end with a stand-in *_perf binary (no GPU here): runs both modes,
# passes the plugin environment through, parses the result table and writes the JSON.
set -euo pipefail
SRC=$1
LIB=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tests/build"
cat > "$T/tests/build/all_reduce_perf" <<'PERF'
#!/usr/bin/env bash
# Stand-in for nccl-tests: reports which plugins NCCL would have been asked to load.
echo "# NCCL_NET_PLUGIN=${NCCL_NET_PLUGIN:-} NCCL_TUNER_PLUGIN=${NCCL_TUNER_PLUGIN:-} HOSTID=${NCCL_HOSTID:-}"
echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
bw=1.00; [ "${NCCL_NET_PLUGIN:-}" = autopilot ] && bw=1.50
if [ -n "${NCCL_AUTOPILOT_PROM_FILE:-}" ]; then  # what our profiler would export
  f=$(echo "$NCCL_AUTOPILOT_PROM_FILE" | sed "s/%h/$(hostname)/; s/%p/$$/")
  printf 'nccl_autopilot_rail_failovers_total{rail="eth1",transport="tcp",device="0"} 2\n' > "$f"
  printf 'nccl_autopilot_rail_state{rail="eth1",transport="tcp",device="0",state="healthy"} 1\n' >> "$f"
  printf 'nccl_autopilot_rail_state{rail="eth1",transport="tcp",device="0",state="failed"} 0\n' >> "$f"
fi
echo "        1024           256     float     sum      -1    12.00    0.09    $bw      0    11.80    0.09    $bw      0"
echo "     1048576        262144     float     sum      -1   120.00    8.70    $bw      0   118.00    8.80    $bw      0"
PERF
chmod +x "$T/tests/build/all_reduce_perf"
out=$("$SRC/bench/nccl-tests" --nccl-tests "$T/tests" --launcher env --modes stock,all,net \
      --collectives all_reduce --lib "$LIB" --out "$T/out" --json "$T/r.json")
echo "$out"
echo "$out" | grep -q "all_reduce: bus bandwidth" || { echo "no table"; exit 1; }
echo "$out" | grep -E '^ +1M ' | grep -q ' 1.50 ' || { echo "ratio 1.50 missing"; exit 1; }
grep -q 'NCCL_NET_PLUGIN=none' "$T/out/all_reduce.stock.log" || { echo "stock not stock"; exit 1; }
grep -q 'NCCL_NET_PLUGIN=autopilot NCCL_TUNER_PLUGIN=autopilot' "$T/out/all_reduce.all.log" ||
  { echo "plugins not selected"; exit 1; }
grep -q 'NCCL_TUNER_PLUGIN=none' "$T/out/all_reduce.net.log" || { echo "net-only mode wrong"; exit 1; }
echo "$out" | grep -q 'rail eth1 .*failovers_total=2.*state=healthy' || { echo "no rail summary"; exit 1; }
python3 -c "import json,sys; d=json.load(open('$T/r.json')); assert len(d['results'])==3, d"
# Single-GPU mode: every process gets its own NCCL_HOSTID from the launcher's rank variable.
out=$("$SRC/bench/nccl-tests" --nccl-tests "$T/tests" --launcher "env RANK=3" --modes stock \
      --collectives all_reduce --lib "$LIB" --out "$T/out2" --single-gpu)
grep -q 'HOSTID=autopilot-fake-node-3' "$T/out2/all_reduce.stock.log" ||
  { echo "single-GPU mode did not set NCCL_HOSTID"; exit 1; }
echo "nccl-tests script: OK"
