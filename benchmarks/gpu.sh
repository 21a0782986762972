#!/usr/bin/env bash
# One prepared GPU run of the noisy-ops engine: its tests on CUDA, then the overhead
# benchmarks side by side with clean (benchmarks/gpu_overhead.py), ending in one table of
# ratios. Sized to finish in under 8 minutes on one H100 (each step has its own time limit).
#
#   benchmarks/gpu.sh              needs a CUDA device; without one it says so and exits 0
#   benchmarks/gpu.sh --dry-run    the same steps on the CPU at tiny sizes (checks the script)
#
# PYTHON selects the interpreter (default: python3); the repository root goes on PYTHONPATH.
set -u
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1

if ! "$PY" -c "import torch, transformers" 2>/dev/null; then
    echo "gpu.sh: $PY cannot import torch and transformers; set PYTHON to an interpreter that can."
    exit 0
fi
CUDA=$("$PY" -c "import torch; print(int(torch.cuda.is_available()))")
if [ "$CUDA" != 1 ] && [ "$DRY" = 0 ]; then
    echo "gpu.sh: no CUDA device is visible to torch; nothing to measure."
    echo "        (benchmarks/gpu.sh --dry-run runs the same steps on the CPU at tiny sizes.)"
    exit 0
fi
"$PY" - <<'EOF'
import platform, torch
dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device (dry run)"
print(f"gpu.sh: {dev}; torch {torch.__version__}; python {platform.python_version()}")
EOF

status=0
start=$(date +%s)
echo
echo "== 1. engine tests on CUDA (tests/engine/test_cuda.py and the number formats) =="
# test_cuda.py skips itself without a device; the format tests compare with torchao on the CPU
if [ "$DRY" = 1 ]; then tests="tests/engine/test_cuda.py"; else
    tests="tests/engine/test_cuda.py tests/engine/test_nonfinite.py tests/engine/test_quantize.py"; fi
timeout 170 "$PY" -m pytest -q -p no:cacheprovider -x $tests || status=$?

echo
echo "== 2. overhead benchmarks, side by side with clean =="
if [ "$DRY" = 1 ]; then
    timeout 240 "$PY" benchmarks/gpu_overhead.py --device cpu --tiny || status=$?
else
    timeout 280 "$PY" benchmarks/gpu_overhead.py --device cuda || status=$?
fi
echo
echo "gpu.sh: done in $(( $(date +%s) - start )) s, exit status $status"
exit "$status"
