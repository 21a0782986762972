"""Tables of a divergence: per module with intervals over items, through depth, the growth
fit, the layers beyond a MAPE bound and their order by sensitivity. Pure pandas/numpy
functions of the per-item table, so they can be recomputed from a stored result.

Accumulation through depth (``docs/divergence.md``). For item i and decoder layer l, let
``E_l = ‖Δ_l‖`` be the accumulated error of the residual stream after layer l (candidate run
minus reference run), ``δ_l`` the local error that layer l adds on the reference's own input,
and ``r_l = ‖a_l‖`` the reference's norm. Through an identity residual path, errors would
add: ``additive_l = Σ_{k≤l} δ_k / r_l``; independent errors add in quadrature:
``quadrature_l = √(Σ δ_k²) / r_l``; seed 004's rule adds relative errors,
``seed004_l = Σ δ_k / r_k``, and compounding multiplies them, ``∏ (1 + δ_k / r_k) − 1``.
``amplification_l = (E_l / r_l) / additive_l`` > 1 means later layers amplify earlier
errors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from robuststats.divergence._fit import Accumulation, GrowthFit, LayerGrowth
from robuststats.divergence._metrics import METRICS, RunningStats
from robuststats.divergence._sites import RESIDUAL

__all__ = ["depth_table", "exceeding_table", "growth_fit", "mean_interval", "module_table"]


def mean_interval(values: np.ndarray, *, confidence_level: float, interval: str = "t",
                  n_resamples: int = 2000, rng: Any = 0) -> tuple[float, float, float]:
    """(mean, low, high) over items; ``t`` or percentile ``bootstrap``; NaN bounds below 2
    finite values."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(v.mean())
    if v.size < 2:
        return mean, math.nan, math.nan
    if interval == "bootstrap":
        gen = np.random.default_rng(rng)
        idx = gen.integers(0, v.size, size=(n_resamples, v.size))
        means = v[idx].mean(axis=1)
        alpha = 1 - confidence_level
        return mean, float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))
    acc = RunningStats()
    acc.update_many(v)
    low, high = acc.t_interval(confidence_level)
    return mean, low, high


def _interval(acc: RunningStats | None, values: np.ndarray, *, confidence_level: float,
              interval: str, n_resamples: int, rng: Any) -> tuple[float, float, float]:
    if interval == "t" and acc is not None:
        low, high = acc.t_interval(confidence_level)
        return (acc.mean if acc.n else math.nan), low, high
    return mean_interval(values, confidence_level=confidence_level, interval=interval,
                         n_resamples=n_resamples, rng=rng)


def _method(interval: str) -> str:
    return "t over items" if interval == "t" else "percentile bootstrap over items"


def module_table(items: pd.DataFrame, running: Mapping[tuple[str, str, str], RunningStats]
                 | None = None, *, order: Mapping[str, int] | None = None,
                 confidence_level: float = 0.95, interval: str = "t", n_resamples: int = 2000,
                 rng: int = 0, metrics: tuple[str, ...] = METRICS) -> pd.DataFrame:
    """Per (mode, site): the mean of each metric over items with its interval.

    With ``running`` (the Welford accumulators of :func:`compare_runs`) the t interval
    comes from them; otherwise it is computed from ``items``. ``metrics``: the columns of
    ``items`` summarised (the statistics of an msprobe dump have their own).
    """
    running = running or {}
    out = []
    for q, ((mode, site), g) in enumerate(items.groupby(["mode", "site"], sort=False)):
        row: dict[str, Any] = {"mode": mode, "site": site, "layer": int(g["layer"].iloc[0]),
                               "module_type": g["module_type"].iloc[0], "n_items": len(g)}
        for j, metric in enumerate(metrics):
            mean, low, high = _interval(
                running.get((mode, site, metric)), g[metric].to_numpy(),
                confidence_level=confidence_level, interval=interval,
                n_resamples=n_resamples, rng=[rng, q, j])
            row.update({metric: mean, f"{metric}_ci_low": low, f"{metric}_ci_high": high})
        row["n_infinite_mape"] = int((~np.isfinite(g["mape"].to_numpy(float))).sum()) \
            if "mape" in metrics else 0
        out.append(row)
    columns = _MODULE_COLUMNS if metrics == METRICS else [
        *_MODULE_COLUMNS[:5], *[c for m in metrics for c in (m, f"{m}_ci_low", f"{m}_ci_high")],
        "n_infinite_mape"]
    table = pd.DataFrame(out, columns=columns)
    table["ci_level"] = confidence_level
    table["ci_method"] = _method(interval)
    if order:
        table["_o"] = [order.get(s, len(order)) for s in table["site"]]
        table = table.sort_values(["mode", "_o"], kind="stable").drop(columns="_o")
    return table.reset_index(drop=True)


_MODULE_COLUMNS = ["mode", "site", "layer", "module_type", "n_items",
                   *[c for m in METRICS for c in (m, f"{m}_ci_low", f"{m}_ci_high")],
                   "n_infinite_mape"]


def _residual_arrays(items: pd.DataFrame, mode: str, column: str) -> pd.DataFrame:
    """(item × layer) matrix of ``column`` for the residual sites of ``mode``."""
    r = items[(items["module_type"] == RESIDUAL) & (items["mode"] == mode)]
    return r.pivot_table(index="item_id", columns="layer", values=column, aggfunc="first",
                         sort=True)


def _predictions(items: pd.DataFrame) -> dict[str, pd.DataFrame] | None:
    acc = _residual_arrays(items, "accumulated", "err_norm")
    loc = _residual_arrays(items, "local", "err_norm")
    ref = _residual_arrays(items, "accumulated", "ref_norm")
    if acc.empty or loc.empty:
        return None
    loc = loc.reindex(index=acc.index, columns=acc.columns)
    ref = ref.reindex(index=acc.index, columns=acc.columns)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_local = loc / ref
        additive = loc.cumsum(axis=1) / ref
        quadrature = np.sqrt((loc ** 2).cumsum(axis=1)) / ref
        seed004 = rel_local.cumsum(axis=1)
        compounding = (1 + rel_local).cumprod(axis=1) - 1
        measured = acc / ref
        amplification = measured / additive
        vs_quadrature = measured / quadrature
    return {"measured": measured, "local": rel_local, "additive": additive,
            "quadrature": quadrature, "seed004": seed004, "compounding": compounding,
            "amplification": amplification, "vs_quadrature": vs_quadrature}


def depth_table(items: pd.DataFrame, *, confidence_level: float = 0.95, interval: str = "t",
                n_resamples: int = 2000, rng: int = 0) -> pd.DataFrame:
    """Per decoder layer: the residual stream's accumulated divergence (rel RMS, MAPE,
    cosine, with intervals), its local divergence, and the predictions of the module
    docstring with the amplification ratio's interval."""
    rows = []
    pred = _predictions(items)
    res = items[items["module_type"] == RESIDUAL]
    for q, (layer, g) in enumerate(res.groupby("layer", sort=True)):
        acc = g[g["mode"] == "accumulated"]
        row: dict[str, Any] = {"layer": int(layer), "site": g["site"].iloc[0],
                               "n_items": int(acc["item_id"].nunique())}
        for j, (name, frame, col) in enumerate((
                ("rel_rms", acc, "rel_rms"), ("mape", acc, "mape"),
                ("cosine", acc, "cosine"), ("local_rel_rms", g[g["mode"] == "local"],
                                            "rel_rms"))):
            mean, low, high = mean_interval(
                frame[col].to_numpy(), confidence_level=confidence_level, interval=interval,
                n_resamples=n_resamples, rng=[rng, q, j])
            row.update({name: mean, f"{name}_ci_low": low, f"{name}_ci_high": high})
        for key in ("additive", "quadrature", "seed004", "compounding"):
            row[key] = float(np.nanmean(pred[key][layer])) if pred is not None else math.nan
        if pred is not None:
            mean, low, high = mean_interval(
                pred["amplification"][layer].to_numpy(), confidence_level=confidence_level,
                interval=interval, n_resamples=n_resamples, rng=[rng, q, 9])
        else:
            mean = low = high = math.nan
        row.update(amplification=mean, amplification_ci_low=low, amplification_ci_high=high)
        rows.append(row)
    table = pd.DataFrame(rows, columns=_DEPTH_COLUMNS)
    table["ci_level"] = confidence_level
    table["ci_method"] = _method(interval)
    return table


_DEPTH_COLUMNS = ["layer", "site", "n_items",
                  *[c for m in ("rel_rms", "mape", "cosine", "local_rel_rms")
                    for c in (m, f"{m}_ci_low", f"{m}_ci_high")],
                  "additive", "quadrature", "seed004", "compounding", "amplification",
                  "amplification_ci_low", "amplification_ci_high"]


def _slopes(measured: pd.DataFrame) -> np.ndarray:
    """Per item: OLS slope of log(rel RMS) on the layer index (layers with rel RMS > 0)."""
    out = []
    x_all = measured.columns.to_numpy(dtype=float)
    for _, y in measured.iterrows():
        y = y.to_numpy(dtype=float)
        ok = np.isfinite(y) & (y > 0)
        if ok.sum() < 2:
            continue
        x, ly = x_all[ok], np.log(y[ok])
        xc = x - x.mean()
        out.append(float((xc * (ly - ly.mean())).sum() / (xc * xc).sum()))
    return np.asarray(out)


def growth_fit(items: pd.DataFrame, *, confidence_level: float = 0.95, n_layers: int = 0
               ) -> GrowthFit:
    """Per-layer growth of the residual stream's divergence and the accumulation verdict.

    ``slope``: the mean over items of each item's OLS slope of log(rel RMS) on the layer
    index, with a t interval over items (items are the independent units; the layers of one
    item are not); ``growth_per_layer`` = exp(slope) − 1. At the last layer: the measured
    rel RMS, the predictions, and ``amplification`` (measured / additive) and
    ``vs_quadrature`` with t intervals, which decide the ``verdict``: ``amplifying`` (the
    interval of amplification above 1), ``additive`` (it contains 1), ``sub-additive``
    (below 1, measured above quadrature), ``independent`` (consistent with quadrature),
    ``damped`` (below quadrature).
    """
    notes: list[str] = []
    measured = _residual_arrays(items, "accumulated", "rel_rms")
    if measured.shape[1] < 2:
        notes.append("growth fit: fewer than 2 decoder layers compared")
        return GrowthFit(n_layers, confidence_level, math.nan, math.nan, math.nan,
                         notes=tuple(notes))
    slopes = _slopes(measured)
    if slopes.size == 0:
        notes.append("growth fit: no item diverges in two or more layers (identical runs?)")
    elif slopes.size < measured.shape[0]:
        notes.append(f"growth fit: {measured.shape[0] - slopes.size} item(s) without "
                     "divergence in two or more layers left out")
    slope, low, high = mean_interval(slopes, confidence_level=confidence_level)
    last = measured.columns[-1]
    first = measured.columns[0]
    m_last, lo, hi = mean_interval(measured[last].to_numpy(), confidence_level=confidence_level)
    growth = LayerGrowth(
        n_items_fit=int(slopes.size), growth_per_layer=_growth(slope),
        growth_per_layer_ci_low=_growth(low), growth_per_layer_ci_high=_growth(high),
        first_layer=int(first), last_layer=int(last),
        first_rel_rms=float(np.nanmean(measured[first])), last_rel_rms=m_last,
        last_rel_rms_ci_low=lo, last_rel_rms_ci_high=hi)
    pred = _predictions(items)
    accumulation, verdict = None, None
    if pred is not None:
        at_last = {f"{key}_last": float(np.nanmean(pred[key][last]))
                   for key in ("local", "additive", "quadrature", "seed004", "compounding")}
        mean_local = float(np.nanmean(pred["local"].to_numpy()))
        amp = mean_interval(pred["amplification"][last].to_numpy(),
                            confidence_level=confidence_level)
        vq = mean_interval(pred["vs_quadrature"][last].to_numpy(),
                           confidence_level=confidence_level)
        accumulation = Accumulation(
            **at_last, mean_local_per_layer=mean_local, amplification=amp[0],
            amplification_ci_low=amp[1], amplification_ci_high=amp[2], vs_quadrature=vq[0],
            vs_quadrature_ci_low=vq[1], vs_quadrature_ci_high=vq[2])
        verdict = _verdict(amp, vq)
    else:
        notes.append("accumulation verdict needs the local pass (local=True)")
    return GrowthFit(n_layers, confidence_level, slope, low, high, growth=growth,
                     accumulation=accumulation, verdict=verdict, notes=tuple(notes))


def _growth(slope: float) -> float:
    """``exp(slope) − 1``; NaN for a slope (or bound) that is not finite."""
    return math.exp(slope) - 1 if math.isfinite(slope) else math.nan


def _verdict(amp: tuple[float, float, float], vq: tuple[float, float, float]) -> str | None:
    a, a_lo, a_hi = amp
    q, q_lo, q_hi = vq
    if not math.isfinite(a):
        return None
    if not (math.isfinite(a_lo) and math.isfinite(a_hi)):
        a_lo = a_hi = a
        q_lo = q_hi = q
    if a_lo > 1:
        return "amplifying"
    if a_hi >= 1:
        return "additive"
    if q_lo > 1:
        return "sub-additive"
    if q_hi >= 1:
        return "independent"
    return "damped"


def exceeding_table(modules: pd.DataFrame, max_mape: float, *,
                    sensitivity: Mapping[int, Mapping[str, Any]] | None = None,
                    mode: str = "accumulated") -> pd.DataFrame:
    """Sites of ``mode`` whose MAPE may exceed ``max_mape``: ``exceeds`` when the interval's
    lower bound is above it, ``inconclusive`` when the interval contains it (a site whose
    upper bound is at or below the bound is within it and not listed).

    With ``sensitivity`` (``{layer: {"sensitivity": s, "sensitive": bool}}``), rows are
    ordered sensitive layers first, then by ``priority`` = max(s, 0) × MAPE (predicted harm:
    degradation per unit of relative noise times the noise), then by MAPE; without it by
    verdict and MAPE.
    """
    t = modules[modules["mode"] == mode].copy()
    high = t["mape_ci_high"].where(t["mape_ci_high"].notna(), t["mape"])
    low = t["mape_ci_low"].where(t["mape_ci_low"].notna(), t["mape"])
    t = t[high > max_mape].copy()
    t["max_mape"] = max_mape
    t["verdict"] = np.where(low[t.index] > max_mape, "exceeds", "inconclusive")
    sens = sensitivity or {}
    t["sensitivity"] = [_get(sens, layer, "sensitivity") for layer in t["layer"]]
    t["sensitive"] = [bool(_get(sens, layer, "sensitive") or False) for layer in t["layer"]]
    t["priority"] = t["sensitivity"].clip(lower=0) * t["mape"]
    t["_v"] = (t["verdict"] == "exceeds").astype(int)
    keys = ["sensitive", "priority", "_v", "mape"] if sensitivity else ["_v", "mape"]
    t = t.sort_values(keys, ascending=False, na_position="last", kind="stable")
    t = t.drop(columns="_v").reset_index(drop=True)
    t.insert(0, "rank", range(1, len(t) + 1))
    cols = ["rank", "site", "layer", "module_type", "verdict", "mape", "mape_ci_low",
            "mape_ci_high", "max_mape", "rel_rms", "cosine", "sensitivity", "sensitive",
            "priority", "n_items", "ci_level", "ci_method"]
    return t[cols]


def _get(sens: Mapping[int, Mapping[str, Any]], layer: Any, key: str) -> Any:
    entry = sens.get(int(layer))
    if entry is None:
        return math.nan if key == "sensitivity" else None
    value = entry.get(key)
    return math.nan if value is None and key == "sensitivity" else value
