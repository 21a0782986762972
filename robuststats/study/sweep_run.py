"""Running a sweep: the adaptive refinement rounds and the dose-response tables.

:func:`refine` runs after the grid's cells: for each round it fits every condition's curve
to the cells finished so far, adds the levels :func:`~robuststats.config.sweep.adaptive_levels`
places around its threshold (for every training seed and noise seed), and runs them with
the study's executor and run directory. The levels are a deterministic function of the
stored outcomes (rounded to 3 significant digits), so a resumed run recomputes the same
levels and reuses every finished cell.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import pandas as pd

from robuststats.config.sweep import adaptive_levels
from robuststats.errors import InputError
from robuststats.runs.plan import Cell
from robuststats.runs.spec import StudySpec
from robuststats.stats import DegenerateDataWarning

__all__ = ["dose_options", "dose_tables", "point_threshold", "refine"]


def dose_options(spec: StudySpec) -> Any:
    """The :class:`~robuststats.analysis._dose.DoseOptions` of a study's ``sweep``."""
    from robuststats.analysis import DoseOptions

    sweep = spec.sweep
    assert sweep is not None
    return DoseOptions(model=sweep.model, drop=sweep.drop, fixed=dict(sweep.fixed),
                       interval=sweep.interval, compare=tuple(sweep.compare),
                       confidence_level=spec.analysis.confidence_level,
                       n_resamples=spec.analysis.n_resamples, rng_seed=spec.analysis.rng_seed)


def dose_tables(outcomes: pd.DataFrame, spec: StudySpec) -> dict[str, pd.DataFrame]:
    """The dose-response tables of a sweep's outcomes (:mod:`robuststats.analysis._dose`)."""
    from robuststats.analysis import dose_response_tables

    return dose_response_tables(outcomes, dose_options(spec))


def point_threshold(outcomes: pd.DataFrame, condition: str, spec: StudySpec) -> float:
    """The fitted threshold of ``condition`` (no interval); NaN when it cannot be fitted."""
    from robuststats.analysis import condition_arrays
    from robuststats.stats import critical_threshold

    sweep = spec.sweep
    assert sweep is not None
    if outcomes.empty or condition not in set(outcomes["condition"]):
        return math.nan
    levels, arr, _, _ = condition_arrays(outcomes, condition)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            return critical_threshold(levels, arr, drop=sweep.drop, model=sweep.model,
                                      fixed=dict(sweep.fixed) or None,
                                      interval="delta").estimate
    except InputError:
        return math.nan


def refine(spec: StudySpec, ledger: Any, cells: list[Cell], items: list[str], *,
           workers: int, execute: Any) -> tuple[list[Cell], list[Any], set[Cell]]:
    """Run the adaptive rounds of ``spec.sweep``; returns all cells (grid and added), the
    execution reports of the rounds and the added cells that were already finished."""
    sweep = spec.sweep
    assert sweep is not None and sweep.adaptive is not None
    reports: list[Any] = []
    reused: set[Cell] = set()
    for r in range(sweep.adaptive.rounds):
        outcomes = ledger.outcomes(cells, items=items)
        added: list[Cell] = []
        for condition in spec.conditions:
            have = sorted({c.eval_noise for c in cells if c.condition == condition})
            threshold = point_threshold(outcomes, condition, spec)
            for level in adaptive_levels(threshold, have, sweep.adaptive, r):
                for seed in spec.seed_list():
                    for ns in spec.evaluation.draws(level, spec.eval_kind(condition)):
                        added.append(Cell(condition, seed, level, int(ns)))
        if not added:
            break
        cells = [*cells, *added]
        done = ledger.finished(added, items=items)
        reused |= done
        pending = [c for c in added if c not in done]
        reports.append(execute(ledger, spec, pending, workers=workers, progress=None))
    return cells, reports, reused
