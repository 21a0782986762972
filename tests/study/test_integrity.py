"""Whole runs against damaged cells, a changed hypothesis, a task with fewer items than
asked, a failing publish, and ``verify`` tracing a version back to its cells."""

from __future__ import annotations

import errno
import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
from study_doubles import fake_study

from robuststats.errors import InputError, RobuststatsWarning
from robuststats.results import ResultStore, cell_digest, verify
from robuststats.runs.ledger import CellIntegrityWarning, atomic_write_bytes
from robuststats.study import RunLedger, StudySpec, plan, run_study


def _run(spec: StudySpec, tmp_path: Path):
    return run_study(spec, out=tmp_path / "results", runs=tmp_path / "runs", workers=1,
                     progress=False)


def _events(tmp_path: Path, name: str = "fake") -> list[dict]:
    return RunLedger(tmp_path / "runs" / name).events()


@pytest.mark.slow
def test_damaged_cells_are_recomputed_and_verify_traces_the_cells(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(fake_study(n=24, seeds=1, noise_seeds=1))
    first = _run(spec, tmp_path)
    cells = plan(spec)
    ledger = RunLedger(first.run_dir)
    report = verify(first.version)
    assert report.ok and report.cells == len(cells) and report.run_dir == str(first.run_dir)
    assert first.version.manifest["cells"][cells[0].key]["rows"] == 24

    # 1. correct values flipped in an otherwise valid file; 2. rows dropped, and the record
    # forged to match (only the plan check can tell): both recomputed, each named
    flipped, short = cells[0], cells[3]
    df = pd.read_parquet(ledger.cell_path(flipped))
    df["correct"] = (1 - df["correct"]).astype("int8")
    atomic_write_bytes(ledger.cell_path(flipped), df.to_parquet(index=False))
    df = pd.read_parquet(ledger.cell_path(short)).iloc[:12]
    atomic_write_bytes(ledger.cell_path(short), df.to_parquet(index=False))
    ledger.record_path(short).write_text(json.dumps({"sha256": cell_digest(df), "rows": 12}))
    # the run directory now disagrees with the version built from it
    traced = verify(first.version)
    assert not traced.ok and traced.run_cells_differ == sorted([flipped.key, short.key])

    with pytest.warns(CellIntegrityWarning) as caught:
        second = _run(spec, tmp_path)
    messages = [str(w.message) for w in caught if w.category is CellIntegrityWarning]
    assert any(m.startswith(f"cell {flipped.key}: its rows changed") for m in messages)
    assert any(m.startswith(f"cell {short.key}: it holds 12 rows, the plan has 24 items")
               for m in messages)
    assert second.ok and (second.cells_reused, second.cells_run) == (len(cells) - 2, 2)
    a = pd.read_parquet(first.version.path / "outcomes.parquet")
    b = pd.read_parquet(second.version.path / "outcomes.parquet")
    pd.testing.assert_frame_equal(a, b)  # the deterministic doubles give the rows back
    assert second.version.manifest["cells"] == first.version.manifest["cells"]
    assert verify(first.version).ok and verify(second.version).ok


def test_verify_detects_outcomes_that_disagree_with_the_recorded_cells(tmp_path: Path
                                                                       ) -> None:
    spec = StudySpec.from_dict(fake_study(n=10, seeds=1, noise_seeds=1))
    v = _run(spec, tmp_path).version
    # a consistent-looking forgery: outcomes rewritten and the file checksum updated
    path = v.path / "outcomes.parquet"
    df = pd.read_parquet(path)
    df.loc[0, "correct"] = 1 - df.loc[0, "correct"]
    path.chmod(0o644)
    df.to_parquet(path, index=False)
    manifest = json.loads((v.path / "manifest.json").read_text())
    from robuststats.results import sha256_file

    manifest["files"]["outcomes.parquet"]["sha256"] = sha256_file(path)
    (v.path / "manifest.json").chmod(0o644)
    (v.path / "manifest.json").write_text(json.dumps(manifest))
    report = verify(ResultStore(tmp_path / "results").get("fake/v1"), trace_run=False)
    assert report.changed == [] and report.cells_changed == [plan(spec)[0].key]
    assert not report.ok


@pytest.mark.slow
def test_changed_hypothesis_only_reanalyses(tmp_path: Path) -> None:
    study = fake_study(n=30, seeds=2, noise_seeds=1)
    first = _run(StudySpec.from_dict(study), tmp_path)
    h1 = first.analysis.hypotheses.set_index("id").loc["H1"]
    assert 0.05 < h1["estimate"] < 0.5
    study["hypotheses"][0]["margin"] = 0.5  # fixed today: no retraining, no re-evaluation
    study["analysis"]["n_resamples"] = 300
    before = len(_events(tmp_path))
    second = _run(StudySpec.from_dict(study), tmp_path)
    assert (second.models_trained, second.cells_run) == (0, 0)
    assert second.cells_reused == second.cells_planned == len(plan(StudySpec.from_dict(study)))
    assert [e["event"] for e in _events(tmp_path)[before:]] == ["spec_updated"]
    h1_new = second.analysis.hypotheses.set_index("id").loc["H1"]
    assert h1_new["margin"] == 0.5 and h1_new["verdict"] != "VERIFIED"
    assert h1_new["reason"] != h1["reason"]  # re-analysed under the new margin
    assert second.version.number == 2
    assert second.version.manifest["run_hash"] == first.version.manifest["run_hash"]
    assert second.version.manifest["spec_hash"] != first.version.manifest["spec_hash"]
    assert second.analysis.settings["n_resamples"] == 300


def test_n_items_beyond_the_task_reports_what_ran(tmp_path: Path) -> None:
    study = fake_study(n=24, seeds=1, noise_seeds=1)
    study["evaluation"]["n_items"] = 30
    with pytest.warns(RobuststatsWarning, match=r"`evaluation.n_items` asks for 30 items but "
                                                r"split 'test' of task .* has 24"):
        run = _run(StudySpec.from_dict(study), tmp_path)
    m = run.version.manifest
    assert (m["n_items"], m["n_items_requested"]) == (24, 30)
    assert "- **items per cell**: 24\n" in (run.version.path / "report.md").read_text()
    out = pd.read_parquet(run.version.path / "outcomes.parquet")
    assert out.groupby(["condition", "eval_noise", "noise_seed"]).size().eq(24).all()


def test_failed_publish_is_one_line_and_the_rerun_publishes(tmp_path: Path,
                                                            monkeypatch) -> None:
    spec = StudySpec.from_dict(fake_study(n=10, seeds=1, noise_seeds=1))

    def disk_full(path: Path, *args, **kwargs) -> None:
        (path / "report.md").write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("robuststats.report.write_report", disk_full)
    with pytest.raises(InputError, match=r"^`out`: could not write the result version under "
                                         r".*: No space left on device \(the disk is full\)\. "
                                         r"Nothing was published; the 6 finished cell\(s\) "
                                         r"are kept in .*: rerun the same command"):
        _run(spec, tmp_path)
    assert [p.name for p in (tmp_path / "results" / "fake").iterdir()] == []
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CellIntegrityWarning)
        again = _run(spec, tmp_path)
    assert (again.cells_run, again.cells_reused, again.version.number) == (0, 6, 1)
    assert verify(again.version).ok
