"""The sampler and pruner settings of a search file (``search.tpe``, ``search.nsga2``,
``search.pruning``): every setting Optuna would otherwise choose, stated, so an Optuna
upgrade cannot change a search silently (docs/search.md, "Samplers and pruners, stated")."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from robuststats.config import Strict

__all__ = ["MAX_TRIALS", "NSGA2Settings", "PrunerSettings", "TPESettings"]

#: bound of ``search.trials`` and ``--trials``: far above any search a CPU or a GPU runs
MAX_TRIALS = 100_000


class TPESettings(Strict):
    """Every setting of Optuna's TPE sampler that a search depends on, stated here so that
    an Optuna upgrade cannot change a search silently (Optuna 5 turned multivariate TPE and
    the constant liar on by default)."""

    #: random trials before the model takes over (the baselines count)
    n_startup_trials: int = Field(default=5, ge=0, le=MAX_TRIALS)
    n_ei_candidates: int = Field(default=24, ge=1, le=10_000)
    #: null: true for one objective, false for several (Optuna 5.0's choice, resolved here)
    multivariate: bool | None = None
    group: bool = False
    #: parallel workers see running trials as bad ones (spreads their draws)
    constant_liar: bool = True


class NSGA2Settings(Strict):
    """Every setting of Optuna's NSGA-II sampler that a search depends on."""

    population_size: int = Field(default=50, ge=2, le=100_000)
    #: null: 1 / (number of multipliers), Optuna's rule
    mutation_prob: float | None = Field(default=None, ge=0.0, le=1.0)
    crossover: Literal["uniform", "blxalpha", "sbx", "vsbx", "undx", "spx"] = "uniform"
    crossover_prob: float = Field(default=0.9, ge=0.0, le=1.0)
    swapping_prob: float = Field(default=0.5, ge=0.0, le=1.0)


class PrunerSettings(Strict):
    """Settings of the pruners: ``median`` (Optuna's ``MedianPruner``) reads
    ``n_startup_trials`` and ``n_warmup_steps``, ``mcnemar`` (:mod:`._pruner`)
    ``n_startup_trials`` and ``p_threshold``."""

    n_startup_trials: int = Field(default=3, ge=0, le=MAX_TRIALS)
    n_warmup_steps: int = Field(default=0, ge=0, le=1_000_000)
    p_threshold: float = Field(default=0.05, gt=0.0, lt=1.0)
