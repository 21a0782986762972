"""The verl recipe of docs/training.md, checked without verl or GPUs (issue 35, item 4): two
worker processes that read ``ROBUSTSTATS_NOISE`` from the environment the ``command``
trainer sets, open the session around their update only, and leave the injection log that
the command trainer checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from robuststats.engine import ENV_VAR, INJECTION_LOG_VAR, NoiseSpec
from robuststats.models.external import ExternalTrainingError, check_injection_log

HERE = Path(__file__).parent
SPEC = NoiseSpec(scale=0.05, phases="both", seed=2)


def _workers(tmp_path, *flags):
    from trl_helpers import saved_tiny

    model_dir = saved_tiny(tmp_path / "model")
    log = tmp_path / "injections.jsonl"
    env = {**os.environ, ENV_VAR: json.dumps(SPEC.to_dict()), INJECTION_LOG_VAR: str(log),
           "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, str(HERE / "verl_like_worker.py"),
                               str(model_dir), *flags], env=env) for _ in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    return log


@pytest.mark.slow
def test_update_sessions_in_two_workers_pass_the_command_trainers_check(tmp_path):
    log = _workers(tmp_path)
    summary = check_injection_log(log, SPEC)
    assert summary["processes"] == 2
    assert summary["counts"]["linear/forward"] > 0
    assert summary["counts"]["linear/backward"] > 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    # one session per worker: the update; the rollout before it drew nothing
    assert len({r["pid"] for r in records}) == 2
    assert all(r["forward_calls"] == 1 and r["backward_ran"] for r in records)


@pytest.mark.slow
def test_workers_that_never_open_a_session_are_refused(tmp_path):
    log = _workers(tmp_path, "--no-session")
    with pytest.raises(ExternalTrainingError, match="no process reported injection counts"):
        check_injection_log(log, SPEC)
