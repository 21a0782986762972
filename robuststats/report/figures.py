"""Seaborn figures of a study's tables (matplotlib's non-interactive Agg backend).

Every interval's level is read from the table's ``ci_level`` column, never assumed. Tables
use the glossary's column names (:func:`robuststats.results.normalize_table`). The
dose-response figure is :mod:`robuststats.report.dose_figure`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from robuststats._format import fmt_level, is_missing

__all__ = ["accuracy_figure", "interval_label", "retention_figure"]

_DPI = 120


def _pyplot() -> tuple[Any, Any]:  # lazily: matplotlib is slow to import, needed only here
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    return plt, sns


def interval_label(table: pd.DataFrame | None) -> str:
    """How to name the intervals of ``table``: ``95% CI``, ``CI, level per row: 95%–99%`` or
    ``CI (level not recorded)``; taken from its ``ci_level`` column."""
    if table is None or "ci_level" not in table.columns:
        return "CI (level not recorded)"
    levels = sorted({round(float(v), 6) for v in table["ci_level"].dropna()})
    if not levels:
        return "CI (level not recorded)"
    if len(levels) == 1:
        return f"{fmt_level(levels[0])} CI"
    return f"CI, level per row: {fmt_level(levels[0])}–{fmt_level(levels[-1])}"


def _conditions(*tables: pd.DataFrame | None) -> list[str]:
    seen: dict[str, None] = {}
    for t in tables:
        if t is not None and "condition" in t.columns:
            seen.update(dict.fromkeys(str(c) for c in t["condition"]))
    return list(seen)


def _labels(conditions: list[str], descriptions: Mapping[str, str] | None) -> dict[str, str]:
    """Legend entries: ``E8b: forward and backward noise, 5 %``, wrapped to stay narrow."""
    descriptions = descriptions or {}
    out = {}
    for c in conditions:
        text = f"{c}: {descriptions[c]}" if descriptions.get(c) else c
        out[c] = "\n".join(textwrap.wrap(text, 60, subsequent_indent="    ")) or c
    return out


def _palette(sns: Any, conditions: list[str]) -> dict[str, Any]:
    return dict(zip(conditions, sns.color_palette("colorblind", max(len(conditions), 1))))


def _ncols(labels: list[str]) -> int:
    """Two legend columns when the entries are short enough to sit side by side."""
    widest = max((len(line) for text in labels for line in text.splitlines()), default=0)
    return 2 if len(labels) > 1 and widest <= 40 else 1


def _legend_below(fig: Any, handles: list[Any], labels: list[str]) -> None:
    # "condition", not "training condition": a condition may also set its evaluation's
    # error model (`eval_kind`)
    fig.legend(handles, labels, loc="lower center", ncols=_ncols(labels), fontsize="small",
               frameon=False, title="condition", title_fontsize="small")


def _intervals(ax: Any, x: np.ndarray, low: np.ndarray, high: np.ndarray, color: Any,
               cap: float) -> None:
    """Vertical intervals with caps, drawn from their bounds alone: a bootstrap interval
    need not contain its point estimate (BCa can exclude it), which error bars relative to
    the estimate cannot show. Rows with an unknown bound are skipped."""
    ok = np.isfinite(low) & np.isfinite(high)
    if not ok.any():
        return
    x, low, high = x[ok], low[ok], high[ok]
    ax.vlines(x, low, high, color=color, linewidth=1.2, zorder=3)
    ax.hlines(np.concatenate([low, high]), np.tile(x - cap, 2), np.tile(x + cap, 2),
              color=color, linewidth=1.2, zorder=3)


def _seed_points(ax: Any, x0: float, values: np.ndarray, width: float, color: Any) -> None:
    """Per-seed values as small dots spread evenly over ``width`` around ``x0``
    (deterministic spacing, no random jitter)."""
    values = values[~np.isnan(values)]
    if not len(values):
        return
    xs = x0 + (np.linspace(-0.5, 0.5, len(values)) * width if len(values) > 1 else 0.0)
    ax.scatter(xs, values, s=12, color=color, alpha=0.55, edgecolors="white",
               linewidths=0.4, zorder=3)


def accuracy_figure(summary: pd.DataFrame, path: Path, *, seeds: pd.DataFrame | None = None,
                    descriptions: Mapping[str, str] | None = None,
                    formats: Mapping[str, str] | None = None) -> Path:
    """Accuracy against inference-noise level: one line per condition with its interval
    (level from ``ci_level``), and one dot per training seed from the ``seeds`` table.

    ``summary`` needs ``condition, eval_noise, accuracy``; ``ci_low, ci_high, ci_level``
    draw the intervals. ``seeds`` needs ``condition, seed, eval_noise, accuracy``.
    ``descriptions`` (condition -> text) label the legend. ``formats`` (condition -> the
    number format it is evaluated in, e.g. ``NVFP4 weights (W4A16)``) names the conditions
    whose noisy cells are a number format, not a noise scale: their noisy points are drawn
    as squares and the tick of their level names the format. Levels that are not evenly
    spaced are drawn at evenly spaced positions (a sweep's log grid would crowd its low end).
    """
    return _save(_accuracy(summary, seeds, descriptions, formats), path)


def _accuracy(summary: pd.DataFrame, seeds: pd.DataFrame | None,
              descriptions: Mapping[str, str] | None,
              formats: Mapping[str, str] | None = None) -> Any:
    plt, sns = _pyplot()
    conditions = _conditions(summary)
    palette = _palette(sns, conditions)
    labels = _labels(conditions, descriptions)
    formats = {c: f for c, f in (formats or {}).items() if c in conditions}
    levels = sorted(float(v) for v in summary["eval_noise"].unique())
    position = _positions(levels)
    spacing = min(np.diff(sorted(position.values()))) if len(levels) > 1 else 1.0
    # dodge conditions horizontally so intervals and seed dots do not overlap
    step = 0.4 * spacing / max(len(conditions), 1)
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    handles = []
    for i, cond in enumerate(conditions):
        offset = (i - (len(conditions) - 1) / 2) * step
        d = _of(summary, cond).sort_values("eval_noise")
        x = np.array([position[float(v)] for v in d["eval_noise"]]) + offset
        y = _num(d["accuracy"]) * 100
        if {"ci_low", "ci_high"} <= set(d.columns):
            _intervals(ax, x, _num(d["ci_low"]) * 100, _num(d["ci_high"]) * 100,
                       palette[cond], 0.15 * step)
        (h,) = ax.plot(x, y, marker="o", markersize=6, linewidth=1.6, color=palette[cond],
                       zorder=4)
        handles.append(h)
        if cond in formats:  # its noisy cells are the format: a square says so
            noisy = _num(d["eval_noise"]) > 0
            ax.plot(x[noisy], y[noisy], "s", markersize=8, color=palette[cond],
                    markeredgecolor="black", zorder=5, gid=f"{cond}:format")
        if seeds is not None and {"condition", "eval_noise", "accuracy"} <= set(seeds.columns):
            s = _of(seeds, cond)
            for level, xs in zip(d["eval_noise"], x):
                v = s.loc[np.isclose(s["eval_noise"].astype(float), float(level)), "accuracy"]
                _seed_points(ax, xs, _num(v) * 100, 0.7 * step, palette[cond])
    ax.set_xticks([position[lv] for lv in levels], [_level_tick(lv, formats) for lv in levels],
                  rotation=45 if len(levels) > 6 else 0, ha="right" if len(levels) > 6 else "center")
    even = "" if _evenly_spaced(levels) else " (levels evenly spaced, not to scale)"
    ax.set_xlabel(f"inference noise scale{even}")
    ax.set_ylabel("accuracy (%)")
    dots = "; dots: single training seeds" if seeds is not None else ""
    squares = "; squares: a number format, not a noise scale" if formats else ""
    ax.set_title(f"Accuracy vs inference noise\nmean with {interval_label(summary)}{dots}"
                 f"{squares}{_few_seeds(summary)}", fontsize="medium")
    _legend_below(fig, handles, [labels[c] for c in conditions])
    return _finish(fig, conditions, labels)


def _few_seeds(summary: pd.DataFrame) -> str:
    """A note when the intervals rest on few training seeds (a seed-random t interval from
    2 seeds has 1 degree of freedom: t = 12.7 at 95 %, so it is honestly wide)."""
    if "n_seeds" not in summary.columns:
        return ""
    n = _num(summary["n_seeds"])
    n = n[np.isfinite(n)]
    if not n.size or n.max() > 3:
        return ""
    return f"\nonly {int(n.max())} training seeds: intervals over seeds are wide"


def _evenly_spaced(levels: list[float]) -> bool:
    gaps = np.diff(levels)
    return len(levels) < 3 or bool(np.allclose(gaps, gaps[0], rtol=0.05))


def _positions(levels: list[float]) -> dict[float, float]:
    """Where each level is drawn: at its value in percent when the levels are evenly spaced,
    else at 0, 1, 2, ... times the mean gap (ticks name the true levels)."""
    if _evenly_spaced(levels):
        return {lv: lv * 100 for lv in levels}
    gap = (levels[-1] - levels[0]) * 100 / (len(levels) - 1)
    return {lv: levels[0] * 100 + i * gap for i, lv in enumerate(levels)}


def _level_tick(level: float, formats: Mapping[str, str], suffix: str = "") -> str:
    """``5%``, and below it, at a noisy level, each format condition's format."""
    lines = [f"{level * 100:g}%{suffix}"]
    if level > 0:
        for c, f in formats.items():
            lines += textwrap.wrap(f"{c}: {f}", 26, subsequent_indent="  ")
    return "\n".join(lines)


def _save(fig: Any, path: Path, **kwargs: Any) -> Path:
    import matplotlib.pyplot as plt

    if "bbox_inches" not in kwargs:  # nothing drawn is cut at the figure's edge
        kwargs.update(bbox_inches="tight", pad_inches=0.15)
    try:
        fig.savefig(path, dpi=_DPI, **kwargs)
    finally:
        plt.close(fig)
    return path


def _finish(fig: Any, conditions: list[str], labels: Mapping[str, str]) -> Any:
    """Grow the figure by the height of the legend below the axes, then lay it out, so
    that long condition descriptions never squeeze the data."""
    texts = [labels[c] for c in conditions]
    ncols = _ncols(texts)
    # text lines of the legend: each row is as tall as its tallest entry
    heights = [t.count("\n") + 1 for t in texts]
    lines = sum(max(heights[i:i + ncols]) for i in range(0, len(heights), ncols))
    legend = 0.5 + 0.19 * max(lines, 1)  # inches
    height = fig.get_figheight() + legend
    fig.set_figheight(height)
    fig.tight_layout(rect=(0, legend / height, 1, 1))
    return fig


def retention_figure(retention: pd.DataFrame, path: Path, *,
                     summary: pd.DataFrame | None = None, seeds: pd.DataFrame | None = None,
                     descriptions: Mapping[str, str] | None = None,
                     formats: Mapping[str, str] | None = None) -> Path:
    """Clean accuracy beside retention (noisy / clean accuracy), per condition.

    A high retention can come from a low clean accuracy with little left to lose; the left
    panel shows the clean accuracy each retention is relative to. Intervals carry the
    level of their table's ``ci_level``; dots are single training seeds when ``seeds`` is
    given. ``summary`` supplies the clean accuracy and its interval (without it, the
    retention table's ``clean_accuracy`` is drawn without an interval). ``formats``: as in
    :func:`accuracy_figure` (the tick of a noisy level names each condition's format).
    """
    return _save(_retention(retention, summary, seeds, descriptions, formats), path)


def _retention(retention: pd.DataFrame, summary: pd.DataFrame | None,
               seeds: pd.DataFrame | None, descriptions: Mapping[str, str] | None,
               formats: Mapping[str, str] | None = None) -> Any:
    plt, sns = _pyplot()
    conditions = _conditions(summary, retention)
    palette = _palette(sns, conditions)
    labels = _labels(conditions, descriptions)
    levels = sorted(float(v) for v in retention["eval_noise"].unique())
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.4),
                                      gridspec_kw={"width_ratios": [1, max(len(levels), 1)]})
    width = 0.8 / max(len(conditions), 1)
    handles = []

    clean = _clean_accuracy(summary, retention)
    for i, cond in enumerate(conditions):
        row = clean.get(cond)
        if row is None:
            continue
        y = row["accuracy"] * 100
        bar = left.bar(i, y, width=0.8, color=palette[cond])
        handles.append(bar)
        _intervals(left, np.array([i]), np.array([row["ci_low"] * 100]),
                   np.array([row["ci_high"] * 100]), "black", 0.12)
        if seeds is not None and {"condition", "eval_noise", "accuracy"} <= set(seeds.columns):
            s = _of(seeds, cond, eval_noise=0.0)
            _seed_points(left, i, _num(s["accuracy"]) * 100, 0.35, "black")
    # names wider than their panel (about 0.085 in a character) collide: slant them
    panel = 10.5 * 0.8 / (1 + max(len(levels), 1))
    slanted = sum(0.085 * len(c) + 0.15 for c in conditions) > panel
    left.set_xticks(range(len(conditions)), conditions, rotation=45 if slanted else 0,
                    ha="right" if slanted else "center")
    left.set_ylabel("clean accuracy (%)")
    left.set_ylim(0, 100)
    clean_ci = interval_label(summary) if summary is not None else "no interval"
    left.set_title(f"Clean accuracy\n({clean_ci})", fontsize="medium")

    for i, cond in enumerate(conditions):
        d = _of(retention, cond).set_index("eval_noise").reindex(levels)
        x = np.arange(len(levels)) + (i - (len(conditions) - 1) / 2) * width
        y = _num(d["retention"]) * 100
        right.bar(x, y, width=width * 0.92, color=palette[cond])
        if "ci_method" in d.columns:  # say where a retention is not estimable
            for xs, method in zip(x, d["ci_method"]):
                if str(method).startswith("none, not estimable"):
                    right.text(xs, 2, "not estimable", rotation=90, ha="center",
                               va="bottom", fontsize="x-small", color=palette[cond])
        if {"ci_low", "ci_high"} <= set(d.columns):
            _intervals(right, x, _num(d["ci_low"]) * 100, _num(d["ci_high"]) * 100, "black",
                       0.15 * width)
        if seeds is not None and "retention" in seeds.columns:
            s = _of(seeds, cond)
            for level, xs in zip(levels, x):
                v = s.loc[np.isclose(s["eval_noise"].astype(float), level), "retention"]
                _seed_points(right, xs, _num(v) * 100, 0.5 * width, "black")
    right.axhline(100, color="grey", linewidth=0.8, linestyle="--")
    formats = {c: f for c, f in (formats or {}).items() if c in conditions}
    many = len(levels) > 4  # a sweep: slanted ticks that do not run into each other
    right.set_xticks(range(len(levels)), [_level_tick(lv, formats, "" if many else " noise")
                                          for lv in levels],
                     rotation=45 if many else 0, ha="right" if many else "center")
    if many:
        right.set_xlabel("inference noise scale")
    right.set_ylabel("retention (% of clean accuracy)")
    # bars encode length: a truncated axis would exaggerate the differences
    right.set_ylim(0.0, max(105.0, float(np.nanmax(_upper(retention))) * 100 + 5))
    dots = "; dots: single seeds" if seeds is not None else ""
    right.set_title(f"Retention = noisy / clean accuracy\n({interval_label(retention)}{dots})",
                    fontsize="medium")
    if len(handles) != len(conditions):  # a condition without clean accuracy: label anyway
        handles = [plt.Rectangle((0, 0), 1, 1, color=palette[c]) for c in conditions]
    _legend_below(fig, handles, [labels[c] for c in conditions])
    return _finish(fig, conditions, labels)


def _upper(retention: pd.DataFrame) -> np.ndarray:
    col = "ci_high" if "ci_high" in retention.columns else "retention"
    values = _num(retention[col])
    return values if np.isfinite(values).any() else np.array([1.0])


def _clean_accuracy(summary: pd.DataFrame | None, retention: pd.DataFrame
                    ) -> dict[str, dict[str, float]]:
    """condition -> clean accuracy with its interval (NaN bounds when unknown)."""
    out: dict[str, dict[str, float]] = {}
    if summary is not None and not summary.empty:
        clean = summary[summary["eval_noise"].astype(float) == 0]
        for r in clean.to_dict(orient="records"):
            out[str(r["condition"])] = {
                "accuracy": _float(r.get("accuracy")),
                "ci_low": _float(r.get("ci_low")), "ci_high": _float(r.get("ci_high"))}
    if "clean_accuracy" in retention.columns:
        for cond, d in retention.groupby("condition", sort=False):
            out.setdefault(str(cond), {"accuracy": _float(d["clean_accuracy"].iloc[0]),
                                       "ci_low": np.nan, "ci_high": np.nan})
    return out


def _float(value: Any) -> float:
    return np.nan if is_missing(value) else float(value)


def _of(table: pd.DataFrame, condition: str, *, eval_noise: float | None = None
        ) -> pd.DataFrame:
    """The rows of ``condition`` (compared as text: names read from a CSV may be numbers),
    optionally at one noise level."""
    keep = table["condition"].astype(str) == condition
    if eval_noise is not None:
        keep &= np.isclose(_num(table["eval_noise"]), eval_noise)
    return table[keep]


def _num(values: pd.Series) -> np.ndarray:
    """A numeric column as floats with NaN for missing values (nullable dtypes included)."""
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
