"""The ``sweep:`` study kind: spec validation, adaptive rounds, resume, dose tables."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from study_doubles import fake_study

from robuststats.config.sweep import AdaptiveSpec, adaptive_levels
from robuststats.errors import InputError
from robuststats.study import StudySpec
from robuststats.study.runner import run_study


def sweep_study(**sweep) -> dict:
    data = fake_study("sweep", n=80, noise_seeds=1)
    data["hypotheses"] = []
    del data["evaluation"]["noise_levels"]
    data["sweep"] = {"grid": {"low": 0.01, "high": 0.3, "points": 5}, **sweep}
    return data


def load(tmp_path, data) -> StudySpec:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return StudySpec.from_file(path)


def test_grid_makes_the_noise_levels(tmp_path):
    spec = load(tmp_path, sweep_study())
    assert spec.evaluation.noise_levels == [0.0, 0.01, 0.0234, 0.0548, 0.128, 0.3]
    # the resolved form round-trips (overrides re-validate it) and keeps its hash
    again = spec.with_overrides(seeds=1)
    assert again.evaluation.noise_levels == spec.evaluation.noise_levels
    assert StudySpec.from_dict(spec.model_dump()).spec_hash() == spec.spec_hash()


def test_studies_without_a_sweep_keep_their_resolved_form():
    spec = StudySpec.from_dict(fake_study())
    data = spec.resolved()
    assert "sweep" not in data
    assert all("eval_ops" not in c for c in data["conditions"].values())


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["evaluation"].update(noise_levels=[0, 0.1]),
     r"evaluation\.noise_levels \(line \d+\): a study with a `sweep:` section"),
    (lambda d: d["sweep"].update(model="LL4"),
     r"sweep\.model \(line \d+\): .*did you mean 'LL.4'"),
    (lambda d: d["sweep"].update(modle="LL.4"), r"sweep\.modle .*did you mean 'model'"),
    (lambda d: d["sweep"]["grid"].update(high=0.001),
     r"sweep\.grid\.high .*must be greater than `low`"),
    (lambda d: d["sweep"]["grid"].update(points=1), r"sweep\.grid\.points"),
    (lambda d: d["sweep"].update(fixed={"g": 0.25}),
     r"sweep\.fixed\.g .*the models of 'auto' \(LL.4, W1.4, W2.4\): no parameter 'g'"),
    (lambda d: d["sweep"].update(model="W2.4", fixed={"g": 0.25}),
     r"sweep\.fixed\.g .*W2.4: no parameter 'g'"),
    (lambda d: d["sweep"].update(drop=1.5), r"sweep\.drop"),
    (lambda d: d["sweep"].update(adaptive={"rounds": 9}), r"sweep\.adaptive\.rounds"),
    (lambda d: d["sweep"].update(compare=["LL.4", "W3.4"]), r"sweep\.compare\.1"),
    (lambda d: d["conditions"]["A"].update(eval_ops="matmul_onyl"),
     r"conditions\.A\.eval_ops .*did you mean 'matmul_only'"),
])
def test_bad_sweep_keys_name_the_key_and_line(tmp_path, edit, match):
    data = sweep_study()
    edit(data)
    with pytest.raises(InputError, match=match):
        load(tmp_path, data)


def test_eval_ops_sets_the_scope_of_a_condition():
    data = sweep_study()
    data["conditions"]["B"]["eval_ops"] = "all_ops"
    spec = StudySpec.from_dict(data)
    assert spec.cell_noise("A", 0.05, 1).ops == spec.cell_noise("A", 0.05, 1).ops
    assert spec.cell_noise("B", 0.05, 1) != spec.cell_noise("A", 0.05, 1)
    assert spec.cell_noise("B", 0.05, 1).ops == "all_ops"


def test_adaptive_levels_narrow_around_the_threshold():
    ad = AdaptiveSpec(rounds=2, points=3, spread=4.0)
    first = adaptive_levels(0.04, [0.0, 0.3], ad, 0)
    assert first == [0.01, 0.04, 0.16]
    second = adaptive_levels(0.04, [0.0, *first, 0.3], ad, 1)
    assert second == [0.02, 0.08]  # spread √4 = 2; 0.04 is there already
    assert adaptive_levels(float("inf"), [0.0], ad, 0) == []


@pytest.mark.slow
def test_sweep_runs_refines_and_resumes(tmp_path):
    data = sweep_study(adaptive={"rounds": 1, "points": 2, "spread": 2.0},
                       compare=["LL.4", "LL.3", "W1.4"])
    data["analysis"]["n_resamples"] = 100
    spec = StudySpec.from_dict(data)
    run = run_study(spec, out=tmp_path / "out", runs=tmp_path / "runs", workers=1,
                    progress=False)
    assert run.ok
    grid_cells = spec.n_cells()
    assert run.cells_planned > grid_cells  # the adaptive round added levels
    path = run.version.path
    thresholds = pd.read_csv(path / "thresholds.csv")
    assert list(thresholds["condition"]) == ["A", "B"]
    # the doubles' accuracy is 0.8 − 2·scale (+0.01 per seed) for A, 0.7 − scale for B:
    # a 10 % drop at about 0.04 and 0.07
    a, b = thresholds["estimate"]
    assert 0.025 < a < 0.06 and 0.04 < b < 0.11
    assert (thresholds["ci_low"] < thresholds["estimate"]).all()
    assert (thresholds["estimate"] < thresholds["ci_high"]).all()
    for name in ("dose_fits", "dose_models", "dose_curves"):
        assert (path / f"{name}.csv").is_file()
    assert (path / "figures" / "dose_response.png").stat().st_size > 10_000
    report = (path / "report.md").read_text()
    assert "## Dose-response: critical thresholds" in report
    assert "figures/dose_response.png" in report
    outcomes = pd.read_parquet(path / "outcomes.parquet")
    added = set(outcomes["eval_noise"]) - set(spec.evaluation.noise_levels)
    assert added and all(0 < x < 1 for x in added)
    # a rerun recomputes the same adaptive levels and runs nothing
    again = run_study(spec, out=tmp_path / "out", runs=tmp_path / "runs", workers=1,
                      progress=False)
    assert again.cells_run == 0 and again.cells_planned == run.cells_planned
    pd.testing.assert_frame_equal(pd.read_csv(again.version.path / "thresholds.csv"),
                                  thresholds)
