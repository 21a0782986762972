"""The diagnosis figure (matplotlib, Agg): the operator level beside the layers × windows grid.

Left, one row per op type: its accuracy drop with its interval (filled marker: significant
after the multiplicity adjustment). Right, layers × (the layer alone, each window): the
drop in percentage points, coloured on a scale symmetric about 0, each cell with its
interval; a window is one target, outlined over the layers it spans and labelled once.
Every interval's level is read from the table's ``ci_level``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from robuststats._format import fmt_level, is_missing

__all__ = ["figure", "heatmap"]

_DPI = 120


def _cell(row: Any) -> str:
    """``+1.2*`` over ``[-3.0, 5.4]`` (pp; ``*``: significant)."""
    star = "*" if bool(row["significant"]) else ""
    text = f"{100 * float(row['estimate']):+.1f}{star}"
    if not (is_missing(row["ci_low"]) or is_missing(row["ci_high"])):
        text += f"\n[{100 * float(row['ci_low']):.1f}, {100 * float(row['ci_high']):.1f}]"
    return text


def heatmap(diagnosis: Any, path: Path) -> Path | None:
    """Write the figure to ``path``; None (nothing written) without a layer level."""
    fig = figure(diagnosis)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(path, dpi=_DPI, bbox_inches="tight", pad_inches=0.15)
    finally:
        plt.close(fig)
    return path


def figure(diagnosis: Any) -> Any:
    """The figure of :func:`heatmap` (not saved), or None without a layer level."""
    t = diagnosis.table
    layers = t[t["level"] == "layer"]
    if diagnosis.n_layers == 0 or layers.empty:
        return None
    windows = t[t["level"] == "window"].sort_values("target")
    ops = t[t["level"] == "operator"].sort_values("estimate")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    n_cols = 1 + len(windows)
    height = max(3.2, 1.9 + 0.5 * diagnosis.n_layers, 1.9 + 0.32 * len(ops))
    width = 1.9 + 1.05 * n_cols + (3.6 if len(ops) else 0)
    fig = plt.figure(figsize=(width, height), layout="constrained")
    if len(ops):
        ax_ops, ax = fig.subplots(1, 2, width_ratios=[3.6, 1.2 + 1.05 * n_cols])
        _operators(ax_ops, ops)
    else:
        ax = fig.subplots()
    grid = np.full((diagnosis.n_layers, n_cols), np.nan)
    for r in layers.itertuples():
        grid[int(r.layers), 0] = 100 * float(r.estimate)
    spans = []
    for j, w in enumerate(windows.to_dict(orient="records"), start=1):
        rows = [int(x) for x in str(w["layers"]).split(",")]
        grid[rows, j] = 100 * float(w["estimate"])
        spans.append((j, rows, w))
    finite = np.abs(grid[np.isfinite(grid)])
    vmax = max(float(finite.max()) if finite.size else 0.0, 1.0)
    im = ax.imshow(grid, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
    def ink(row: Any) -> dict[str, Any]:  # white on the dark ends of the colour scale
        dark = abs(100 * float(row["estimate"])) > 0.6 * vmax
        return {"ha": "center", "va": "center", "fontsize": 7,
                "color": "white" if dark else "black",
                "fontweight": "bold" if row["significant"] else "normal"}

    for r in layers.to_dict(orient="records"):
        ax.text(0, int(r["layers"]), _cell(r), **ink(r))
    for j, rows, w in spans:
        ax.add_patch(Rectangle((j - 0.5, min(rows) - 0.5), 1, len(rows), fill=False,
                               edgecolor="black", linewidth=1.0))
        ax.text(j, (min(rows) + max(rows)) / 2, _cell(w), **ink(w))
    labels = ["layer\nalone"] + [f"window\n{w['label']}" for _, _, w in spans]
    ax.set_xticks(range(n_cols), labels, fontsize=8)
    ax.set_yticks(range(diagnosis.n_layers), [f"L{i}" for i in range(diagnosis.n_layers)])
    ax.set_xlabel("noise in")
    ax.set_ylabel("decoder layer")
    ax.grid(False)
    ax.set_title("layer and window level", fontsize=9)
    fig.colorbar(im, ax=ax, location="bottom", shrink=0.9, aspect=30,
                 label="accuracy drop, clean − noisy (pp)")
    fig.suptitle(_title(diagnosis, t), fontsize=9)
    return fig


def _operators(ax: Any, ops: pd.DataFrame) -> None:
    y = np.arange(len(ops))
    est = 100 * ops["estimate"].to_numpy(dtype=float)
    low = 100 * pd.to_numeric(ops["ci_low"], errors="coerce").to_numpy(dtype=float)
    high = 100 * pd.to_numeric(ops["ci_high"], errors="coerce").to_numpy(dtype=float)
    sig = ops["significant"].fillna(False).astype(bool).to_numpy()
    ok = np.isfinite(low) & np.isfinite(high)
    ax.hlines(y[ok], low[ok], high[ok], color="black", linewidth=1.2, gid="operator:intervals")
    ax.plot(est[sig], y[sig], "o", color="black", markersize=6, gid="operator:significant")
    ax.plot(est[~sig], y[~sig], "o", markerfacecolor="white", color="black", markersize=6,
            gid="operator:not_significant")
    ax.axvline(0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_yticks(y, list(ops["label"]), fontsize=8)
    ax.set_ylim(-0.6, len(ops) - 0.4)
    ax.set_xlabel("accuracy drop (pp)")
    ax.set_title("operator level: noise in one op type\n(filled: significant)", fontsize=9)


def _title(diagnosis: Any, t: pd.DataFrame) -> str:
    plan = diagnosis.plan
    levels = sorted({round(float(v), 6) for v in t["ci_level"].dropna()})
    ci = (f"{fmt_level(levels[0])} CI" if len(levels) == 1 else
          f"CI, level per row: {fmt_level(levels[0])}–{fmt_level(levels[-1])}" if levels
          else "CI")
    first = t.iloc[0]
    design = (f"{int(first['n_seeds'])} seed(s) × {int(first['n_noise_seeds'])} noise "
              f"seed(s) × {int(first['n_items'])} items")
    clean = "" if is_missing(first.get("clean_accuracy")) else \
        f", clean accuracy {100 * float(first['clean_accuracy']):.1f}%"
    text = (f"{plan.study}: accuracy drop under {plan.kind} {plan.scale:g} on {plan.ops} "
            f"({design}{clean}); brackets: {ci}; * significant after "
            f"{first['multiplicity']}")
    return "\n".join(textwrap.wrap(text, 90))
