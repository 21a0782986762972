"""The evaluation's injection counts reach disk per cell and every result version."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from study_doubles import fake_study

from robuststats.results import verify
from robuststats.runs.executor import execute
from robuststats.runs.ledger import INJECTION_COLUMNS
from robuststats.study import RunLedger, StudySpec, plan, run_study

TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 4, "num_kv_heads": 2,
        "intermediate_size": 64}


def _records(level: float) -> list[dict]:
    return [{"layer": 0, "op": "linear", "phase": "forward", "count": 7,
             "rms_noise_ratio": level, "target_scale": level}]


def _outcomes() -> pd.DataFrame:
    return pd.DataFrame({"item_id": ["q0", "q1"], "correct": [1, 0]})


def test_ledger_stores_injections_per_cell_before_the_cell(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(fake_study())
    ledger = RunLedger.open(tmp_path / "run", spec)
    clean, noisy = plan(spec)[0], plan(spec)[1]
    assert clean.is_clean and not noisy.is_clean
    ledger.write_cell(clean, _outcomes(), seconds=0.1, injections=[])
    ledger.write_cell(noisy, _outcomes(), seconds=0.1, injections=_records(noisy.eval_noise))
    assert ledger.injections_path(noisy).parent == ledger.root / "injections"
    table = ledger.injections(plan(spec))
    assert list(table.columns) == INJECTION_COLUMNS
    assert table[["condition", "seed", "eval_noise", "noise_seed", "op", "count"]].values.tolist() \
        == [[noisy.condition, noisy.seed, noisy.eval_noise, noisy.noise_seed, "linear", 7]]
    assert pd.read_parquet(ledger.injections_path(clean)).empty  # recorded: nothing injected
    assert [e.get("injections") for e in ledger.events()] == [0, 7]
    # a cell whose stats cannot be stored is not written either
    bad = plan(spec)[2]
    with pytest.raises(ValueError, match=r"injection stats lack columns \['count'"):
        ledger.write_cell(bad, _outcomes(), seconds=0.1,
                          injections=[{"layer": 0, "op": "linear", "phase": "forward"}])
    assert not ledger.cell_path(bad).exists()
    # a noisy cell finished without a record is named
    other = plan(spec)[3]
    ledger.write_cell(other, _outcomes(), seconds=0.1)
    assert ledger.without_injections(plan(spec)) == [other]
    # no cell file, no injections row (a file left by a killed attempt is not a result)
    ledger.cell_path(noisy).unlink()
    assert ledger.injections(plan(spec)).empty


@pytest.mark.slow
def test_versions_carry_the_injections_of_an_external_evaluator(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(fake_study(n=6, noise_seeds=1, seeds=1))
    run = run_study(spec, out=tmp_path / "res", runs=tmp_path / "runs", workers=2,
                    progress=False)
    table = pd.read_parquet(run.version.path / "injections.parquet")
    noisy = [c for c in plan(spec) if not c.is_clean]
    assert len(table) == 2 * len(noisy)  # the double reports two ops per noisy cell
    assert (table["eval_noise"] > 0).all() and (table["count"] == 6).all()
    assert pd.read_csv(run.version.path / "injections.csv").shape == table.shape
    assert run.version.manifest["row_counts"]["injections"] == len(table)
    assert run.version.manifest["cells_without_injection_counts"] == []
    assert verify(run.version).ok


def test_every_noisy_cell_was_noisy_and_every_clean_cell_clean(tmp_path: Path) -> None:
    """The real tiny model, trainer, evaluator and engine on a minimal study."""
    from robuststats.engine import NoiseSpec
    from robuststats.engine._inject import required_ops
    from robuststats.engine._model_map import build_model_map
    from robuststats.models.trainer import TrainedModel

    spec = StudySpec.from_dict({
        "name": "inj", "version": 1,
        "task": {"name": "arithmetic", "params": {"n_items": 6, "n_train": 40, "seed": 0}},
        "model": TINY,
        "trainer": {"name": "builtin", "params": {"steps": 2, "batch_size": 8,
                                                  "train_eval_items": 0}},
        "conditions": {"A": {}, "B": {"train_noise": {"scale": 0.05, "phases": "both"}}},
        "evaluation": {"noise_levels": [0, 0.05, 0.1], "noise_seeds": 2, "batch_size": 6},
        "seeds": 1,
    })
    # the executor, not run_study: two training steps leave an accuracy of 0, and this test
    # is about the run directory (test_e2e checks the version of a trained study)
    ledger = RunLedger.open(tmp_path / "run", spec)
    cells = plan(spec)
    report = execute(ledger, spec, cells, workers=1)
    assert (report.cells_run, report.cells_failed) == (len(cells), 0)
    assert all(ledger.injections_path(c).is_file() for c in cells)
    table = ledger.injections(cells)
    model = TrainedModel.load(ledger.model_path(cells[0].job)).model
    required = required_ops(NoiseSpec(scale=0.05, ops=spec.evaluation.ops),
                            build_model_map(model))
    assert {"linear", "attention_scores", "attention_output"} <= required
    keys = ["condition", "seed", "eval_noise", "noise_seed"]
    for cell in cells:
        rows = table[(table[keys] == [cell.condition, cell.seed, cell.eval_noise,
                                      cell.noise_seed]).all(axis=1)]
        if cell.is_clean:
            assert rows.empty, cell
            continue
        counts = rows.groupby("op")["count"].sum()
        assert required <= set(counts[counts > 0].index), (cell, counts.to_dict())
        assert set(rows["phase"]) == {"forward"}
        assert (rows["target_scale"] == cell.eval_noise).all()
        assert (rows["rms_noise_ratio"] > 0).all()


def test_a_damaged_injection_file_is_set_aside_and_named(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(fake_study())
    ledger = RunLedger.open(tmp_path / "run", spec)
    a, b = [c for c in plan(spec) if not c.is_clean][:2]
    for cell in (a, b):
        ledger.write_cell(cell, _outcomes(), seconds=0.1, injections=_records(cell.eval_noise))
    path = ledger.injections_path(a)
    path.write_bytes(path.read_bytes()[:30])  # as if damaged on disk
    table = ledger.injections(plan(spec))
    assert set(table["noise_seed"].astype(str) + table["eval_noise"].astype(str)) == {
        f"{b.noise_seed}{b.eval_noise}"}
    assert ledger.without_injections(plan(spec)) == [a]
    assert [p.name.split(".parquet")[0] for p in (ledger.root / "corrupt").iterdir()] == [
        f"injections-{a.key}"]
    # another cell's record under this cell's name is not taken either
    ledger.injections_path(b).rename(ledger.injections_path(a))
    assert ledger.read_injections(a) is None and ledger.without_injections([a, b]) == [a, b]
