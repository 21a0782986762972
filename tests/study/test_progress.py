"""Progress of a long run: training steps reach the bar while models train, and the
estimate of the time left settles."""

from __future__ import annotations

import io
import math
import time
from pathlib import Path

import numpy as np
import pytest

from robuststats.runs.executor import execute
from robuststats.runs.jobprogress import JobReporter, TrainingTally
from robuststats.runs.progress import Work, WorkEstimate, _Tqdm, format_seconds
from robuststats.study import RunLedger, StudySpec, plan, run_study

TINY = {
    "name": "tiny_progress",
    "version": 1,
    "task": {"name": "arithmetic", "params": {"seed": 0, "n_items": 8, "n_train": 64}},
    "model": {"hidden_size": 16, "num_layers": 1, "num_heads": 2,
              "num_kv_heads": 1, "intermediate_size": 32},
    "trainer": {"name": "builtin",
                "params": {"steps": 12, "batch_size": 8, "train_eval_items": 0}},
    "conditions": {"A": {"train_noise": None}},
    "evaluation": {"noise_levels": [0.0], "n_items": 8, "batch_size": 8},
    "seeds": 1,
}


class Recorder:
    """A caller's counter that follows the training too (``work``)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def __call__(self, n: int) -> None:
        self.events.append(("cells", n))

    def work(self, work: Work) -> None:
        self.events.append(("work", work))

    def close(self) -> None:
        self.events.append(("close", None))


def _simulate(rng: np.random.Generator, *, models: int, steps: int, cells: int,
              step_cost: float, cell_cost: float):
    """A run of one worker: each model trains ``steps`` steps then evaluates ``cells``
    cells, every unit's cost drawn around its kind's mean; yields after every unit."""
    costs = []
    for _ in range(models):
        costs += [("step", c) for c in rng.lognormal(math.log(step_cost), 0.5, steps)]
        costs += [("cell", c) for c in rng.lognormal(math.log(cell_cost), 0.2, cells)]
    return costs


def test_the_estimate_converges_on_a_synthetic_run() -> None:
    rng = np.random.default_rng(7)
    models, steps, cells = 6, 200, 10
    units = _simulate(rng, models=models, steps=steps, cells=cells, step_cost=0.05,
                      cell_cost=2.0)
    now = [100.0]
    est = WorkEstimate(clock=lambda: now[0])
    est.began(0.0)
    done = {"step": 0, "cell": 0}
    spent = {"step": 0.0, "cell": 0.0}
    total_cost = sum(c for _, c in units)
    finish, naive, lower_bound_ok = [], [], []
    for i, (kind, cost) in enumerate(units):
        now[0] += cost
        done[kind] += 1
        spent[kind] += cost
        for k, total in (("step", models * steps), ("cell", models * cells)):
            est.update(k, done=done[k], total=total,
                       seconds=spent[k] if done[k] else None, units=done[k] or None)
        left, complete = est.eta()
        elapsed = now[0] - 100.0
        if not complete:  # before the first cell: a lower bound, and said to be one
            lower_bound_ok.append(left is None or elapsed + left <= total_cost)
        elif i >= steps + cells:  # the first model trained and evaluated
            # the predicted length of the whole run, as a share of the true one
            finish.append((elapsed + left) / total_cost)
            # what a bar of cells alone predicts: finished cells over elapsed time
            naive.append(elapsed / done["cell"] * models * cells / total_cost)
    assert lower_bound_ok and all(lower_bound_ok)
    # settled: within 5 % of the true length from the end of the first model on
    assert 0.95 < min(finish) and max(finish) < 1.05, (min(finish), max(finish))
    # a bar of cells alone swings with every model trained between the cells
    assert max(naive) - min(naive) > 0.3, (min(naive), max(naive))


def test_the_estimate_counts_parallel_workers_through_the_pace() -> None:
    now = [0.0]
    est = WorkEstimate(clock=lambda: now[0])
    # two workers, each 1 s per step: 10 s of wall clock finish 20 steps of 100
    now[0] = 10.0
    est.update("step", done=20, total=100, seconds=20.0, units=20)
    left, complete = est.eta()
    assert complete and left == pytest.approx(40.0)
    assert est.fraction() == pytest.approx(0.2)


def test_start_up_is_left_out_of_the_pace() -> None:
    now = [0.0]
    est = WorkEstimate(clock=lambda: now[0])
    now[0] = 50.0  # 48 s of worker start-up, then 2 s of steps at 0.1 s each
    est.began(2.0)
    est.began(30.0)  # only the first report anchors
    est.update("step", done=20, total=200, seconds=2.0, units=20)
    left, _ = est.eta()
    assert left == pytest.approx(18.0)


def test_format_seconds() -> None:
    assert [format_seconds(s) for s in (4.4, 65, 3600 * 3 + 1250)] == ["4s", "1m05s",
                                                                       "3h20m"]


def test_the_bar_moves_with_training_and_stays_quiet_off_a_terminal(monkeypatch) -> None:
    import sys

    now = [0.0]
    for tty in (True, False):
        stream = io.StringIO()
        stream.isatty = lambda tty=tty: tty  # type: ignore[method-assign]
        monkeypatch.setattr(sys, "stderr", stream)
        bar = _Tqdm(4, 0, "cell", "cells", clock=lambda: now[0])
        written = len(stream.getvalue())
        for step in range(1, 6):
            now[0] += 1.0
            bar.work(Work(0, 2, step * 10, 200, step * 1.0, 0, 0.0, started_ago=now[0]))
        if tty:
            text = stream.getvalue()
            assert "models 0/2 (steps 50/200)" in text and "eta ≥ " in text
            assert bar.bar.n > 0  # the bar itself moved, not only its text
        else:  # a log file: no line per step, as before
            assert len(stream.getvalue()) == written
        bar(1)
        assert "1/4 cells" in stream.getvalue()
        bar.close()


def test_reporter_records_are_summed_by_the_tally(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(TINY)
    ledger = RunLedger.open(tmp_path / "run", spec)
    jobs = [c.job for c in plan(spec)]
    rec = Recorder()
    tally = TrainingTally(ledger, jobs, jobs, rec, steps_per_model=None)
    now = [0.0]
    reporter = JobReporter(ledger, jobs[0], on_write=tally.poll, clock=lambda: now[0])
    reporter.step(1, 12)
    now[0] = 0.1
    reporter.step(2, 12)  # within WRITE_SECONDS of the last write: not written
    now[0] = 3.0
    reporter.step(6, 12)
    works = [w for kind, w in rec.events if kind == "work"]
    assert [(w.steps_done, w.steps_total) for w in works] == [(1, 12), (6, 12)]
    assert works[-1].train_seconds == pytest.approx(3.0) and works[-1].models_done == 0
    reporter.trained()
    reporter.cell(0.5)
    reporter.close()
    last = [w for kind, w in rec.events if kind == "work"][-1]
    assert (last.models_done, last.models_total, last.cells_measured) == (1, 1, 1)
    ledger.close()


@pytest.mark.slow  # trains a model in this process: 3 s quiet, 10 s on a busy machine
def test_training_progress_arrives_before_the_first_cell(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(TINY)
    ledger = RunLedger.open(tmp_path / "run", spec)
    rec = Recorder()
    start = time.perf_counter()
    execute(ledger, spec, plan(spec), workers=1, progress=rec)
    assert time.perf_counter() - start < 30
    first_cell = next(i for i, (kind, _) in enumerate(rec.events) if kind == "cells")
    before = [w for kind, w in rec.events[:first_cell] if kind == "work"]
    assert before, rec.events  # the training was reported while it ran
    assert before[0].models_total == 1 and before[0].steps_total == 12
    assert 0 < before[0].steps_done <= 12
    final = [w for kind, w in rec.events if kind == "work"][-1]
    assert (final.models_done, final.steps_done, final.cells_measured) == (1, 12, 1)
    ledger.close()


@pytest.mark.slow
def test_a_pool_reports_training_before_the_first_cell(tmp_path: Path) -> None:
    spec = StudySpec.from_dict({**TINY, "seeds": 2, "trainer": {
        "name": "builtin", "params": {"steps": 400, "batch_size": 8, "train_eval_items": 0}}})
    recorders: list[Recorder] = []

    def progress(total: int, initial: int) -> Recorder:
        recorders.append(Recorder())
        return recorders[-1]

    run_study(spec, out=tmp_path / "res", runs=tmp_path / "runs", workers=2,
              progress=progress)
    events = recorders[0].events
    first_cell = next(i for i, (kind, _) in enumerate(events) if kind == "cells")
    steps = [w.steps_done for kind, w in events[:first_cell] if kind == "work"]
    assert steps and max(steps) > 0, events[:first_cell]
    final = [w for kind, w in events if kind == "work"][-1]
    assert (final.models_done, final.models_total, final.steps_total) == (2, 2, 800)
