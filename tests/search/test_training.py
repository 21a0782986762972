"""The training objective: per-layer training noise, intermediate reports, pruning, and a
re-evaluation on fresh training seeds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from robuststats.search import SearchSpec, run_search
from robuststats.search._objective import build_context, train_config
from tests.search.conftest import tiny

optuna = pytest.importorskip("optuna")
S = optuna.trial.TrialState

TRAINING = {"search.objective": "training",
            "search.train_noise": {"scale": 0.05, "phases": "both", "ops": "matmul_only"},
            "search.reports": 1, "search.trials": 3,
            "search.reevaluation.noise_seeds": 1, "search.reevaluation.seeds": 1,
            "search.reevaluation.holdout_items": 0}


def test_reports_do_not_change_the_trained_weights(tmp_path: Path) -> None:
    spec = SearchSpec.from_dict(tiny(**TRAINING))
    ctx = build_context(spec, tmp_path)
    params = {"layer_0": 2.0, "layer_1": 0.5}
    seen: list[tuple[float, int]] = []
    with_reports = train_config(ctx, params, 0, report=lambda v, s: seen.append((v, s)))
    plain = train_config(ctx, params, 0)
    assert seen and seen[0][1] == 6  # one report, half-way through the 12 steps
    a, b = with_reports.model.state_dict(), plain.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # and the training noise really is per layer: layer 0 at 2 × 5 %, layer 1 at 0.5 ×
    noise = ctx.config_noise(params)
    assert noise.layer_scales == {0: 2.0, 1: 0.5} and noise.phases == "both"
    other = train_config(ctx, {"layer_0": 1.0, "layer_1": 1.0}, 0)
    c = other.model.state_dict()
    assert not all(torch.equal(a[k], c[k]) for k in a)


class _AlwaysPrune(optuna.pruners.BasePruner):
    def prune(self, study, trial) -> bool:
        return True


def test_a_pruned_trial_stops_at_its_first_report(tmp_path: Path) -> None:
    from robuststats.search._study import make_objective

    spec = SearchSpec.from_dict(tiny(**TRAINING))
    ctx = build_context(spec, tmp_path)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=_AlwaysPrune())
    study.optimize(make_objective(ctx), n_trials=1)
    t = study.trials[0]
    assert t.state == S.PRUNED and list(t.intermediate_values) == [6]


@pytest.mark.slow
def test_training_search_end_to_end(tmp_path: Path) -> None:
    spec = SearchSpec.from_dict(tiny(**TRAINING))
    assert spec.search.pruner_name == "median"
    run = run_search(spec, out=tmp_path / "out", runs=tmp_path / "runs", progress=False)
    study = optuna.load_study(study_name="tiny_search", storage=run.storage)
    trials = study.get_trials()
    assert [t.state for t in trials] == [S.COMPLETE] * 3
    assert trials[0].user_attrs["baseline"] == "uniform"
    assert all(list(t.intermediate_values) == [6] for t in trials)
    assert all(0 <= t.value <= 1 for t in trials)
    table = run.reevaluation
    # fresh training seed 1 (the search trained seed 0), fresh noise seed 1
    assert run.version.manifest["reevaluation"]["seeds"] == [1]
    assert run.version.manifest["reevaluation"]["noise_seeds"] == [1]
    assert {"chosen", "uniform"} <= set(table["config"])
    budget = table[table["metric"] == "budget"].set_index("config")["estimate"]
    assert budget["uniform"] == pytest.approx(0.05)
