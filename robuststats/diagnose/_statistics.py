"""Statistics of the probe: a pure function of the item outcomes (no torch).

The outcomes table has one row per (``target``, ``seed``, ``noise_seed``, ``item_id``) with
``correct`` (0/1); the clean evaluation is the target ``clean`` (noise seed 0), evaluated
once per training seed and shared by every target. For each target, with ``c`` the clean and
``z`` the noisy outcomes (means over noise seeds) as ``(n_seeds, n_items)`` matrices:

- **drop** = acc_clean − acc_noisy (first minus second), with the seed-random t interval and
  test (:func:`robuststats.stats.seed_random_test`: crossed seed × item variance with
  several training seeds; Tango's score interval and test with one seed of 0/1 outcomes; the
  paired t over items with one seed and several noise seeds);
- **relative degradation** = 1 − retention, from
  :func:`robuststats.stats.seed_random_retention` (delta method, log scale);
- **sensitivity** = relative degradation / scale (seed 004's score), with the interval
  divided by the scale;
- p-values adjusted within each level (Holm by default), and ranks by the drop.

Avalanche (windows): the interaction of a window W of layers l ∈ W is
``I = drop(W) − Σ_l drop(l)``, computed per seed and item on the same outcomes,
``I_si = (c − z_W)_si − Σ_l (c − z_l)_si``, so its variance is the paired one (the clean
outcomes and every single layer's outcomes are those of the same items and models). Its
interval is the crossed t of :func:`robuststats.stats.crossed_variance` (the paired t over
items with one seed); a window is flagged when the interaction is positive and its adjusted
p-value is below α (with no adjustment: when the interval excludes 0 upwards).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from robuststats.diagnose._targets import Target
from robuststats.errors import InputError
from robuststats.stats import (
    adjust_pvalues,
    crossed_variance,
    seed_random_retention,
    seed_random_test,
)

__all__ = [
    "AVALANCHE_COLUMNS",
    "CLEAN",
    "TARGET_COLUMNS",
    "avalanche_table",
    "interaction",
    "outcome_matrix",
    "target_table",
]

#: target id of the clean evaluation
CLEAN = "clean"

#: declared column order of the per-target table
TARGET_COLUMNS: tuple[str, ...] = (
    "level", "rank", "target", "label", "ops", "layers", "n_seeds", "n_noise_seeds", "n_items",
    "clean_accuracy", "noisy_accuracy", "estimate", "ci_low", "ci_high", "ci_level",
    "ci_method", "relative_degradation", "relative_degradation_ci_low",
    "relative_degradation_ci_high", "sensitivity", "sensitivity_ci_low",
    "sensitivity_ci_high", "scale", "test", "statistic", "dof", "pvalue", "pvalue_adjusted",
    "multiplicity", "significant", "seed004_label", "note",
)

#: declared column order of the avalanche table
AVALANCHE_COLUMNS: tuple[str, ...] = (
    "rank", "target", "label", "layers", "n_seeds", "n_items", "window_drop",
    "sum_single_drops", "estimate", "ci_low", "ci_high", "ci_level", "ci_method",
    "statistic", "dof", "pvalue", "pvalue_adjusted", "multiplicity", "avalanche",
    "seed004_label", "note",
)


def outcome_matrix(outcomes: pd.DataFrame, target: str, *, seeds: Sequence[int],
                   items: Sequence[str]) -> np.ndarray:
    """``(n_seeds, n_items)`` outcomes of ``target``: means over its noise seeds.

    Every (seed, item) must be present: a hole is an error naming the target, seed and item.
    """
    rows = outcomes[outcomes["target"] == target]
    if rows.empty:
        raise InputError(f"`outcomes` has no rows for target {target!r}.")
    table = rows.pivot_table(index="seed", columns="item_id", values="correct",
                             aggfunc="mean")
    missing_seeds = [s for s in seeds if s not in table.index]
    if missing_seeds:
        raise InputError(f"`outcomes`: target {target!r} lacks seed {missing_seeds[0]}.")
    table = table.reindex(index=list(seeds), columns=list(items))
    if table.isna().any().any():
        seed, item = table.stack(future_stack=True).loc[lambda s: s.isna()].index[0]
        raise InputError(f"`outcomes`: target {target!r} lacks item {item!r} at seed {seed}.")
    return table.to_numpy(dtype=float)


def _design(outcomes: pd.DataFrame) -> tuple[list[int], list[str]]:
    for col in ("target", "seed", "noise_seed", "item_id", "correct"):
        if col not in outcomes.columns:
            raise InputError(f"`outcomes` must have a column {col!r}; it has "
                             f"{list(outcomes.columns)}.")
    bad = ~outcomes["correct"].isin([0, 1])
    if bad.any():
        raise InputError(f"`outcomes`: column 'correct' must be 0 or 1, got "
                         f"{outcomes['correct'][bad].iloc[0]!r}.")
    clean = outcomes[outcomes["target"] == CLEAN]
    if clean.empty:
        raise InputError(f"`outcomes` has no clean rows (target {CLEAN!r}).")
    seeds = sorted(int(s) for s in clean["seed"].unique())
    items = sorted(str(i) for i in clean["item_id"].unique())
    if len(items) < 2:
        raise InputError(f"at least 2 items are needed, got {len(items)}.")
    return seeds, items


def _quietly(func, *args, **kwargs):
    """Call ``func``; a warning (no spread, undefined retention) becomes a note."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = func(*args, **kwargs)
    notes = sorted({str(w.message).split(";")[0] for w in caught})
    return result, "; ".join(notes)


def _layers_text(target: Target) -> str:
    return "all" if target.layers is None else ",".join(map(str, target.layers))


def target_table(outcomes: pd.DataFrame, targets: Sequence[Target], *, scale: float,
                 confidence_level: float = 0.95, multiplicity: str = "holm",
                 labels: bool = False, critical_label: float = 3.0,
                 avalanche_label: float = 0.15) -> pd.DataFrame:
    """One row per target: drop, relative degradation, sensitivity, test, rank.

    ``targets`` are those evaluated (rows for each in ``outcomes``). Adjusted p-values and
    ranks are computed within each level. ``labels`` adds seed 004's fixed thresholds as
    text in ``seed004_label`` (sensitivity > ``critical_label``: critical; a window's
    relative degradation > ``avalanche_label``: avalanche point); they decide nothing.
    """
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise InputError(f"`scale` must be a positive number, got {scale!r}.")
    seeds, items = _design(outcomes)
    clean = outcome_matrix(outcomes, CLEAN, seeds=seeds, items=items)
    rows = []
    for t in targets:
        noisy = outcome_matrix(outcomes, t.target_id, seeds=seeds, items=items)
        n_ns = int(outcomes.loc[outcomes["target"] == t.target_id, "noise_seed"].nunique())
        drop, note_d = _quietly(seed_random_test, clean, noisy,
                                confidence_level=confidence_level)
        ret, note_r = _quietly(seed_random_retention, clean, noisy,
                               confidence_level=confidence_level)
        rd = 1.0 - ret.estimate
        rd_low, rd_high = 1.0 - ret.confidence_interval.high, 1.0 - ret.confidence_interval.low
        ci = drop.confidence_interval
        rows.append({
            "level": t.level, "target": t.target_id, "label": t.label, "ops": t.ops,
            "layers": _layers_text(t), "n_seeds": len(seeds), "n_noise_seeds": n_ns,
            "n_items": len(items), "clean_accuracy": float(clean.mean()),
            "noisy_accuracy": float(noisy.mean()), "estimate": drop.estimate,
            "ci_low": ci.low, "ci_high": ci.high, "ci_level": confidence_level,
            "ci_method": drop.method, "relative_degradation": rd,
            "relative_degradation_ci_low": rd_low, "relative_degradation_ci_high": rd_high,
            "sensitivity": rd / scale, "sensitivity_ci_low": rd_low / scale,
            "sensitivity_ci_high": rd_high / scale, "scale": float(scale),
            "test": drop.method, "statistic": drop.statistic, "dof": drop.dof,
            "pvalue": drop.pvalue,
            "note": "; ".join(n for n in (note_d, note_r) if n),
        })
    table = pd.DataFrame(rows, columns=[c for c in TARGET_COLUMNS
                                        if c not in ("rank", "pvalue_adjusted", "multiplicity",
                                                     "significant", "seed004_label")])
    table = _adjust_and_rank(table, multiplicity, 1.0 - confidence_level, by="estimate")
    table["significant"] = table["pvalue_adjusted"] < 1.0 - confidence_level
    table["seed004_label"] = [_label(r, labels, critical_label, avalanche_label)
                              for r in table.itertuples()]
    return table[list(TARGET_COLUMNS)]


def _label(row: Any, on: bool, critical: float, avalanche: float) -> str:
    if not on:
        return ""
    out = []
    s = row.sensitivity
    if math.isfinite(s) and s > critical:
        out.append(f"critical (sensitivity {s:.2f} > {critical:g})")
    rd = row.relative_degradation
    if row.level == "window" and math.isfinite(rd) and rd > avalanche:
        out.append(f"avalanche point (degradation {rd:.1%} > {avalanche:.0%})")
    return "; ".join(out)


def _adjust_and_rank(table: pd.DataFrame, multiplicity: str, alpha: float, *,
                     by: str, group: str | None = "level") -> pd.DataFrame:
    table = table.copy()
    table["pvalue_adjusted"] = np.nan
    table["multiplicity"] = multiplicity
    table["rank"] = 0
    groups = table.groupby(group, sort=False).groups if group else {None: table.index}
    for _, index in groups.items():
        p = table.loc[index, "pvalue"].to_numpy(dtype=float)
        table.loc[index, "pvalue_adjusted"] = adjust_pvalues(p, method=multiplicity,
                                                             alpha=alpha)
        order = table.loc[index].sort_values([by, "pvalue"], ascending=[False, True],
                                             kind="stable").index
        table.loc[order, "rank"] = np.arange(1, len(order) + 1)
    table["rank"] = table["rank"].astype(int)
    key = [group, "rank"] if group else ["rank"]
    return table.sort_values(key, kind="stable").reset_index(drop=True)


def interaction(clean: np.ndarray, window: np.ndarray, singles: Sequence[np.ndarray], *,
                confidence_level: float = 0.95) -> dict[str, float | str]:
    """Interaction ``drop(W) − Σ drop(l)`` of a window with its t interval and test.

    ``clean``, ``window`` and each of ``singles`` are aligned ``(n_seeds, n_items)``
    outcomes (0/1, or means over noise seeds) of the same models and items. The linear
    statistic ``(c − z_W) − Σ_l (c − z_l)`` per seed and item gets the crossed seed × item
    variance (:func:`robuststats.stats.crossed_variance`, Satterthwaite df; with one seed the
    paired t over items). With no spread at all
    the interval is the estimate ± ``(k_W + 1)·z²/(n + z²)``, the score-type bound the
    package uses for a paired difference without discordance, scaled to the range of the
    statistic.
    """
    if not 0 < confidence_level < 1:
        raise InputError(f"`confidence_level` must be in (0, 1), got {confidence_level!r}.")
    arrays = [np.asarray(a, dtype=float) for a in (clean, window, *singles)]
    arrays = [a[None, :] if a.ndim == 1 else a for a in arrays]
    shape = arrays[0].shape
    if any(a.shape != shape for a in arrays) or len(shape) != 2:
        raise InputError(f"`clean`, `window` and `singles` must share one (n_seeds, n_items) "
                         f"shape, got {[a.shape for a in arrays]}.")
    if not singles:
        raise InputError("`singles` must hold the outcomes of at least one layer.")
    c, zw, zs = arrays[0], arrays[1], arrays[2:]
    values = (c - zw) - sum(c - z for z in zs)
    k, n = values.shape
    estimate = float(values.mean())
    cv = crossed_variance(values)
    # no floor at MS_item/(kn): with the seed-level df it made the test far too conservative
    # (0 of 400 additive windows rejected at a nominal 5 %, 3 seeds × 200 items)
    variance = cv.variance
    level = float(confidence_level)
    if variance > 0:
        se, dof = math.sqrt(variance), cv.dof
        t = estimate / se
        # the reference calibrated for few seeds (robuststats/stats/_few_seeds.py)
        pvalue = cv.reference.pvalue(t)
        half = cv.reference.critical(level) * se
        method = ("crossed seed × item t (calibrated Satterthwaite df)" if k > 1
                  else "paired t over items")
        note = ""
    else:
        z = float(sps.norm.ppf(0.5 + level / 2.0))
        half = (len(zs) + 1) * z * z / (n + z * z)
        se, dof, t = 0.0, math.inf, 0.0
        pvalue = 1.0 if estimate == 0 else float(2.0 * sps.norm.sf(z * abs(estimate) / half))
        method = "score-type bound (no spread)"
        note = "no spread: every seed and item has the same interaction"
    return {"n_seeds": k, "n_items": n, "window_drop": float((c - zw).mean()),
            "sum_single_drops": float(sum((c - z).mean() for z in zs)),
            "estimate": estimate, "ci_low": estimate - half, "ci_high": estimate + half,
            "ci_level": level, "ci_method": method, "statistic": t, "dof": dof,
            "pvalue": min(1.0, pvalue), "note": note}


def avalanche_table(outcomes: pd.DataFrame, windows: Sequence[Target], *,
                    confidence_level: float = 0.95, multiplicity: str = "holm",
                    labels: bool = False, avalanche_label: float = 0.15) -> pd.DataFrame:
    """One row per window: its drop, the sum of its layers' drops, the interaction.

    Needs the outcomes of every window and of every single layer it covers (targets
    ``layer:<i>``). ``avalanche`` is True when the interaction is positive and its adjusted
    p-value is below ``1 − confidence_level``; ranks follow the interaction.
    """
    seeds, items = _design(outcomes)
    clean = outcome_matrix(outcomes, CLEAN, seeds=seeds, items=items)
    rows = []
    for w in windows:
        if not w.layers:
            raise InputError(f"`windows`: target {w.target_id!r} names no layers.")
        zw = outcome_matrix(outcomes, w.target_id, seeds=seeds, items=items)
        singles = [outcome_matrix(outcomes, f"layer:{i}", seeds=seeds, items=items)
                   for i in w.layers]
        res = interaction(clean, zw, singles, confidence_level=confidence_level)
        rel = res["window_drop"] / float(clean.mean()) if clean.mean() > 0 else math.nan
        label = ""
        if labels and math.isfinite(rel) and rel > avalanche_label:
            label = f"avalanche point (degradation {rel:.1%} > {avalanche_label:.0%})"
        rows.append({"target": w.target_id, "label": w.label, "layers": _layers_text(w),
                     **res, "seed004_label": label})
    cols = [c for c in AVALANCHE_COLUMNS
            if c not in ("rank", "pvalue_adjusted", "multiplicity", "avalanche")]
    table = pd.DataFrame(rows, columns=cols)
    alpha = 1.0 - confidence_level
    table = _adjust_and_rank(table, multiplicity, alpha, by="estimate", group=None)
    table["avalanche"] = (table["estimate"] > 0) & (table["pvalue_adjusted"] < alpha)
    return table[list(AVALANCHE_COLUMNS)]
