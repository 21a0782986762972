"""A killed probe resumes: finished evaluations are read back, the rest run, the result is
the same as an uninterrupted run's; damaged stored evaluations are recomputed."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from robuststats.diagnose import _probe, resolve_plan, run_diagnosis
from robuststats.runs.spec import StudySpec

STUDY = """\
name: tiny_resume
version: 1
task:
  name: arithmetic
  params: {seed: 0, n_items: 10, n_train: 40}
model: {num_layers: 3}
trainer:
  name: builtin
  params: {steps: 2, batch_size: 8, train_eval_items: 0}
conditions:
  A:
    train_noise: null
evaluation:
  noise_levels: [0, 0.05]
  n_items: 10
  batch_size: 10
seeds: 1
diagnose:
  levels: [layer]
  noise_seeds: 2
"""


class Killed(Exception):
    pass


def _spec(tmp_path: Path) -> StudySpec:
    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    return StudySpec.from_file(path)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = _probe._evaluate

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_probe, "_evaluate", counted)
    return calls


def _kill_after(n: int):
    def progress(total: int, done: int):
        seen = [0]

        def step(k: int) -> None:
            seen[0] += k
            if seen[0] >= n:
                raise Killed()
        return step
    return progress


def _outcomes(diagnosis) -> pd.DataFrame:
    return diagnosis.outcomes.sort_values(["seed", "target", "noise_seed", "item_id"],
                                          ignore_index=True)


@pytest.mark.slow
def test_killed_probe_resumes_without_repeating_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec(tmp_path)
    plan, ledger_spec = resolve_plan(spec)
    total = 1 + 3 * 2  # clean + 3 layers × 2 noise seeds
    reference = run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "ref",
                              write=False)

    calls = _counting(monkeypatch)
    with pytest.raises(Killed):
        run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "runs",
                      write=False, progress=_kill_after(4))
    assert len(calls) == 4
    stored = sorted((tmp_path / "runs" / "tiny_resume" / "diagnose").rglob("*.json"))
    assert len(stored) == 4

    calls.clear()
    resumed = run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "runs",
                            out=tmp_path / "out")
    assert len(calls) == total - 4  # only what was missing
    assert resumed.meta["evaluations_reused"] == 4
    pd.testing.assert_frame_equal(_outcomes(resumed), _outcomes(reference))
    pd.testing.assert_frame_equal(resumed.table, reference.table)
    # the injection counts read back are the ones the engine reported
    a = resumed.injections.sort_values(list(resumed.injections.columns[:4]), ignore_index=True)
    b = reference.injections.sort_values(list(reference.injections.columns[:4]),
                                         ignore_index=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)

    # everything finished: a third run evaluates nothing
    calls.clear()
    again = run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "runs",
                          write=False)
    assert calls == [] and again.meta["evaluations_reused"] == total

    # reuse=False starts the probe's evaluations over
    calls.clear()
    run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "runs", write=False,
                  reuse=False)
    assert len(calls) == total


@pytest.mark.parametrize("damage", ["truncate", "flip", "other_items"])
def test_damaged_evaluation_is_recomputed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          damage: str) -> None:
    spec = _spec(tmp_path)
    plan, ledger_spec = resolve_plan(spec, noise_seeds=1)
    first = run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "runs",
                          write=False)
    files = sorted((tmp_path / "runs" / "tiny_resume" / "diagnose").rglob("layer_1.ns0.json"))
    assert len(files) == 1
    path = files[0]
    text = path.read_text()
    if damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "flip":  # one outcome changed, digest left as it was
        data = json.loads(text)
        data["body"]["correct"][0] = 1 - data["body"]["correct"][0]
        path.write_text(json.dumps(data))
    else:  # a consistent file, but for other items
        from robuststats.diagnose._store import _digest

        data = json.loads(text)
        data["body"]["item_id"][0] = "not-an-item"
        data["sha256"] = _digest(data["body"])
        path.write_text(json.dumps(data))
    calls = _counting(monkeypatch)
    second = run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "runs",
                           write=False)
    assert len(calls) == 1
    assert second.meta["evaluations_damaged"] == 1
    pd.testing.assert_frame_equal(_outcomes(second), _outcomes(first))
    events = (tmp_path / "runs" / "tiny_resume" / "events.jsonl").read_text()
    assert "diagnose_damaged_evaluations" in events
    json.loads(path.read_text())  # replaced by a whole file


def test_other_scale_uses_other_evaluations(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec(tmp_path)
    plan, ledger_spec = resolve_plan(spec, noise_seeds=1)
    run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "runs", write=False)
    calls = _counting(monkeypatch)
    plan2, _ = resolve_plan(spec, noise_seeds=1, scale=0.2)
    run_diagnosis(spec, plan2, ledger_spec=ledger_spec, runs=tmp_path / "runs", write=False)
    assert len(calls) == 4  # clean (its key includes the scale) + 3 layers
    assert len(list((tmp_path / "runs" / "tiny_resume" / "diagnose").iterdir())) == 2


@pytest.mark.slow  # about 17 s: a probe run twice, serially and on two workers
def test_worker_processes_give_the_serial_result(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """--workers 2: every evaluation runs in the pool (none in this process), and the
    outcomes and tables equal the serial probe's."""
    spec = _spec(tmp_path)
    plan, ledger_spec = resolve_plan(spec)
    serial = run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "serial",
                           write=False)
    calls = _counting(monkeypatch)
    steps: list[int] = []

    def progress(total: int, done: int):
        steps.append(done)
        return steps.append

    pooled = run_diagnosis(spec, plan, ledger_spec=ledger_spec, runs=tmp_path / "pool",
                           write=False, workers=2, progress=progress)
    assert calls == []  # the parent only read the workers' files back
    assert pooled.meta["evaluations_in_workers"] == 7
    assert sum(steps) == 7  # the bar ends at the total, counting nothing twice
    pd.testing.assert_frame_equal(_outcomes(pooled), _outcomes(serial))
    pd.testing.assert_frame_equal(pooled.table, serial.table)
