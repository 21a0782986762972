"""run_search end to end on the tiny spec: baselines, version, config, resume, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from robuststats.engine import NoiseSpec
from robuststats.errors import InputError
from robuststats.search import REEVALUATION_COLUMNS, SearchSpec, run_search
from tests.search.conftest import tiny

optuna = pytest.importorskip("optuna")
S = optuna.trial.TrialState


def _run(tmp_path: Path, runs: Path, data: dict, **kw):
    spec = SearchSpec.from_dict(data)
    return run_search(spec, out=tmp_path / "results", runs=runs, progress=False, **kw)


@pytest.mark.slow
def test_search_publishes_a_version_with_baselines_config_and_reevaluation(
        tmp_path: Path, seed_runs) -> None:
    runs = seed_runs()
    sens = tmp_path / "sens.json"
    sens.write_text(json.dumps([{"layer": 0, "sensitivity": 0.3},
                                {"layer": 1, "sensitivity": 0.001}]))
    run = _run(tmp_path, runs, tiny(**{"search.sensitivity": str(sens)}))
    assert run.ok and run.trials_finished == 4 and run.trials_run_now == 4
    study = optuna.load_study(study_name="tiny_search", storage=run.storage)
    trials = study.get_trials()
    # the two baselines come first: uniform, then the seeds' heuristic from the file
    assert trials[0].user_attrs["baseline"] == "uniform"
    assert trials[0].params == {"layer_0": 1.0, "layer_1": 1.0}
    assert trials[1].user_attrs["baseline"] == "heuristic"
    assert trials[1].params == {"layer_0": 0.5, "layer_1": 2.0}
    # every tolerance trial shares the one clean evaluation stored in the study
    clean = {t.user_attrs["clean_accuracy"] for t in trials}
    assert len(clean) == 1
    assert clean == {sum(study.user_attrs["robuststats:clean"]["0"]) / 20}
    v = run.version.path
    for name in ("noise_config.yaml", "noise_config.json", "trials.csv", "trials.parquet",
                 "reevaluation.csv", "layer_profile.csv", "sensitivity.csv", "report.md",
                 "figures/history.png", "figures/layer_profile.png", "manifest.json"):
        assert (v / name).is_file(), name
    manifest = json.loads((v / "manifest.json").read_text())
    assert manifest["kind"] == "search" and manifest["trials"] == {"COMPLETE": 4}
    re = manifest["reevaluation"]
    assert re["noise_seeds"] == [1, 2] and re["items"] == "held-out" and re["n_items"] == 20
    table = pd.read_csv(v / "reevaluation.csv")
    assert list(table.columns) == REEVALUATION_COLUMNS
    assert {"chosen", "uniform", "heuristic"} <= set(table["config"])
    chosen = table[table["config"] == "chosen"].set_index("metric")
    assert set(chosen.index) == {"accuracy", "clean_accuracy", "drop", "retention", "budget"} \
        or set(chosen.index) == {"accuracy", "clean_accuracy", "drop", "budget"}
    assert chosen.loc["drop", "verdict"] in ("within bound", "exceeds bound", "undetermined")
    assert (table["items"] == "held-out").all()
    # rows: the 2 fresh noise seeds of the one model (its clean outcomes: one row)
    rows = table[table["metric"] != "budget"].set_index("metric")["n_rows"]
    assert (rows.drop("clean_accuracy") == 2).all() and (rows.loc["clean_accuracy"] == 1).all()
    # the config is the chosen trial's, and NoiseSpec.from_file loads both files
    spec = NoiseSpec.from_file(v / "noise_config.yaml")
    assert spec == NoiseSpec.from_file(v / "noise_config.json")
    best = study.best_trial
    assert run.chosen["trial"] == best.number
    assert spec.layer_scales == {0: best.params["layer_0"], 1: best.params["layer_1"]}
    assert spec.scale == 0.05 and spec.ops == "matmul_only"
    doc = json.loads((v / "noise_config.json").read_text())
    assert doc["provenance"]["trial"] == best.number
    assert doc["provenance"]["search_value_is_optimistic"] is True
    assert "accuracy" in doc["provenance"]["reevaluation"]
    csv = pd.read_csv(v / "trials.csv")
    assert list(csv["number"]) == [0, 1, 2, 3]
    assert list(csv.columns[:4]) == ["number", "state", "baseline", "retry_of"]

    # running again with more trials continues the same study: no baseline again
    again = _run(tmp_path, runs, tiny(**{"search.sensitivity": str(sens), "search.trials": 6}))
    assert again.trials_finished == 6 and again.trials_run_now == 2
    trials = optuna.load_study(study_name="tiny_search", storage=again.storage).get_trials()
    assert [t.number for t in trials] == list(range(6))
    assert [t.user_attrs.get("baseline") for t in trials].count("uniform") == 1
    assert again.version.number == run.version.number + 1
    # the study is finished: a third run runs no trial and publishes again
    third = _run(tmp_path, runs, tiny(**{"search.sensitivity": str(sens), "search.trials": 6}))
    assert third.trials_run_now == 0 and third.trials_finished == 6


@pytest.mark.slow
def test_another_search_in_the_same_storage_is_refused_unless_fresh(tmp_path: Path,
                                                                    seed_runs) -> None:
    runs = seed_runs()
    _run(tmp_path, runs, tiny(**{"search.trials": 2}))
    with pytest.raises(InputError, match=r"made for another search .*pass --fresh"):
        _run(tmp_path, runs, tiny(**{"search.trials": 2, "search.bound": 0.2}))
    fresh = _run(tmp_path, runs, tiny(**{"search.trials": 2, "search.bound": 0.2}), fresh=True)
    assert fresh.trials_run_now == 2


@pytest.mark.slow
def test_multi_objective_search_returns_the_pareto_front(tmp_path: Path, seed_runs) -> None:
    runs = seed_runs()
    run = _run(tmp_path, runs, tiny(**{"search.multi_objective": True, "search.trials": 5}))
    study = optuna.load_study(study_name="tiny_search", storage=run.storage)
    assert len(study.directions) == 2
    front = {t.number for t in study.best_trials}
    csv = pd.read_csv(run.version.path / "trials.csv")
    assert set(csv[csv["pareto"]]["number"]) == front
    assert (run.version.path / "figures" / "pareto.png").is_file()
    if run.chosen is not None:
        assert run.chosen["trial"] in front


@pytest.mark.slow
def test_block_space_has_one_multiplier_per_attention_and_mlp(tmp_path: Path,
                                                              seed_runs) -> None:
    runs = seed_runs()
    run = _run(tmp_path, runs, tiny(**{"search.space": "block", "search.trials": 2,
                                       "search.reevaluation.holdout_items": 0}))
    study = optuna.load_study(study_name="tiny_search", storage=run.storage)
    assert sorted(study.trials[0].params) == ["layer_0.mlp", "layer_0.self_attn",
                                              "layer_1.mlp", "layer_1.self_attn"]
    spec = NoiseSpec.from_file(run.version.path / "noise_config.yaml")
    assert set(spec.layer_scales) == {"model.layers.0.self_attn", "model.layers.0.mlp",
                                      "model.layers.1.self_attn", "model.layers.1.mlp"}
    table = run.reevaluation
    assert (table["items"] == "search").all()  # no held-out items asked for


def test_too_few_items_for_the_holdout_names_the_key(tmp_path: Path) -> None:
    spec = SearchSpec.from_dict(tiny(**{"search.reevaluation.holdout_items": 21}))
    with pytest.raises(InputError, match=r"search\.reevaluation\.holdout_items: the 'test' "
                                         r"split has 40 items, fewer than 20 search \+ 21"):
        run_search(spec, out=tmp_path / "r", runs=tmp_path / "runs", progress=False)


def test_holdout_needs_search_items_cut_from_the_split(tmp_path: Path) -> None:
    spec = SearchSpec.from_dict(tiny(**{"evaluation.n_items": None}))
    with pytest.raises(InputError, match=r"holdout_items: held-out items follow the search "
                                         r"items: set evaluation\.n_items"):
        run_search(spec, out=tmp_path / "r", runs=tmp_path / "runs", progress=False)
