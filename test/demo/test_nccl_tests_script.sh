#!/usr/bin/env bash
# bench/nccl-tests end to end with a stand-in *_perf binary (no GPU here): runs both modes,
# passes the plugin environment through, parses the result table and writes the JSON; then the
# ways a run must fail loudly (exit 1, FAILED in the table): the binary failing, a wrong
# element, a selected plugin that never reported ready.
set -euo pipefail
SRC=$1
LIB=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tests/build"
cat > "$T/tests/build/all_reduce_perf" <<'PERF'
#!/usr/bin/env bash
# Stand-in for nccl-tests under NCCL: reports which plugins NCCL would have been asked to load,
# and says "ready" for each as our plugins do through NCCL's logger (STANDIN_SILENT: a plugin
# that failed to load; STANDIN_WRONG: wrong elements; STANDIN_RC: the binary's exit status).
echo "# NCCL_NET_PLUGIN=${NCCL_NET_PLUGIN:-} NCCL_TUNER_PLUGIN=${NCCL_TUNER_PLUGIN:-} HOSTID=${NCCL_HOSTID:-}"
for kind in net tuner profiler; do
  var=NCCL_${kind^^}_PLUGIN
  [ "${!var:-}" = autopilot ] && [ "${STANDIN_SILENT:-}" != "$kind" ] &&
    echo "host:1:1 [0] NCCL INFO autopilot: $kind v7 ready: comm 0x1 (instance 0x2)"
done
echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
bw=1.00; [ "${NCCL_NET_PLUGIN:-}" = autopilot ] && bw=1.50
if [ -n "${NCCL_AUTOPILOT_PROM_FILE:-}" ]; then  # what our profiler would export
  f=$(echo "$NCCL_AUTOPILOT_PROM_FILE" | sed "s/%h/$(hostname)/; s/%p/$$/")
  printf 'nccl_autopilot_rail_failovers_total{rail="eth1",transport="tcp",device="0"} 2\n' > "$f"
  printf 'nccl_autopilot_rail_state{rail="eth1",transport="tcp",device="0",state="healthy"} 1\n' >> "$f"
  printf 'nccl_autopilot_rail_state{rail="eth1",transport="tcp",device="0",state="failed"} 0\n' >> "$f"
fi
w=${STANDIN_WRONG:-0}
[ -n "${STANDIN_SLEEP:-}" ] && sleep "$STANDIN_SLEEP"
[ -n "${STANDIN_PROBE:-}" ] && echo "# probe: $(eval "$STANDIN_PROBE" 2>&1 | tr '\n' ' ')"
echo "        1024           256     float     sum      -1    12.00    0.09    $bw      0    11.80    0.09    $bw      0"
echo "     1048576        262144     float     sum      -1   120.00    8.70    $bw     $w   118.00    8.80    $bw      0"
exit "${STANDIN_RC:-0}"
PERF
chmod +x "$T/tests/build/all_reduce_perf"
fail() { echo "FAIL: $*"; exit 1; }
out=$("$SRC/bench/nccl-tests" --nccl-tests "$T/tests" --launcher env --modes stock,all,net \
      --collectives all_reduce --lib "$LIB" --out "$T/out" --json "$T/r.json")
echo "$out"
echo "$out" | grep -q "all_reduce: bus bandwidth" || fail "no table"
echo "$out" | grep -E '^ +1M ' | grep -q ' 1.50 ' || fail "ratio 1.50 missing"
grep -q 'NCCL_NET_PLUGIN=none' "$T/out/all_reduce.stock.log" || fail "stock not stock"
grep -q 'NCCL_NET_PLUGIN=autopilot NCCL_TUNER_PLUGIN=autopilot' "$T/out/all_reduce.all.log" ||
  fail "plugins not selected"
grep -q 'NCCL_TUNER_PLUGIN=none' "$T/out/all_reduce.net.log" || fail "net-only mode wrong"
echo "$out" | grep -q 'rail eth1 .*failovers_total=2.*state=healthy' || fail "no rail summary"
python3 -c "import json,sys; d=json.load(open('$T/r.json')); assert len(d['results'])==3, d"
# Single-GPU mode: every process gets its own NCCL_HOSTID from the launcher's rank variable.
out=$("$SRC/bench/nccl-tests" --nccl-tests "$T/tests" --launcher "env RANK=3" --modes stock \
      --collectives all_reduce --lib "$LIB" --out "$T/out2" --single-gpu)
grep -q 'HOSTID=autopilot-fake-node-3' "$T/out2/all_reduce.stock.log" ||
  fail "single-GPU mode did not set NCCL_HOSTID"

# Failing loudly: each case must exit 1 and name its cause in the table.
expect_failure() {  # NAME PATTERN ENV... -- ARGS...
  local name=$1 pattern=$2 rc=0
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  out=$(env "${envs[@]}" "$SRC/bench/nccl-tests" --nccl-tests "$T/tests" --launcher env \
        --collectives all_reduce --lib "$LIB" --out "$T/$name" "$@" 2>&1) || rc=$?
  [ "$rc" = 1 ] || { echo "$out"; fail "$name: exit $rc, expected 1"; }
  echo "$out" | grep -q "FAILED (.*$pattern" || { echo "$out"; fail "$name: no FAILED ($pattern)"; }
  echo "nccl-tests script: $name fails loudly: $(echo "$out" | grep -o "FAILED (.*" | head -1)"
}
expect_failure binary-fails "1)" STANDIN_RC=1 -- --modes all
expect_failure wrong-elements "3 wrong elements" STANDIN_WRONG=3 -- --modes stock
expect_failure tuner-not-loaded "tuner plugin never reported ready" STANDIN_SILENT=tuner -- --modes all
expect_failure profiler-not-loaded "profiler plugin never reported ready" STANDIN_SILENT=profiler -- --modes profiler
echo "nccl-tests script: OK"
