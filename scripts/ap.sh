#!/usr/bin/env bash
# One entry point for people and CI: installs what is missing (Debian 12, as root, apt-get),
# builds, and runs the main job or the tests.
#   scripts/ap.sh demo   build, then run the main job (autopilot demo; extra arguments go to it)
#   scripts/ap.sh test   build, run every test (the verbs transport's in a qemu VM), then the
#                        unit tests again under ASan+UBSan, and the profiler's concurrency test
#                        under TSan
#   scripts/ap.sh build  build only (build/ holds bin/autopilot and lib/libnccl-*-autopilot.so)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${AUTOPILOT_BUILD_DIR:-$ROOT/build}
JOBS=${AUTOPILOT_JOBS:-$(nproc)}
# qemu-system-x86 .. cpio: the Soft-RoCE VM of the verbs transport's tests (test/verbs/rxe-vm.sh,
# CTest verbs_vm), which also downloads Debian's kernel package on first use. python3-torch: the
# GPU check's flow with the gloo backend on CPU (CTest gpucheck_flow; about 50 MB to download).
# rpm: cpack -G RPM. libsimgrid-dev: autopilot simulate (CTest sim_quick). prometheus: its
# promtool checks the profiler's exposition files (profiler_unit_tests, profiler_so_tests; about
# 19 MB to download). valgrind: callgrind instruction counts of the profiler and tuner overhead
# checks (profbench_quick, tuner_tunerbench_smoke; about 22 MB with libc6-dbg).
# prometheus-node-exporter: the textfile collector in the monitoring-stack test (CTest
# monitoring_stack, with prometheus; about 4 MB; its service is not started by the test).
# nlohmann-json3-dev: the tool's JSON reader (model/json_value.cc; never in the plugin library).
# libcli11-dev: the tool's command-line parsing (bench/cli_args.h; header-only, tool only).
# clang-format: the layout check of every C++ file (CTest format_check, .clang-format).
PACKAGES=(cmake make g++ binutils pkg-config catch2 libibverbs-dev ibverbs-providers libsimgrid-dev
          libeigen3-dev iproute2 iperf3 python3 python3-matplotlib clang libclang-rt-14-dev
          qemu-system-x86 busybox-static ibverbs-utils rdma-core cpio python3-torch rpm
          prometheus prometheus-node-exporter valgrind nlohmann-json3-dev libcli11-dev
          clang-format)

log() { printf '\n== %s\n' "$*" >&2; }

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]} (run as root, or install them first)" >&2
    exit 1
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {  # build DIR [cmake options...]
  local dir=$1
  shift
  log "configuring $dir"
  cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  log "building $dir"
  cmake --build "$dir" -j "$JOBS"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  build)
    install_deps
    build "$BUILD"
    ;;
  demo)
    install_deps
    build "$BUILD"
    log "autopilot demo $*"
    exec "$BUILD/bin/autopilot" demo "$@"
    ;;
  test)
    install_deps
    build "$BUILD"
    log "tests"
    ctest --test-dir "$BUILD" --output-on-failure --timeout 900
    log "unit and harness tests under AddressSanitizer + UndefinedBehaviorSanitizer"
    build "$BUILD-asan" -DAUTOPILOT_SANITIZE=ON
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
      ctest --test-dir "$BUILD-asan" --output-on-failure -L 'unit|host' --timeout 900
    # The profiler's application/proxy/service-thread test, its pure tests (with the arrival
    # exchange's two ranks on the channel thread) and the ring's producer/consumer tests under
    # ThreadSanitizer: only the targets they need are built (a few minutes on two cores).
    log "profiler and ring tests under ThreadSanitizer"
    cmake -S "$ROOT" -B "$BUILD-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAUTOPILOT_TSAN=ON >/dev/null
    cmake --build "$BUILD-tsan" -j "$JOBS" --target profiler_concurrency_test profiler_unit_tests \
      ring_tests
    TSAN_OPTIONS=halt_on_error=1 \
      ctest --test-dir "$BUILD-tsan" --output-on-failure \
        -R '^(profiler_concurrency_test|profiler_unit_tests|ring_tests)$' --timeout 300
    ;;
  *)
    echo "usage: $0 demo|test|build" >&2
    exit 2
    ;;
esac
