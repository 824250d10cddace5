#!/usr/bin/env bash
# bench/nccl-tests --fault: the NIC is really taken down (or rate-limited) during plugin runs
# only, restored afterwards, and a fault that cannot be injected, or comes after the run ended,
# fails the run. A veth interface in a network namespace stands for the NIC; the stand-in
# *_perf binary looks at it mid-run. Root only: exit 77 (skipped) otherwise.
set -euo pipefail
SRC=$1
LIB=$2
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  echo "SKIP: --fault needs root and iproute2 (ip, tc) for a network namespace"
  exit 77
fi
NS=apnt-$$
T=$(mktemp -d)
cleanup() { ip netns del "$NS" 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" link add apd0 type veth peer name apd1
ip -n "$NS" link set apd1 up
ip -n "$NS" link set apd0 up
mkdir -p "$T/tests/build"
cat > "$T/tests/build/all_reduce_perf" <<'PERF'
#!/usr/bin/env bash
# Stand-in: waits, then reports the interface's flags and qdisc as seen mid-run.
for kind in net tuner profiler; do
  var=NCCL_${kind^^}_PLUGIN
  [ "${!var:-}" = autopilot ] && echo "host:1:1 [0] NCCL INFO autopilot: $kind v7 ready"
done
sleep "${STANDIN_SLEEP:-0}"
echo "# link: $(ip -o link show apd0 | grep -o '<[^>]*>')"
echo "# qdisc: $(tc qdisc show dev apd0 | head -1)"
echo "        1024           256     float     sum      -1    12.00    0.09    1.00      0    11.80    0.09    1.00      0"
PERF
chmod +x "$T/tests/build/all_reduce_perf"
fail() { echo "FAIL: $*"; exit 1; }
run() {  # OUT ARGS...: bench/nccl-tests inside the namespace; sets $out and $rc
  local dir=$1
  shift
  rc=0
  out=$(ip netns exec "$NS" env STANDIN_SLEEP="${STANDIN_SLEEP:-1.5}" "$SRC/bench/nccl-tests" \
        --nccl-tests "$T/tests" --launcher env --collectives all_reduce --lib "$LIB" \
        --out "$T/$dir" "$@" 2>&1) || rc=$?
}
flags_of() { grep -o '^# link: .*' "$1"; }

run down --modes stock,net --fault down:apd0 --fault-after 0.3
[ "$rc" = 0 ] || { echo "$out"; fail "down: exit $rc"; }
flags_of "$T/down/all_reduce.stock.log" | grep -q ',UP' || fail "the stock run saw the NIC down"
flags_of "$T/down/all_reduce.net.log" | grep -q ',UP' && fail "the plugin run did not see the NIC down"
echo "$out" | grep -q "ok: ip link set apd0 down at +0.3s" || { echo "$out"; fail "no fault line"; }
ip -n "$NS" -o link show apd0 | grep -q ',UP' || fail "the NIC was left down"
echo "nccl-tests --fault down: the plugin run saw $(flags_of "$T/down/all_reduce.net.log"), restored after"

run rate --modes net --fault rate:apd0:100 --fault-after 0.3
[ "$rc" = 0 ] || { echo "$out"; fail "rate: exit $rc"; }
grep -q '^# qdisc: qdisc tbf' "$T/rate/all_reduce.net.log" || fail "no tbf qdisc during the run"
tc -n "$NS" qdisc show dev apd0 | grep -q tbf && fail "the tbf qdisc was left in place"
echo "nccl-tests --fault rate: $(grep -o '^# qdisc: .*' "$T/rate/all_reduce.net.log" | cut -c1-60)"

run nosuch --modes net --fault down:nosuch0 --fault-after 0.3
[ "$rc" = 1 ] || { echo "$out"; fail "a fault on a missing NIC: exit $rc, expected 1"; }
echo "$out" | grep -q "FAILED (fault not injected" || { echo "$out"; fail "no 'fault not injected'"; }

STANDIN_SLEEP=0 run late --modes net --fault down:apd0 --fault-after 1.5
[ "$rc" = 1 ] || { echo "$out"; fail "a fault after the run: exit $rc, expected 1"; }
echo "$out" | grep -q "before the fault" || { echo "$out"; fail "no 'before the fault'"; }
ip -n "$NS" -o link show apd0 | grep -q ',UP' || fail "the NIC was left down after a late fault"
echo "nccl-tests --fault: OK"
