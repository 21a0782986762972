"""Every sampler setting is the search file's, not Optuna's default, and the McNemar pruner
(issue 27, item 5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robuststats.search import SearchSpec
from robuststats.search._study import make_pruner, make_sampler
from tests.search.conftest import tiny

optuna = pytest.importorskip("optuna")

TRAINING = {"search.objective": "training",
            "search.train_noise": {"scale": 0.05, "phases": "both", "ops": "matmul_only"},
            "search.reports": 1, "search.trials": 3,
            "search.reevaluation.noise_seeds": 1, "search.reevaluation.seeds": 1,
            "search.reevaluation.holdout_items": 0}


def test_tpe_runs_with_the_files_settings_whatever_optunas_defaults():
    spec = SearchSpec.from_dict(tiny())
    settings = spec.search.sampler_settings
    assert settings == {"name": "tpe", "seed": 0, "n_startup_trials": 5,
                        "n_ei_candidates": 24, "multivariate": True, "group": False,
                        "constant_liar": True}
    tpe = make_sampler(spec, 7)
    # the sampler holds the stated values, none left as None for Optuna to decide
    assert (tpe._n_startup_trials, tpe._n_ei_candidates, tpe._multivariate, tpe._group,
            tpe._constant_liar) == (5, 24, True, False, True)
    changed = SearchSpec.from_dict(tiny(**{"search.tpe": {"multivariate": False,
                                                          "constant_liar": False,
                                                          "n_startup_trials": 8}}))
    tpe = make_sampler(changed, 7)
    assert (tpe._n_startup_trials, tpe._multivariate, tpe._constant_liar) == (8, False, False)
    # sampler settings continue a study (outside the run hash) but are part of the spec
    assert changed.run_hash() == spec.run_hash() and changed.spec_hash() != spec.spec_hash()
    # multi-objective: multivariate resolves to false, as Optuna 5.0 decides, but stated
    multi = SearchSpec.from_dict(tiny(**{"search.multi_objective": True,
                                         "search.sampler": "tpe"}))
    assert multi.search.sampler_settings["multivariate"] is False


def test_nsga2_settings_and_a_bad_one_named():
    spec = SearchSpec.from_dict(tiny(**{"search.multi_objective": True,
                                        "search.nsga2": {"population_size": 8,
                                                         "crossover": "sbx"}}))
    sampler = make_sampler(spec, 1)
    assert spec.search.sampler_settings["population_size"] == 8
    assert sampler._population_size == 8
    assert type(sampler._child_generation_strategy._crossover).__name__ == "SBXCrossover"
    from robuststats.errors import InputError

    with pytest.raises(InputError, match=r"search.tpe.multivarate"):
        SearchSpec.from_dict(tiny(**{"search.tpe": {"multivarate": True}}))


def test_pruner_settings_and_the_resolved_spec(tmp_path: Path) -> None:
    """The pruner's settings are stated too; the resolved spec (recorded in the version's
    manifest beside `sampler`, `pruner` and `optuna_version`) holds every sampler setting."""
    spec = SearchSpec.from_dict(tiny(**TRAINING, **{"search.pruner": "mcnemar",
                                                    "search.pruning": {"p_threshold": 0.01}}))
    assert spec.search.pruner_settings == {"name": "mcnemar", "n_startup_trials": 3,
                                           "p_threshold": 0.01}
    pruner = make_pruner(spec)
    assert (pruner.p_threshold, pruner.n_startup_trials) == (0.01, 3)
    median = make_pruner(SearchSpec.from_dict(tiny(**TRAINING)))
    assert isinstance(median, optuna.pruners.MedianPruner)
    assert spec.resolved()["search"]["tpe"]["constant_liar"] is True


def _study_with_best(best_items: np.ndarray, pruner) -> optuna.Study:
    """Three finished trials that kept their items at step 6; the best has ``best_items``."""
    from robuststats.search._pruner import ITEMS_ATTR

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    for value, items in ((0.5, np.zeros_like(best_items)), (best_items.mean(), best_items),
                         (0.1, np.zeros_like(best_items))):
        trial = study.ask()
        trial.set_user_attr(f"{ITEMS_ATTR}:6", items.tolist())
        trial.report(float(items.mean()), 6)
        study.tell(trial, float(value))
    return study


@pytest.mark.parametrize(("only_best", "only_this", "pruned"), [
    (8, 1, True),    # R: binom.test(8, 9, alternative = "greater")$p.value 0.01953125
    (6, 1, False),   # R: binom.test(6, 7, alternative = "greater")$p.value 0.0625
])
def test_the_mcnemar_pruner_prunes_on_paired_evidence(only_best, only_this, pruned):
    from robuststats.search._pruner import ITEMS_ATTR, McNemarPruner

    n = 30
    best = np.zeros(n, dtype=int)
    best[:20] = 1                          # the best trial: 20 of 30
    this = best.copy()
    this[:only_best] = 0                   # items only the best answers
    this[20:20 + only_this] = 1            # items only this trial answers
    study = _study_with_best(best, McNemarPruner(p_threshold=0.05, n_startup_trials=3))
    trial = study.ask()
    trial.set_user_attr(f"{ITEMS_ATTR}:6", this.tolist())
    trial.report(float(this.mean()), 6)
    assert trial.should_prune() is pruned
    # before n_startup_trials finished trials nothing is pruned
    early = McNemarPruner(p_threshold=0.05, n_startup_trials=4)
    assert early.prune(study, study.trials[-1]) is False


@pytest.mark.slow  # trains a tiny model: ~17 s on 2 loaded cores
def test_a_training_search_keeps_the_items_the_pruner_reads(tmp_path: Path) -> None:
    from robuststats.search._objective import build_context
    from robuststats.search._pruner import ITEMS_ATTR
    from robuststats.search._study import make_objective

    spec = SearchSpec.from_dict(tiny(**TRAINING, **{"search.pruner": "mcnemar"}))
    ctx = build_context(spec, tmp_path)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(spec))
    study.optimize(make_objective(ctx), n_trials=1)
    (trial,) = study.trials
    items = trial.user_attrs[f"{ITEMS_ATTR}:6"]
    assert len(items) == 20 and set(items) <= {0, 1}
    assert trial.intermediate_values[6] == pytest.approx(np.mean(items))
