#!/usr/bin/env bash
# One-shot check of nccl-autopilot under real NCCL on a machine with one GPU (README, "GPU
# check"): several processes on the GPU, each its own "node", through torch.distributed, stock
# NCCL vs our plugins (all, each alone) and one run with a simulated rail failure.
# Writes gpu-check.json and gpu-check.md under $OUT (else gpu-check-out/).
# Exit: 0 pass, 1 something failed, 2 bad arguments or no library, 77 no GPU (nothing checked).
#   scripts/gpu-check.sh [--ranks 2] [--max-bytes 256M] [--budget 420] [--lib DIR] ...
#   scripts/gpu-check.sh --help
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The ranks need a Python that imports torch: $GPUCHECK_PYTHON, else the first python3 on PATH
# that has it, else Debian's (pyenv and the system interpreter may differ).
if [ -z "${GPUCHECK_PYTHON:-}" ]; then
  for py in python3 /usr/bin/python3 python; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import torch' >/dev/null 2>&1; then
      GPUCHECK_PYTHON=$(command -v "$py")
      break
    fi
  done
fi
PY=${GPUCHECK_PYTHON:-python3}
export GPUCHECK_PYTHON=$PY
exec "$PY" "$ROOT/bench/gpucheck/gpu_check.py" "$@"
