from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from study_doubles import fake_study

from robuststats.errors import InputError
from robuststats.results import cell_digest
from robuststats.runs.ledger import CellIntegrityWarning, atomic_write_bytes, run_hash
from robuststats.runs.lock import RunInUseError
from robuststats.study import RunLedger, StudySpec, plan


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
    with pytest.warns(CellIntegrityWarning, match=rf"cell {cell.key}: unreadable"):
        assert ledger.read_cell(cell) is None
    assert not path.exists() and not ledger.record_path(cell).exists()  # runs again
    assert sorted(p.name.split(".")[0] for p in (ledger.root / "corrupt").iterdir()) == [
        f"cells-{cell.key}", f"cells-{cell.key}"]  # the file and its record, kept to inspect


def test_cell_file_of_another_cell_is_rejected(tmp_path: Path) -> None:
    spec = _spec()
    ledger = RunLedger.open(tmp_path / "run", spec)
    a, b = plan(spec)[:2]
    ledger.write_cell(a, _outcomes(), seconds=0.1)
    ledger.cell_path(a).rename(ledger.cell_path(b))
    with pytest.warns(CellIntegrityWarning, match=f"cell {b.key}: .*belongs to another cell"):
        assert ledger.read_cell(b) is None


def test_leftover_temporary_files_are_swept(tmp_path: Path) -> None:
    spec = _spec()
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        (ledger.cells_dir / ".A__s0__n0__ns0.parquet.x1.tmp").write_bytes(b"partial")
    RunLedger.open(tmp_path / "run", spec).close()
    assert not list(ledger.cells_dir.glob(".*.tmp"))


def test_changed_spec_is_refused_unless_fresh(tmp_path: Path) -> None:
    spec = _spec()
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        ledger.write_cell(plan(spec)[0], _outcomes(), seconds=0.1)
    changed = _spec(n=41)
    with pytest.raises(InputError, match=r"belongs to a different version of study 'fake' "
                                         r"\(run hash [0-9a-f]{12}, now [0-9a-f]{12}\).*--fresh"):
        RunLedger.open(tmp_path / "run", changed)
    with RunLedger.open(tmp_path / "run", changed, fresh=True) as fresh:
        assert not list(fresh.cells_dir.iterdir())
        assert (tmp_path / "run" / "lock").is_file()  # the lock it holds survives --fresh
    stored = json.loads((tmp_path / "run" / "spec.json").read_text())
    assert (stored["run_hash"], stored["spec_hash"]) == (run_hash(changed), changed.spec_hash())


def test_fresh_discards_a_run_of_the_same_spec_too(tmp_path: Path) -> None:
    spec = _spec()
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        ledger.write_cell(plan(spec)[0], _outcomes(), seconds=0.1)
        (ledger.models_dir / "A__s0").mkdir()
    with RunLedger.open(tmp_path / "run", spec) as again:  # without --fresh: resumed
        assert len(list(again.cells_dir.glob("*.parquet"))) == 1
    with RunLedger.open(tmp_path / "run", spec, fresh=True) as fresh:
        assert not list(fresh.cells_dir.iterdir()) and not list(fresh.models_dir.iterdir())
        assert fresh.finished(plan(spec)) == set()


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


# ---------------------------------------------------------------- integrity of stored cells
def _rewrite(ledger: RunLedger, cell, df: pd.DataFrame, *, record: bool) -> None:
    """Replace a stored cell's file (and, with ``record``, its record to match)."""
    atomic_write_bytes(ledger.cell_path(cell), df.to_parquet(index=False))
    if record:
        ledger.record_path(cell).write_text(json.dumps(
            {"sha256": cell_digest(df), "rows": len(df)}))


def test_cell_record_holds_sha256_and_rows(tmp_path: Path) -> None:
    spec = _spec()
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        cell = plan(spec)[2]
        ledger.write_cell(cell, _outcomes(6), seconds=0.1)
        record = ledger.read_record(cell)
        stored = pd.read_parquet(ledger.cell_path(cell))
        assert record is not None and record["rows"] == 6
        assert record["sha256"] == cell_digest(stored) and len(record["sha256"]) == 64
        assert ledger.events()[-1]["sha256"] == record["sha256"]


def test_altered_correct_values_are_detected_and_set_aside(tmp_path: Path) -> None:
    spec = _spec()
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        cells = plan(spec)
        for c in cells[:2]:
            ledger.write_cell(c, _outcomes(), seconds=0.1)
        tampered = pd.read_parquet(ledger.cell_path(cells[0]))
        tampered["correct"] = (1 - tampered["correct"]).astype("int8")  # still a valid file
        _rewrite(ledger, cells[0], tampered, record=False)
        with pytest.warns(CellIntegrityWarning,
                          match=rf"cell {cells[0].key}: its rows changed after it was written"):
            assert ledger.finished(cells) == {cells[1]}
        assert not ledger.cell_path(cells[0]).exists()
        assert ledger.events()[-1]["event"] == "cell_set_aside"


def test_dropped_rows_disagree_with_the_record(tmp_path: Path) -> None:
    spec = _spec()
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        cell = plan(spec)[0]
        ledger.write_cell(cell, _outcomes(), seconds=0.1)
        short = pd.read_parquet(ledger.cell_path(cell)).iloc[:3]
        _rewrite(ledger, cell, short, record=False)
        with pytest.warns(CellIntegrityWarning, match="holds 3 rows, its record says 5"):
            assert ledger.read_cell(cell) is None


def test_cell_is_checked_against_the_planned_items(tmp_path: Path) -> None:
    spec = _spec()
    items = [f"q{i}" for i in range(5)]
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        cell = plan(spec)[0]
        ledger.write_cell(cell, _outcomes(), seconds=0.1, items=items)
        assert ledger.read_cell(cell, items=items) is not None
        # a consistent file and record, but two planned items are missing (an evaluator
        # that skipped them, or a plan that grew): recomputed, never aligned and failed later
        short = pd.read_parquet(ledger.cell_path(cell)).iloc[:3]
        _rewrite(ledger, cell, short, record=True)
        with pytest.warns(CellIntegrityWarning, match=rf"cell {cell.key}: it holds 3 rows, "
                                                      r"the plan has 5 items; 2 planned "
                                                      r"item\(s\) missing \(first: 'q3'\)"):
            assert ledger.finished([cell], items=items) == set()


def test_write_refuses_outcomes_that_do_not_match_the_plan(tmp_path: Path) -> None:
    spec = _spec()
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        cell = plan(spec)[0]
        with pytest.raises(ValueError, match=r"do not match the plan: it holds 5 rows, the "
                                             r"plan has 6 items; 1 planned item\(s\) missing "
                                             r"\(first: 'q5'\)"):
            ledger.write_cell(cell, _outcomes(), seconds=0.1,
                              items=[f"q{i}" for i in range(6)])
        assert not ledger.cell_path(cell).exists()


def test_cell_without_record_is_recomputed(tmp_path: Path) -> None:
    spec = _spec()
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        cell = plan(spec)[0]
        ledger.write_cell(cell, _outcomes(), seconds=0.1)
        ledger.record_path(cell).unlink()
        with pytest.warns(CellIntegrityWarning, match="no record of its checksum"):
            assert ledger.read_cell(cell) is None


def test_format_1_run_directory_is_adopted(tmp_path: Path) -> None:
    """A run directory from before run hashes and cell records: same outcomes part, other
    hypotheses. It is reused; its valid cells get records instead of being recomputed."""
    spec = _spec()
    root = tmp_path / "run"
    with RunLedger.open(root, spec) as ledger:
        cell = plan(spec)[0]
        ledger.write_cell(cell, _outcomes(), seconds=0.1)
    ledger.record_path(cell).unlink()
    old = spec.resolved()
    old["hypotheses"][0]["margin"] = 0.5  # an old study file with another margin
    (root / "spec.json").write_text(json.dumps({"spec_hash": "0" * 64, "spec": old}))
    with RunLedger.open(root, spec) as again:
        assert again.read_cell(cell) is not None
        assert again.read_record(cell)["rows"] == 5
        assert [e["event"] for e in again.events()][-3:] == [
            "spec_updated", "run_format_upgraded", "cell_adopted"]
    stored = json.loads((root / "spec.json").read_text())
    assert (stored["run_format"], stored["run_hash"]) == (2, run_hash(spec))


# ---------------------------------------------------------------- what the run hash covers
def test_run_hash_covers_outcomes_only() -> None:
    base = fake_study()
    same = [dict(base, hypotheses=base["hypotheses"][:1]),
            dict(base, analysis={"n_resamples": 999, "multiplicity": "bonferroni"}),
            dict(base, description="fixed a typo"),
            dict(base, conditions={c: {"train_noise": None, "description": "x"}
                                   for c in ("A", "B")})]
    h = run_hash(StudySpec.from_dict(base))
    assert all(run_hash(StudySpec.from_dict(d)) == h for d in same)
    other = [fake_study(n=41), fake_study(noise_seeds=3), fake_study(seeds=3),
             fake_study(delay=0.01), fake_study(conditions=("A", "C")),
             dict(base, model={"hidden_size": 8}),
             dict(base, evaluation={**base["evaluation"], "batch_size": 7}),
             dict(base, conditions={"A": {"train_noise": {"scale": 0.05}}, "B": {}})]
    assert all(run_hash(StudySpec.from_dict(d)) != h for d in other)


def test_changed_hypotheses_reuse_the_run_and_update_spec_json(tmp_path: Path) -> None:
    spec = _spec()
    with RunLedger.open(tmp_path / "run", spec) as ledger:
        ledger.write_cell(plan(spec)[0], _outcomes(), seconds=0.1)
    study = fake_study()
    study["hypotheses"][0]["margin"] = 0.1
    changed = StudySpec.from_dict(study)
    with RunLedger.open(tmp_path / "run", changed) as again:
        assert again.finished(plan(changed)) == {plan(spec)[0]}
        assert again.spec_dict()["hypotheses"][0]["margin"] == 0.1
        assert again.events()[-1]["event"] == "spec_updated"


# ---------------------------------------------------------------- one process per run dir
def test_second_open_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    spec = _spec()
    first = RunLedger.open(tmp_path / "run", spec)
    with pytest.raises(RunInUseError, match=rf"^the run directory '.*run' is in use by process "
                                            rf"{os.getpid()}, running since \S+: wait .*--runs"):
        RunLedger.open(tmp_path / "run", spec, fresh=True)
    assert (first.cells_dir).is_dir()  # --fresh was refused before deleting anything
    first.close()
    RunLedger.open(tmp_path / "run", spec).close()
    assert (tmp_path / "run" / "lock").read_text() == ""  # released: no stale PID left


def test_unreadable_spec_json_is_refused_unless_fresh(tmp_path: Path) -> None:
    spec = _spec()
    RunLedger.open(tmp_path / "run", spec).close()
    (tmp_path / "run" / "spec.json").write_text("{cut by a cra")
    with pytest.raises(InputError, match=r"has an unreadable spec.json: pass --fresh"):
        RunLedger.open(tmp_path / "run", spec)
    RunLedger.open(tmp_path / "run", spec, fresh=True).close()
