"""A worker that dies (the OOM killer, a crash in native code) costs only its own call.

A dead worker breaks a ``ProcessPoolExecutor``: every call not yet finished fails with
``BrokenProcessPool``. Before, the pool handed that failure to every one of them: one
job's crash failed all the jobs still queued, which never ran, with "the worker process
died" (10 of a study's 12 cells, where docs/studies.md promises that the remaining cells
still run). Now the calls the crash broke are retried, those that were in flight each
alone, so the call that kills its worker is the one named and every other call runs.
"""

from __future__ import annotations

from concurrent.futures.process import BrokenProcessPool

import pandas as pd
import pytest
from study_doubles import crash_if, fake_study

from robuststats.runs import run_pool
from robuststats.runs.spec import StudySpec
from robuststats.study import run_study


@pytest.mark.slow
def test_the_call_that_kills_its_worker_fails_alone():
    results: dict[int, int] = {}
    errors: dict[int, BaseException] = {}
    run_pool(crash_if, [(i, 2) for i in range(6)], 2,
             on_result=results.__setitem__, on_error=errors.__setitem__)
    assert sorted(results) == [0, 1, 3, 4, 5]
    assert list(errors) == [2] and isinstance(errors[2], BrokenProcessPool)


@pytest.mark.slow
def test_a_study_keeps_running_the_jobs_a_crash_did_not_kill(tmp_path):
    data = fake_study(n=6, noise_seeds=1)
    data["trainer"]["params"]["crash"] = ["A__s1"]
    run = run_study(StudySpec.from_dict(data), out=tmp_path / "res", runs=tmp_path / "runs",
                    workers=2, progress=False)
    missing = run.analysis.missing
    assert sorted(missing["condition"] + "__s" + missing["seed"].astype(str)) == \
        ["A__s1"] * 3
    assert set(missing["error"]) == {"the worker process died"}
    assert run.cells_failed == 3 and not run.ok
    outcomes = pd.read_parquet(run.version.path / "outcomes.parquet")
    assert len(outcomes.groupby(["condition", "seed", "eval_noise"])) == 9
