"""Workers in processes: a search killed mid-trial resumes without losing or duplicating a
trial; two workers share one journal storage.

Both start processes (a killed command-line search, two spawned workers), so both are
marked slow; tests/search/test_storage.py covers the recovery logic in-process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robuststats.search import SearchSpec, run_search
from tests.search.conftest import tiny, write

optuna = pytest.importorskip("optuna")
S = optuna.trial.TrialState
ROOT = Path(__file__).resolve().parents[2]


def _wait_for(predicate, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_a_killed_search_resumes_without_losing_or_duplicating_trials(tmp_path: Path,
                                                                      seed_runs) -> None:
    runs = seed_runs()
    spec_file = write(tmp_path / "s.yaml", tiny(**{"search.trials": 40,
                                                   "search.reevaluation.noise_seeds": 1}))
    url = f"sqlite:///{tmp_path}/s.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "robuststats", "search", str(spec_file), "--storage", url,
         "--runs", str(runs), "--out", str(tmp_path / "out"), "--no-progress"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def mid_trial() -> bool:
        try:
            trials = optuna.load_study(study_name="tiny_search", storage=url).get_trials()
        except (KeyError, Exception):
            return False
        done = [t for t in trials if t.state == S.COMPLETE]
        # a running trial that has drawn its whole configuration (one killed between its
        # draws is failed and not run again: tests/search/test_storage.py)
        running = [t for t in trials if t.state == S.RUNNING
                   and "robuststats:worker" in t.system_attrs and len(t.params) == 2]
        return len(done) >= 3 and bool(running)

    try:
        _wait_for(mid_trial, 300, "three finished trials and one running")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    study = optuna.load_study(study_name="tiny_search", storage=url)
    before = study.get_trials()
    killed = [t for t in before if t.state == S.RUNNING]
    assert len(killed) == 1
    finished_before = [t for t in before if t.state == S.COMPLETE]
    target = len(finished_before) + 2
    spec = SearchSpec.from_file(spec_file).with_overrides(trials=target)
    run = run_search(spec, storage=url, runs=runs, out=tmp_path / "out", progress=False)
    assert [r["trial"] for r in run.recovered] == [killed[0].number]
    after = optuna.load_study(study_name="tiny_search", storage=url).get_trials()
    by_number = {t.number: t for t in after}
    # nothing lost: every trial finished before the kill is still there, unchanged
    for t in finished_before:
        assert by_number[t.number].state == S.COMPLETE
        assert by_number[t.number].values == t.values
    # the killed trial is FAIL and its configuration ran again exactly once
    assert by_number[killed[0].number].state == S.FAIL
    retries = [t for t in after if t.user_attrs.get("retry_of") == killed[0].number]
    assert len(retries) == 1 and retries[0].state == S.COMPLETE
    assert retries[0].params == killed[0].params
    # the study holds exactly the trials asked for, each number once
    complete = [t for t in after if t.state == S.COMPLETE]
    assert len(complete) == target == run.trials_finished
    assert len({t.number for t in after}) == len(after)
    assert not [t for t in after if t.state in (S.RUNNING, S.WAITING)]


@pytest.mark.slow
def test_two_workers_share_one_journal_storage(tmp_path: Path, seed_runs) -> None:
    runs = seed_runs()
    url = f"journal:{tmp_path}/search.journal"
    spec = SearchSpec.from_dict(tiny(**{"search.trials": 10,
                                        "search.reevaluation.noise_seeds": 1}))
    run = run_search(spec, storage=url, workers=2, runs=runs, out=tmp_path / "out",
                     progress=False)
    assert run.ok, run.worker_failures
    from robuststats.search._storage import open_storage

    study = optuna.load_study(study_name="tiny_search", storage=open_storage(run.storage))
    trials = study.get_trials()
    complete = [t for t in trials if t.state == S.COMPLETE]
    # each worker checks the count before it starts a trial: at most one extra per worker
    assert 10 <= len(complete) <= 11 and len(complete) == len(trials)
    workers = {t.system_attrs["robuststats:worker"]["pid"] for t in trials}
    assert len(workers) == 2 and os.getpid() not in workers
    assert [t.user_attrs.get("baseline") for t in trials].count("uniform") == 1
    # the sampler seeds differ per worker: no two sampled trials drew the same multipliers
    sampled = [tuple(sorted(t.params.items())) for t in trials if "baseline" not in t.user_attrs]
    assert len(set(sampled)) == len(sampled)
