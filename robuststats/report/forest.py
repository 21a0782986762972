"""Forest plot of pre-registered hypotheses: each claim's a − b with its interval, margin
and verdict (rliable's interval estimates, one row per hypothesis)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from robuststats._format import fmt_ci, fmt_pct, is_missing
from robuststats.report._views import claim, records
from robuststats.report.figures import _pyplot, _save, interval_label

__all__ = ["VERDICT_STYLE", "forest_figure"]

#: verdict -> (colour, marker); colour-blind safe (Okabe-Ito), and the marker repeats the
#: verdict for readers who cannot tell the colours apart
VERDICT_STYLE: dict[str, tuple[str, str]] = {
    "VERIFIED": ("#009E73", "o"),
    "FALSIFIED": ("#D55E00", "X"),
    "INCONCLUSIVE": ("#6E6E6E", "D"),
}
_CLAIMED = "#56B4E9"  # shading of the side of the margin the claim asserts


def forest_figure(hypotheses: pd.DataFrame, path: Path) -> Path:
    """One horizontal interval of a − b per hypothesis (percentage points), the margin(s)
    of its claim as dashed lines (±margin for ``equivalent``) with the claimed side shaded,
    and the estimate's marker coloured by verdict. Each row's interval level is its own
    ``ci_level`` (multiplicity-adjusted levels differ between rows).

    Each metric gets its own panel and x axis (accuracy differences, then retention
    differences), so a wide retention interval never squeezes the accuracy hypotheses into
    a sliver. A hypothesis without an estimate (a retention that is not estimable) shows
    its reason in place of the interval.

    ``hypotheses`` needs ``id, a, b, metric, eval_noise, relation, margin, estimate,
    ci_low, ci_high, verdict``; ``ci_level`` and ``reason`` are shown when present.
    """
    return _save(_forest(hypotheses), path, bbox_inches="tight")


#: metric -> (panel title, x-axis label), in panel order
_PANELS = {
    "accuracy": ("Accuracy", "accuracy a − b (percentage points)"),
    "retention": ("Retention (noisy / clean accuracy)",
                  "retention a − b (percentage points of retention)"),
}


def _panels(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The rows grouped by metric, known metrics first in :data:`_PANELS` order."""
    metrics = list(dict.fromkeys(str(h.get("metric")) for h in rows))
    metrics.sort(key=lambda m: list(_PANELS).index(m) if m in _PANELS else len(_PANELS))
    return [(m, [h for h in rows if str(h.get("metric")) == m]) for m in metrics]


def _forest(hypotheses: pd.DataFrame) -> Any:
    plt, _ = _pyplot()
    rows = records(hypotheses)
    panels = _panels(rows) or [("accuracy", [])]
    sizes = [max(len(group), 1) for _, group in panels]
    fig, axes = plt.subplots(
        len(panels), 1, squeeze=False,
        figsize=(10.5, 1.6 + 0.72 * sum(sizes) + 0.9 * (len(panels) - 1)),
        gridspec_kw={"height_ratios": sizes})
    for ax, (metric, group) in zip(axes[:, 0], panels):
        _panel(ax, metric, group, titled=len(panels) > 1)
    fig.suptitle("Pre-registered hypotheses: estimate of a − b with its interval "
                 f"({interval_label(hypotheses)})", fontsize="medium", x=0.02, ha="left")
    handles = [plt.Line2D([], [], color=c, marker=m, linestyle="-", markersize=8,
                          markeredgecolor="white", label=v)
               for v, (c, m) in VERDICT_STYLE.items()]
    handles.append(plt.Line2D([], [], color="black", linestyle="--", linewidth=1,
                              label="margin of the claim"))
    handles.append(plt.Rectangle((0, 0), 1, 1, color=_CLAIMED, alpha=0.18,
                                 label="side the claim asserts"))
    fig.legend(handles=handles, loc="lower center", ncols=5, fontsize="small",
               frameon=False)
    fig.tight_layout(rect=(0, 0.45 / fig.get_figheight(), 1, 1))
    return fig


def _panel(ax: Any, metric: str, rows: list[dict[str, Any]], *, titled: bool) -> None:
    """The rows of one metric on their own x axis."""
    n = len(rows)
    span = _span(rows)
    for i, h in enumerate(rows):
        y = n - 1 - i
        _claimed_region(ax, h, y, span)
        verdict = str(h.get("verdict"))
        color, marker = VERDICT_STYLE.get(verdict, ("black", "o"))
        if is_missing(h.get("estimate")):
            reason = "" if is_missing(h.get("reason")) else str(h.get("reason"))
            text = "\n".join(textwrap.wrap(f"no estimate: {reason}", 95)[:3])
            ax.annotate(text, xy=(0.01, y), xycoords=("axes fraction", "data"), ha="left",
                        va="center", fontsize="x-small", color=color, style="italic",
                        zorder=5, bbox={"facecolor": "white", "edgecolor": "none",
                                        "alpha": 0.85, "pad": 1.5})
        else:
            lo, hi = (100 * float(h[k]) if not is_missing(h.get(k)) else np.nan
                      for k in ("ci_low", "ci_high"))
            if not (np.isnan(lo) or np.isnan(hi)):  # an unknown bound draws no interval
                _interval(ax, h, y, lo, hi, span, color)
            ax.plot(100 * float(h["estimate"]), y, marker=marker, markersize=9, color=color,
                    markeredgecolor="white", zorder=4, linestyle="none",
                    gid=f"{h.get('id')}:estimate")
        ax.annotate(_right_label(h), xy=(1.01, y), xycoords=("axes fraction", "data"),
                    va="center", fontsize="small", color=color)
    ax.axvline(0, color="black", linewidth=0.8, zorder=1)
    ax.set_yticks(range(n), [_row_label(h) for h in reversed(rows)], fontsize="small")
    ax.set_ylim(-0.7, max(n, 1) - 0.3)
    ax.set_xlim(*span)
    title, label = _PANELS.get(metric, (metric, f"{metric} a − b (percentage points)"))
    if all(is_missing(h.get("estimate")) for h in rows):  # nothing to read off an axis
        ax.set_xticks([])
        label += ": no estimates"
    ax.set_xlabel(label)
    if titled:
        ax.set_title(title, fontsize="medium", loc="left")
    ax.grid(axis="y", visible=False)


def _interval(ax: Any, h: dict[str, Any], y: float, lo: float, hi: float,
              span: tuple[float, float], color: str) -> None:
    """The interval as a thick line; an unbounded side runs to the edge with an arrow."""
    left, right = max(lo, span[0]), min(hi, span[1])
    ax.hlines(y, left, right, color=color, linewidth=2.4, zorder=3,
              gid=f"{h.get('id')}:interval")
    for bound, edge, marker in ((lo, left, "<"), (hi, right, ">")):
        if not np.isfinite(bound):
            ax.plot(edge, y, marker=marker, color=color, markersize=8, zorder=3)


def _span(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """x limits (pp) covering every interval, estimate and margin, with some air."""
    values = [0.0]
    for h in rows:
        for k in ("ci_low", "ci_high", "estimate"):
            if not is_missing(h.get(k)) and np.isfinite(float(h[k])):
                values.append(100 * float(h[k]))
        if not is_missing(h.get("margin")) and np.isfinite(float(h["margin"])):
            m = 100 * float(h["margin"])
            values += [m, -m] if h.get("relation") == "equivalent" else [m]
    lo, hi = min(values), max(values)
    pad = max(0.08 * (hi - lo), 0.5)
    return lo - pad, hi + pad


def _claimed_region(ax: Any, h: dict[str, Any], y: float, span: tuple[float, float]) -> None:
    if is_missing(h.get("margin")):
        return
    m = 100 * float(h["margin"])
    relation = h.get("relation")
    band = {"greater": (m, span[1]), "less": (span[0], m), "equivalent": (-m, m)}.get(
        str(relation))
    if band is None:
        return
    ax.fill_betweenx([y - 0.38, y + 0.38], *band, color=_CLAIMED, alpha=0.18, linewidth=0,
                     zorder=0)
    lines = [-m, m] if relation == "equivalent" else [m]
    ax.vlines(lines, y - 0.38, y + 0.38, color="black", linestyle="--", linewidth=1, zorder=2,
              gid=f"{h.get('id')}:margin")


def _row_label(h: dict[str, Any]) -> str:
    text = claim(h)
    head, _, tail = text.partition(" (")
    return f"{h.get('id')}: {head}\n({tail}" if tail else f"{h.get('id')}: {text}"


def _right_label(h: dict[str, Any]) -> str:
    est = fmt_pct(h.get("estimate"), signed=True)
    ci = fmt_ci(h.get("ci_low"), h.get("ci_high"), h.get("ci_level"))
    return f"{h.get('verdict')}\n{est} {ci}" if est != "-" else str(h.get("verdict"))
