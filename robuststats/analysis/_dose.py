"""Dose-response tables of a noise sweep: fits, model ranks and critical thresholds.

For each condition, the item outcomes at every noise level (``eval_noise``, the dose) are
averaged over noise seeds into a ``(n_levels, n_seeds, n_items)`` array on the items and
seeds present at every level; :func:`robuststats.stats.critical_threshold` fits the curve
(binomial maximum likelihood on the accuracy of each level) and gives the scale at which
accuracy falls by ``drop`` of the clean accuracy, with its interval. Pure pandas/numpy, so
``robuststats analyze`` can recompute it from stored outcomes.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from robuststats.glossary import ordered, table_names
from robuststats.stats import DegenerateDataWarning

__all__ = ["DoseOptions", "condition_arrays", "dose_response_tables"]

#: file stems of the dose-response tables, in the glossary's file order
DOSE_TABLES = table_names("dose")
#: points of the fitted curve per condition in ``dose_curves`` (log-spaced)
CURVE_POINTS = 60


@dataclass(frozen=True)
class DoseOptions:
    """What :func:`dose_response_tables` fits (``sweep`` of a study file)."""

    model: str = "auto"
    drop: float = 0.10
    fixed: Mapping[str, float] = field(default_factory=dict)
    interval: str = "seed-random"
    compare: Sequence[str] = ("LL.4", "LL.3", "LL.5", "W1.4", "W2.4")
    confidence_level: float = 0.95
    n_resamples: int = 1000
    rng_seed: int = 0


def condition_arrays(outcomes: pd.DataFrame, condition: str
                     ) -> tuple[np.ndarray, np.ndarray, list[Any], list[Any]]:
    """``(levels, array (n_levels, n_seeds, n_items), seeds, items)`` of one condition.

    Outcomes are averaged over noise seeds; only the seeds and items present at every level
    are kept (the paired design the bootstrap resamples).
    """
    df = outcomes[outcomes["condition"] == condition]
    mean = df.groupby(["eval_noise", "seed", "item_id"], sort=True)["correct"].mean()
    levels = sorted(df["eval_noise"].unique())
    cube = mean.unstack("item_id")  # rows (eval_noise, seed), columns items
    cube = cube.dropna(axis=1, how="any")
    seeds = sorted(df["seed"].unique())
    cube = cube.reindex(pd.MultiIndex.from_product([levels, seeds])).dropna(axis=0)
    kept_seeds = [s for s in seeds if all((lv, s) in cube.index for lv in levels)]
    cube = cube.loc[[(lv, s) for lv in levels for s in kept_seeds]]
    arr = cube.to_numpy(dtype=float).reshape(len(levels), len(kept_seeds), -1)
    return np.asarray(levels, dtype=float), arr, kept_seeds, list(cube.columns)


def dose_response_tables(outcomes: pd.DataFrame, options: DoseOptions | None = None
                         ) -> dict[str, pd.DataFrame]:
    """``thresholds``, ``dose_fits`` and ``dose_models`` for every condition of ``outcomes``.

    A condition whose curve cannot be fitted (fewer than two noisy levels, or a fit that
    fails) gets a threshold row with the reason in ``note`` and no fit rows.
    """
    from robuststats.errors import InputError
    from robuststats.stats import critical_threshold, select_dose_response

    opts = options or DoseOptions()
    rng = np.random.default_rng(opts.rng_seed)
    thresholds, fits, models, curves = [], [], [], []
    for condition in sorted(outcomes["condition"].unique()):
        levels, arr, seeds, items = condition_arrays(outcomes, condition)
        base = {"condition": condition, "model": opts.model, "drop": opts.drop,
                "n_levels": int(levels.size), "n_seeds": len(seeds), "n_items": len(items)}
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", DegenerateDataWarning)
                res = critical_threshold(levels, arr, drop=opts.drop, model=opts.model,
                                         fixed=dict(opts.fixed) or None,
                                         interval=opts.interval,
                                         confidence_level=opts.confidence_level,
                                         n_resamples=opts.n_resamples, rng=rng)
        except InputError as exc:
            thresholds.append({**base, "note": str(exc)})
            continue
        notes = sorted({str(w.message) for w in caught
                        if issubclass(w.category, DegenerateDataWarning)})
        thresholds.append({
            **base, "model": res.model, "fitted_clean_accuracy": res.clean_accuracy,
            "estimate": res.estimate,
            "ci_low": res.confidence_interval.low, "ci_high": res.confidence_interval.high,
            "ci_level": res.confidence_level, "ci_method": res.method,
            "n_not_reached": res.n_not_reached, "note": "; ".join(notes)})
        frame = res.fit.to_frame().rename(columns={"standard_error": "se_parameter"})
        fits.append(frame.assign(condition=condition, model=res.fit.model,
                                 loglik=res.fit.loglik, aic=res.fit.aic))
        positive = levels[levels > 0]
        grid = np.concatenate([[0.0], np.geomspace(positive.min(), positive.max(),
                                                   CURVE_POINTS)])
        method = ("bootstrap percentile of refitted curves" if res.n_resamples
                  else "delta (normal), items independent")
        curves.append(res.band(grid).rename(columns={"dose": "eval_noise"}).assign(
            condition=condition, ci_level=res.confidence_level, ci_method=method))
        acc = arr.mean(axis=(1, 2))
        total = np.full(levels.size, float(arr.shape[1] * arr.shape[2]))
        table = select_dose_response(levels, acc, models=list(opts.compare), weights=total,
                                     type="binomial", fixed=dict(opts.fixed) or None)
        models.append(table.assign(condition=condition))

    def joined(frames: list[pd.DataFrame], name: str) -> pd.DataFrame:
        return ordered(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(),
                       name)

    return {
        "thresholds": ordered(pd.DataFrame(thresholds), "thresholds"),
        "dose_fits": joined(fits, "dose_fits"),
        "dose_models": joined(models, "dose_models"),
        "dose_curves": joined(curves, "dose_curves"),
    }
