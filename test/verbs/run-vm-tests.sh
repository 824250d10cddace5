#!/usr/bin/env bash
# CTest's verbs_vm: runs the verbs tests (verbs_vm_tests) inside the Soft-RoCE VM of rxe-vm.sh,
# with the plugin library and the autopilot tool (its ibbench runs there too), and prints their
# FIGURE lines.
#   usage: run-vm-tests.sh VERBS_VM_TESTS PLUGIN_LIBRARY AUTOPILOT_TOOL WORKDIR [CATCH_ARGS...]
# WORKDIR caches Debian's kernel and modules between runs (the build tree's rxe-vm/).
# Exit codes: the tests' (0 = all passed); 77 = skipped, with the reason, when the VM cannot run
# here (no qemu and no root to install it, or Debian's kernel package cannot be fetched).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TESTS=$(realpath "$1")
LIB=$(realpath "$2")
TOOL=$(realpath "$3")
WORK=$(realpath -m "$4")
shift 4
mkdir -p "$WORK"

# A skip is exit 77 (CTest's SKIP_RETURN_CODE), never a pass; under CI (CI=true) the test bed
# must run, so a skip is a failure there.
skip() {
  echo "verbs_vm skipped: $*" >&2
  [ "${CI:-}" = true ] && { echo "verbs_vm: CI=true, a skip is a failure" >&2; exit 1; }
  exit 77
}
if ! command -v qemu-system-x86_64 >/dev/null || [ ! -x /bin/busybox ]; then
  [ "$(id -u)" = 0 ] || skip "qemu-system-x86 / busybox-static are not installed and we are not root"
fi

# The guest: the test binary with the library next to it; every Catch section's output goes to
# the console, FIGURE lines are collected by the host side below.
GUEST=$WORK/guest.sh
{
  echo 'export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu'
  echo 'export NCCL_DEBUG=WARN'
  echo 'cd /tmp'
  printf 'verbs_vm_tests -w NoAssertions'
  for a in "$@"; do printf " '%s'" "$a"; done
  echo
  echo 'rc=$?'
  # The NICs' own view (retransmissions, sequence errors), for diagnosing a slow or failed run.
  echo 'for c in /sys/class/infiniband/rxe*/ports/1/hw_counters; do'
  echo '  echo "COUNTERS $c: $(cd $c && for f in retry_exceeded_err rcvd_seq_err duplicate_request send_rnr_err rnr_nak_retry_err completer_retry_err; do [ -f $f ] && printf "%s=%s " $f $(cat $f); done)"'
  echo 'done'
  echo 'echo "COUNTERS softnet (processed dropped squeezed, per CPU): $(cut -d" " -f1-3 /proc/net/softnet_stat | tr "\n" ";")"'
  echo 'for d in veth0 veth1 veth2 veth3; do echo "COUNTERS $d: $(/usr/bin/ip -s link show $d | tr -s " " | tr "\n" " " | cut -c1-400)"; done'
  echo 'exit $rc'
} > "$GUEST"

LOG=$WORK/run.log
RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-540} bash "$HERE/rxe-vm.sh" "$WORK" "$GUEST" "$TESTS" "$LIB" "$TOOL" \
  > "$LOG" 2>&1
rc=$?
if [ $rc != 0 ] && [ ! -f "$WORK/vmlinuz" ]; then
  tail -20 "$LOG" >&2
  skip "the guest kernel could not be fetched or unpacked (apt-get download linux-image-amd64)"
fi
sed -n '/RXE_READY/,/GUEST_EXIT_CODE/p' "$LOG"
echo "---- figures"
grep '^FIGURE' "$LOG" || true
grep '^COUNTERS' "$LOG" || true
exit $rc
