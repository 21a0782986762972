"""The dose-response figure of a sweep (matplotlib's Agg backend, the helpers and style of
:mod:`robuststats.report.figures`): accuracy against the noise scale on a log axis with the
fitted curve, its band and the critical threshold."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from robuststats.report.figures import (
    _conditions,
    _few_seeds,
    _finish,
    _float,
    _labels,
    _legend_below,
    _num,
    _of,
    _palette,
    _pyplot,
    _save,
    interval_label,
)

__all__ = ["dose_response_figure"]


def dose_response_figure(summary: pd.DataFrame, curves: pd.DataFrame,
                         thresholds: pd.DataFrame, path: Path, *,
                         descriptions: Mapping[str, str] | None = None) -> Path:
    """Accuracy against noise scale on a log axis, one colour per condition: the measured
    accuracies with their intervals (``summary``), the fitted curve with its band
    (``dose_curves``) and the critical threshold with its interval (``thresholds``), drawn
    at the threshold's accuracy level. The clean level sits left of the log axis."""
    return _save(_dose(summary, curves, thresholds, descriptions), path)


def _dose(summary: pd.DataFrame, curves: pd.DataFrame, thresholds: pd.DataFrame,
          descriptions: Mapping[str, str] | None) -> Any:
    plt, sns = _pyplot()
    conditions = _conditions(thresholds, summary)
    palette = _palette(sns, conditions)
    labels = _labels(conditions, descriptions)
    positive = _num(summary["eval_noise"])
    positive = positive[positive > 0]
    lowest = float(positive.min()) if positive.size else 1e-3
    highest = max(float(positive.max()) if positive.size else 1, 1e-9)
    clean_x = lowest / 4  # where scale 0 is drawn, left of the log axis
    # conditions dodged by a fixed share of the axis (in decades), so that their points and
    # intervals sit side by side at any grid
    decades = np.log10(highest * 1.6) - np.log10(clean_x / 1.6)
    dodge = 10 ** (0.018 * decades)
    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    handles = []

    def at(x: np.ndarray) -> np.ndarray:
        return np.where(x > 0, x, clean_x)

    for i, cond in enumerate(conditions):
        color = palette[cond]
        shift = i - (len(conditions) - 1) / 2
        d = _of(summary, cond).sort_values("eval_noise")
        x = at(_num(d["eval_noise"])) * dodge ** shift
        if {"ci_low", "ci_high"} <= set(d.columns):
            # thin and light: with few seeds they are honestly wide, and must not hide the
            # points, the curve and its band
            low, high = _num(d["ci_low"]) * 100, _num(d["ci_high"]) * 100
            ok = np.isfinite(low) & np.isfinite(high)
            ax.vlines(x[ok], low[ok], high[ok], color=color, linewidth=0.9, alpha=0.45,
                      zorder=3, gid=f"{cond}:intervals")
        (h,) = ax.plot(x, _num(d["accuracy"]) * 100, "o", markersize=6, color=color,
                       markeredgecolor="white", markeredgewidth=0.6, zorder=6)
        handles.append(h)
        c = _of(curves, cond).sort_values("eval_noise") if not curves.empty else curves
        c = c[_num(c["eval_noise"]) > 0] if not c.empty else c
        if not c.empty:
            cx = _num(c["eval_noise"])
            ax.plot(cx, _num(c["estimate"]) * 100, color=color, linewidth=1.5, zorder=4)
            ax.fill_between(cx, _num(c["ci_low"]) * 100, _num(c["ci_high"]) * 100,
                            color=color, alpha=0.15, linewidth=0, zorder=2)
        t = _of(thresholds, cond)
        if not t.empty and np.isfinite(_float(t["estimate"].iloc[0])):
            est = _float(t["estimate"].iloc[0])
            level = (1 - _float(t["drop"].iloc[0])) * _float(
                t["fitted_clean_accuracy"].iloc[0]) * 100 + 1.5 * shift  # bars side by side
            ax.axvline(est, color=color, linestyle="--", linewidth=1.0, zorder=1)
            low, high = _float(t["ci_low"].iloc[0]), _float(t["ci_high"].iloc[0])
            if np.isfinite(low):
                ax.hlines(level, low, high if np.isfinite(high) else highest * 1.6,
                          color=color, linewidth=3, alpha=0.7, zorder=5)
            ax.plot([est], [level], "D", color=color, markersize=7, zorder=7,
                    markeredgecolor="white")
    ax.set_xscale("log")
    ax.set_xlim(clean_x / 1.6, highest * 1.6)
    ticks = [clean_x, *[t for t in ax.get_xticks() if lowest / 1.5 <= t <= highest * 1.6]]
    ax.set_xticks(ticks, ["0 (clean)", *[f"{t:g}" for t in ticks[1:]]])
    ax.axvline(np.sqrt(clean_x * lowest), color="0.6", linewidth=0.8, linestyle=":")
    ax.set_ylim(-2, 102)
    ax.set_xlabel("inference noise scale (log)")
    ax.set_ylabel("accuracy (%)")
    drop = _float(thresholds["drop"].iloc[0]) if not thresholds.empty else float("nan")
    ax.set_title(f"Dose-response: points with {interval_label(summary)} (thin lines), fitted "
                 f"curve with its band;\ndiamond: scale of a {drop:.0%} accuracy drop, bar: "
                 f"its {interval_label(thresholds)}{_few_seeds(summary)}", fontsize="medium")
    _legend_below(fig, handles, [labels[c] for c in conditions])
    return _finish(fig, conditions, labels)
