"""Accuracy per condition and noise level, per-seed values, and retention.

With several training seeds the intervals treat seeds and items as random (the seed-random
t of :mod:`robuststats.stats._seed_random`): accuracy and retention are properties of a
training procedure. With one seed they are item bootstraps (BCa).

A retention whose clean accuracy cannot be told from 0 (Fieller's ``g ≥ 1``,
:func:`robuststats.stats.retention_estimability`) has no estimate: its row keeps the clean
and noisy accuracy, leaves retention and interval empty and gives the reason in
``ci_method``; so does a seed's retention in the ``seeds`` table, judged on that seed's
items.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from robuststats.analysis._common import quiet_degenerate, rng_for, squeeze
from robuststats.analysis._options import AnalysisOptions
from robuststats.outcomes import align, align_series


def _levels(out: pd.DataFrame) -> list[tuple[str, float]]:
    pairs = out[["condition", "eval_noise"]].drop_duplicates()
    return [(str(c), float(lv)) for c, lv in pairs.itertuples(index=False, name=None)]


def summary_tables(out: pd.DataFrame, opts: AnalysisOptions) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``summary`` table (accuracy with its interval) and the per-seed ``seeds`` table."""
    from robuststats import stats

    rows, seed_rows = [], []
    estimable: dict[tuple[str, int], bool] = {}  # a seed's clean accuracy carries a ratio
    for cond, level in _levels(out):
        aligned = align(out, [cond], level, by="seed")
        x = aligned.values[cond]
        per_seed = x.mean(axis=1)
        if level == 0.0:
            for s, row in zip(aligned.rows, x):
                estimable[(cond, int(s))] = stats.retention_estimability(
                    row, confidence_level=opts.confidence_level).estimable
        with quiet_degenerate():
            if x.shape[0] > 1:  # a procedure's accuracy: seeds and items random
                res = stats.seed_random_accuracy(x, confidence_level=opts.confidence_level)
            else:
                res = stats.bootstrap_accuracy(
                    squeeze(x), confidence_level=opts.confidence_level,
                    n_resamples=opts.n_resamples, rng=rng_for(opts, "acc", cond, level))
        at = out[(out["condition"] == cond) & (out["eval_noise"] == level)]
        ci, cut = stats.clip_interval(res.confidence_interval, "accuracy")
        cut = cut or bool(getattr(res, "clipped", False))  # cut already by the interval
        rows.append({
            "condition": cond, "eval_noise": level, "n_seeds": len(aligned.rows),
            "n_noise_seeds": int(at["noise_seed"].nunique()), "n_items": x.shape[1],
            "accuracy": float(x.mean()), "ci_low": float(ci.low), "ci_high": float(ci.high),
            "ci_level": float(opts.confidence_level),
            "ci_method": res.method + (", cut to [0, 1]" if cut else ""),
            "seed_sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else np.nan,
            "seed_min": float(per_seed.min()), "seed_max": float(per_seed.max()),
        })
        seed_rows += [{"condition": cond, "seed": int(s), "eval_noise": level,
                       "accuracy": float(a)} for s, a in zip(aligned.rows, per_seed)]
    seeds = pd.DataFrame(seed_rows, columns=["condition", "seed", "eval_noise", "accuracy"])
    clean = seeds[seeds["eval_noise"] == 0.0].set_index(["condition", "seed"])["accuracy"]
    base = [clean.get((c, s), np.nan) if estimable.get((c, s), True) else np.nan
            for c, s in zip(seeds["condition"], seeds["seed"])]
    with np.errstate(divide="ignore", invalid="ignore"):
        seeds["retention"] = seeds["accuracy"].to_numpy() / np.asarray(base, float)
    seeds = seeds.sort_values(["condition", "eval_noise", "seed"]).reset_index(drop=True)
    return pd.DataFrame(rows), seeds


def _finite_sd(values: pd.Series) -> float:
    """SD over seeds (missing values skipped); NaN when fewer than 2 remain or one is
    infinite (a seed without a correct clean item has no retention, so neither has the
    spread)."""
    arr = values.to_numpy(dtype=float)
    arr = arr[~np.isnan(arr)]
    if arr.size < 2 or not np.all(np.isfinite(arr)):
        return float("nan")
    return float(np.std(arr, ddof=1))


def retention_table(out: pd.DataFrame, seeds: pd.DataFrame, opts: AnalysisOptions,
                    drops: list[pd.DataFrame]) -> pd.DataFrame:
    """Retention (noisy / clean accuracy on the same seeds and items) with its interval."""
    from robuststats import stats

    rows = []
    for cond in dict.fromkeys(out["condition"]):
        levels = sorted(float(v) for v in out.loc[out["condition"] == cond, "eval_noise"]
                        .unique())
        if 0.0 not in levels:
            continue
        for level in (lv for lv in levels if lv > 0):
            aligned = align_series(out, [(cond, 0.0), (cond, level)], by="seed", holes="drop")
            drops.append(aligned.dropped)
            clean, noisy = aligned.values[(cond, 0.0)], aligned.values[(cond, level)]
            per_seed = seeds[(seeds["condition"] == cond) & (seeds["eval_noise"] == level)
                             & seeds["seed"].isin(aligned.rows)]["retention"]
            row = {"condition": cond, "eval_noise": level, "n_seeds": len(aligned.rows),
                   "n_items": clean.shape[1], "clean_accuracy": float(clean.mean()),
                   "noisy_accuracy": float(noisy.mean())}
            verdict = stats.retention_estimability(clean,
                                                   confidence_level=opts.confidence_level)
            if not verdict.estimable:
                rows.append({**row, "retention": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                             "ci_level": float(opts.confidence_level),
                             "ci_method": f"none, not estimable: {verdict.reason}",
                             "seed_sd": np.nan})
                continue
            with quiet_degenerate():
                if clean.shape[0] > 1:  # seeds and items random (delta method, log scale)
                    res = stats.seed_random_retention(
                        clean, noisy, confidence_level=opts.confidence_level)
                else:
                    res = stats.bootstrap_retention(
                        squeeze(clean), squeeze(noisy),
                        confidence_level=opts.confidence_level,
                        n_resamples=opts.n_resamples, rng=rng_for(opts, "ret", cond, level))
            rows.append({
                **row, "retention": float(res.estimate),
                "ci_low": float(res.confidence_interval.low),
                "ci_high": float(res.confidence_interval.high),
                "ci_level": float(opts.confidence_level),
                "ci_method": res.method + (", cut to [0, inf)"
                                           if getattr(res, "clipped", False) else ""),
                "seed_sd": _finite_sd(per_seed),
            })
    return pd.DataFrame(rows)
