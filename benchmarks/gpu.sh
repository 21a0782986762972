#!/usr/bin/env bash
# One prepared GPU run of the whole path: the engine's tests on CUDA, the overhead
# benchmarks side by side with clean (benchmarks/gpu_overhead.py), the smoke study trained
# and evaluated on cuda with noise on, the gate on its result, a divergence capture of one
# real-size checkpoint (Qwen2.5-0.5B's shapes, random init) on cuda and on the CPU with an
# error-model fit on cuda from the two captures, and the real-size evaluation throughput
# (benchmarks/scale.py). Sized to finish in under 8 minutes on one H100/H200 (each step has
# its own time limit). $GPU_OUT (default: a temporary directory) keeps the tables and files.
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
timeout 90 "$PY" -m pytest -q -p no:cacheprovider -x $tests || status=$?

echo
echo "== 2. overhead benchmarks, side by side with clean =="
if [ "$DRY" = 1 ]; then
    timeout 240 "$PY" benchmarks/gpu_overhead.py --device cpu --tiny || status=$?
else
    timeout 120 "$PY" benchmarks/gpu_overhead.py --device cuda --repeats 5 || status=$?
fi

W="${GPU_OUT:-$(mktemp -d)}"
mkdir -p "$W"
RS=("$PY" -m robuststats)
# the dry run's two captures are both on the CPU: the second one carries 1 % relative
# Gaussian noise so that there is a divergence to fit
if [ "$DRY" = 1 ]; then DEV=cpu; ITEMS=8; CFG=(--quick --layers 2)
    HOST=bf16+relative_gaussian@0.01; else
    DEV=cuda; ITEMS=40; CFG=(--layers full); HOST=bf16; fi
echo
echo "== 3. the smoke study trained and evaluated on $DEV (noise on), then the gate =="
t=$(date +%s)
timeout 120 "${RS[@]}" study studies/e8_smoke.yaml --device "$DEV" --n-items "$ITEMS" \
    --workers 1 --out "$W/results" --runs "$W/runs" --no-progress >"$W/study.txt" 2>&1 \
    || { status=$?; tail -5 "$W/study.txt"; }
grep -E "^(study|results|H[0-9])" "$W/study.txt" | cut -c1-150 | head -9
echo "study: $(( $(date +%s) - t )) s"
# the gate reads the version's outcomes: E8c against E8a's protocol; a FAIL (exit 1) is an
# answer, not a broken step
timeout 40 "${RS[@]}" gate "$W/results/e8_smoke/v1" --baseline "$W/results/e8_smoke/v1" \
    --baseline-condition E8a --candidate-condition E8c --max-degradation 0.25 \
    --no-progress 2>&1 | tail -4
# 0 PASS, 1 FAIL; the dry run's toy models may leave retention not estimable (2)
[ "${PIPESTATUS[0]}" -le $(( 1 + DRY )) ] || status=1

echo
echo "== 4. one checkpoint captured on $DEV and on the CPU (bf16), fitted on $DEV =="
t=$(date +%s)
timeout 60 "$PY" benchmarks/scale.py --configs qwen2.5-0.5b "${CFG[@]}" --device "$DEV" --save "$W/ckpt" \
    || status=$?
MODS=residual,self_attn.o_proj,mlp.down_proj
for side in "bf16+$DEV:$W/dev.npz" "$HOST:$W/cpu.npz"; do
    timeout 60 "${RS[@]}" divergence "$W/ckpt" --reference "${side%%:*}" --capture \
        "${side#*:}" --items 64 --batch-size 16 --modules "$MODS" --no-progress || status=$?
done
timeout 120 "${RS[@]}" divergence "$W/dev.npz" --candidate "$W/cpu.npz" \
    --fit-noise "$W/fit.yaml" --device "$DEV" --out "$W/results" --no-progress \
    >"$W/fit.txt" 2>&1 || { status=$?; tail -5 "$W/fit.txt"; }
grep -iE "verdict|fit|layer 0|rel RMS" "$W/fit.txt" | head -8
echo "captures and fit: $(( $(date +%s) - t )) s"

echo
echo "== 5. real-size evaluation, forward, capture and fit costs (benchmarks/scale.py) =="
if [ "$DRY" = 1 ]; then
    timeout 120 "$PY" benchmarks/scale.py --quick --layers 2 --items 4 --repeats 1 \
        --out "$W/scale.md" || status=$?
else
    timeout 150 "$PY" benchmarks/scale.py --device cuda --dtype bfloat16 --layers full \
        --configs qwen2.5-0.5b,qwen2.5-1.5b --items 16,64 --new-tokens 32 --repeats 2 \
        --out "$W/scale.md" || status=$?
fi
echo
echo "gpu.sh: done in $(( $(date +%s) - start )) s, exit status $status"
exit "$status"
