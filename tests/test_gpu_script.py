"""``benchmarks/gpu.sh --dry-run``: every step of the GPU run (engine tests, overhead, the
smoke study on a named device with the gate, captures on two devices and a fit on a named
device, the real-size benchmark) on the CPU at tiny sizes, so the CUDA run's code paths are
exercised on every CI run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_script_dry_run_passes_every_step(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "GPU_OUT": str(tmp_path)}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu.sh"), "--dry-run"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    for step in ("== 3.", "== 4.", "== 5."):
        assert step in out
    assert (tmp_path / "results" / "e8_smoke" / "v1" / "outcomes.parquet").is_file()
    assert (tmp_path / "fit.yaml").is_file()
    assert (tmp_path / "scale.md").read_text().count("| qwen2.5-0.5b |") == 1
