"""A sequential study in the report: the statistic of each driving hypothesis against its
boundaries at every look, and the table of looks (``sequential_looks``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from robuststats.report.figures import _DPI, _pyplot
from robuststats.report.markdown import markdown_table

__all__ = ["sequential_figure", "sequential_section"]

_SHOWN = ("id", "look", "n_seeds", "fraction", "estimate", "statistic_z", "efficacy_bound",
          "futility_bound", "ci_low", "ci_high", "ci_level", "decision", "pvalue",
          "median_unbiased")


def sequential_figure(looks: pd.DataFrame, path: Path) -> Path:
    """The z-equivalent statistic of each driving hypothesis by seeds, with the efficacy
    bound (and the futility bound when there is one) at each look."""
    plt, _ = _pyplot()
    rows = looks[looks["decision"] != "STOPPED"]
    ids = list(dict.fromkeys(rows["id"]))
    fig, axes = plt.subplots(1, len(ids), figsize=(4.6 * len(ids), 3.8), squeeze=False,
                             sharey=True)
    for ax, hid in zip(axes[0], ids):
        r = rows[rows["id"] == hid].sort_values("look")
        x = r["n_seeds"].to_numpy(float)
        ax.plot(x, r["efficacy_bound"], "v--", color="tab:red", label="efficacy bound")
        fut = r["futility_bound"].to_numpy(float)
        if np.isfinite(fut).any():
            ax.plot(x, fut, "^--", color="tab:gray", label="futility bound")
        ax.plot(x, r["statistic_z"], "o-", color="tab:blue", label="statistic (z)")
        for xi, zi, d in zip(x, r["statistic_z"], r["decision"]):
            ax.annotate(d.lower(), (xi, zi), textcoords="offset points", xytext=(4, 6),
                        fontsize=8)
        ax.axhline(0.0, color="black", lw=0.6)
        ax.set_xticks(x)
        ax.set_xlabel("training seeds at the look")
        ax.set_title(hid)
    axes[0][0].set_ylabel("z-equivalent of the calibrated p-value")
    axes[0][0].legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path


def sequential_section(t: Mapping[str, pd.DataFrame], figure: str | None) -> list[str]:
    looks = t.get("sequential_looks")
    if looks is None or looks.empty:
        return []
    last = int(looks["look"].max())
    parts = ["## Sequential looks\n\nThe study analysed after each look's seeds and stopped "
             f"at look {last}. The intervals are repeated confidence intervals: valid "
             "whatever rule stopped the study (docs/statistics.md, sequential studies); "
             "`pvalue` is the stage-wise ordering p-value at the look where the study "
             "stopped and `median_unbiased` the estimate median-unbiased under that ordering "
             "(an early stop overshoots). The driving hypotheses' rows of the table above "
             "carry the intervals and p-values.\n"]
    shown = [c for c in _SHOWN if c in looks.columns]
    parts.append(markdown_table(looks[shown]))
    if figure:
        parts.append(f"![Statistic against its boundaries at each look]({figure})\n")
    return parts
