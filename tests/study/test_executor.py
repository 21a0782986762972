from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
from study_doubles import fake_study

from robuststats.runs.executor import execute
from robuststats.study import RunLedger, StudySpec, plan, run_study


def test_pool_runs_every_cell_once_and_records_failures(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(fake_study(fail=["A__s1__n0.05__ns1"]))
    ledger = RunLedger.open(tmp_path / "run", spec)
    cells = plan(spec)
    ticks: list[int] = []
    report = execute(ledger, spec, cells, workers=2, progress=ticks.append)
    assert (report.cells_run, report.cells_failed, report.models_trained) == (19, 1, 4)
    assert sum(ticks) == len(cells)  # the bar reaches the end, failures included
    assert set(ledger.failures()) == {"A__s1__n0.05__ns1"}
    assert "RuntimeError: injected failure" in ledger.failures()["A__s1__n0.05__ns1"]
    done = [e["cell"] for e in ledger.events() if e["event"] == "cell_done"]
    assert sorted(done) == sorted(c.key for c in cells if c.key != "A__s1__n0.05__ns1")
    # models are cached: a second execution loads them instead of training
    for c in cells[:2]:
        ledger.cell_path(c).unlink()
    again = execute(ledger, spec, cells[:2], workers=1)
    assert (again.cells_run, again.models_trained) == (2, 0)


def test_in_process_and_pool_give_identical_outcomes(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(fake_study())
    tables = []
    for workers in (1, 2):
        ledger = RunLedger.open(tmp_path / f"run{workers}", spec)
        execute(ledger, spec, plan(spec), workers=workers)
        tables.append(ledger.outcomes(plan(spec)))
    assert tables[0].equals(tables[1])


def test_failed_cell_makes_study_not_ok_and_rerun_retries_it(tmp_path: Path) -> None:
    failing = fake_study(fail=["B__s0__n0.1__ns0"])
    spec = StudySpec.from_dict(failing)
    first = run_study(spec, out=tmp_path / "res", runs=tmp_path / "runs", workers=1,
                      progress=False)
    assert not first.ok and first.cells_failed == 1
    assert (first.failures_dir / "B__s0__n0.1__ns0.txt").is_file()
    missing = first.analysis.missing
    assert missing[["condition", "seed", "eval_noise", "noise_seed"]].values.tolist() == [
        ["B", 0, 0.1, 0]]
    assert "injected failure" in missing["error"].iloc[0]
    h2 = first.analysis.hypotheses.set_index("id").loc["H2"]  # retention at 0.1 needs it
    assert h2["verdict"] == "INCONCLUSIVE" and "missing" in h2["reason"]
    # same spec, so the failure still happens; the finished cells are reused
    second = run_study(spec, out=tmp_path / "res", runs=tmp_path / "runs", workers=1,
                       progress=False)
    assert (second.cells_reused, second.cells_run, second.cells_failed) == (19, 0, 1)
    assert list(RunLedger(tmp_path / "runs" / "fake").failures()) == ["B__s0__n0.1__ns0"]
    assert second.version.number == 2


def test_interrupt_stops_the_pool_at_once_and_keeps_finished_cells(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(fake_study(delay=0.4, n=10, noise_seeds=1))
    cells = plan(spec)
    raised: list[float] = []

    def progress(n: int) -> None:
        if not raised and sum(1 for c in cells if ledger.cell_path(c).exists()) >= 2:
            raised.append(time.monotonic())
            raise KeyboardInterrupt  # what Ctrl-C raises in the parent

    with RunLedger.open(tmp_path / "run", spec) as ledger:
        with pytest.raises(KeyboardInterrupt):
            execute(ledger, spec, cells, workers=2, progress=progress)
        stopped = time.monotonic() - raised[0]
        kept = ledger.finished(cells)
        time.sleep(1.0)  # a worker left running would write its next cell by now
        assert ledger.finished(cells) == kept
    # the pending jobs were cancelled, not run to the end (the old pool ran all 12 cells)
    assert 2 <= len(kept) <= 4 < len(cells)
    assert stopped < 3.0  # 0.1-0.9 s measured; room for a loaded machine
    assert not multiprocessing.active_children()  # every worker ended and reaped
