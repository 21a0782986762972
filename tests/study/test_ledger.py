from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from study_doubles import fake_study

from robuststats.errors import InputError
from robuststats.study import RunLedger, StudySpec, plan
from robuststats.study.ledger import atomic_write_bytes


def _spec(**kw) -> StudySpec:
    return StudySpec.from_dict(fake_study(**kw))


def _outcomes(n: int = 5) -> pd.DataFrame:
    return pd.DataFrame({"item_id": [f"q{i}" for i in range(n)], "correct": [1, 0] * (n // 2)
                         + [1] * (n % 2)})


def test_cell_roundtrip_and_event_log(tmp_path: Path) -> None:
    spec = _spec()
    ledger = RunLedger.open(tmp_path / "run", spec)
    cell = plan(spec)[1]
    assert ledger.read_cell(cell) is None
    ledger.write_cell(cell, _outcomes(), seconds=0.5)
    df = ledger.read_cell(cell)
    assert df is not None and len(df) == 5
    assert set(df["condition"]) == {cell.condition} and set(df["noise_seed"]) == {cell.noise_seed}
    assert df["correct"].tolist() == [1, 0, 1, 0, 1]
    assert ledger.finished(plan(spec)) == {cell}
    events = ledger.events()
    assert [e["event"] for e in events] == ["cell_done"] and events[0]["cell"] == cell.key


def test_truncated_cell_file_is_not_taken_as_finished(tmp_path: Path) -> None:
    spec = _spec()
    ledger = RunLedger.open(tmp_path / "run", spec)
    cell = plan(spec)[0]
    ledger.write_cell(cell, _outcomes(), seconds=0.1)
    path = ledger.cell_path(cell)
    path.write_bytes(path.read_bytes()[:40])  # as if cut by a crash of a non-atomic writer
    assert ledger.read_cell(cell) is None
    assert not path.exists()  # moved aside, so the cell runs again
    assert len(list((ledger.root / "corrupt").iterdir())) == 1


def test_cell_file_of_another_cell_is_rejected(tmp_path: Path) -> None:
    spec = _spec()
    ledger = RunLedger.open(tmp_path / "run", spec)
    a, b = plan(spec)[:2]
    ledger.write_cell(a, _outcomes(), seconds=0.1)
    ledger.cell_path(a).rename(ledger.cell_path(b))
    assert ledger.read_cell(b) is None


def test_leftover_temporary_files_are_swept(tmp_path: Path) -> None:
    spec = _spec()
    ledger = RunLedger.open(tmp_path / "run", spec)
    (ledger.cells_dir / ".A__s0__n0__ns0.parquet.x1.tmp").write_bytes(b"partial")
    RunLedger.open(tmp_path / "run", spec)
    assert not list(ledger.cells_dir.glob(".*.tmp"))


def test_changed_spec_is_refused_unless_fresh(tmp_path: Path) -> None:
    spec = _spec()
    ledger = RunLedger.open(tmp_path / "run", spec)
    ledger.write_cell(plan(spec)[0], _outcomes(), seconds=0.1)
    changed = _spec(n=41)
    with pytest.raises(InputError, match=r"belongs to a different version of study 'fake' "
                                         r"\(spec hash [0-9a-f]{12}, now [0-9a-f]{12}\).*--fresh"):
        RunLedger.open(tmp_path / "run", changed)
    fresh = RunLedger.open(tmp_path / "run", changed, fresh=True)
    assert not list(fresh.cells_dir.iterdir())
    assert json.loads((tmp_path / "run" / "spec.json").read_text())["spec_hash"] == \
        changed.spec_hash()


def test_failure_is_recorded_and_cleared_on_success(tmp_path: Path) -> None:
    spec = _spec()
    ledger = RunLedger.open(tmp_path / "run", spec)
    cell = plan(spec)[0]
    ledger.record_failure(cell, "Traceback...\nRuntimeError: boom\n")
    assert ledger.failures() == {cell.key: "Traceback...\nRuntimeError: boom\n"}
    assert ledger.events()[-1]["error"] == "RuntimeError: boom"
    ledger.write_cell(cell, _outcomes(), seconds=0.1)
    assert ledger.failures() == {}


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "x.bin"
    atomic_write_bytes(target, b"old")
    atomic_write_bytes(target, b"new contents")
    assert target.read_bytes() == b"new contents"
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]


def test_evaluator_output_is_checked(tmp_path: Path) -> None:
    spec = _spec()
    ledger = RunLedger.open(tmp_path / "run", spec)
    with pytest.raises(ValueError, match="duplicate item_ids"):
        ledger.write_cell(plan(spec)[0], pd.DataFrame({"item_id": ["a", "a"],
                                                       "correct": [1, 0]}), seconds=0)
    with pytest.raises(ValueError, match="no 'correct' column"):
        ledger.write_cell(plan(spec)[0], pd.DataFrame({"item_id": ["a"]}), seconds=0)
