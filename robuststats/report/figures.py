"""Seaborn figures of a study's summary tables (matplotlib's non-interactive Agg backend)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["accuracy_figure", "retention_figure"]


def _pyplot():  # imported lazily: matplotlib is slow to import and not needed elsewhere
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    return plt, sns


def accuracy_figure(summary: pd.DataFrame, path: Path) -> Path:
    """Accuracy against inference-noise level, one line per condition, CI error bars.

    ``summary`` needs ``condition, eval_noise, accuracy, ci_low, ci_high``.
    """
    plt, sns = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    conditions = list(dict.fromkeys(summary["condition"]))
    palette = dict(zip(conditions, sns.color_palette("colorblind", len(conditions))))
    offsets = _offsets(conditions, summary["eval_noise"])
    for cond in conditions:
        d = summary[summary["condition"] == cond].sort_values("eval_noise")
        x = d["eval_noise"].to_numpy() * 100 + offsets[cond]
        y = d["accuracy"].to_numpy() * 100
        err = [y - d["ci_low"].to_numpy() * 100, d["ci_high"].to_numpy() * 100 - y]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=cond, color=palette[cond])
    ax.set_xticks(sorted(summary["eval_noise"].unique() * 100))
    ax.set_xlabel("inference noise scale (%)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("Accuracy vs inference noise (95% CI)" if "ci_low" in summary else "Accuracy")
    ax.legend(title="condition")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def retention_figure(retention: pd.DataFrame, path: Path) -> Path:
    """Retention (noisy / clean accuracy) per condition, grouped by noise level, with CIs."""
    plt, sns = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    conditions = list(dict.fromkeys(retention["condition"]))
    levels = sorted(retention["eval_noise"].unique())
    palette = sns.color_palette("colorblind", len(conditions))
    width = 0.8 / max(len(conditions), 1)
    for i, cond in enumerate(conditions):
        d = retention[retention["condition"] == cond].set_index("eval_noise").reindex(levels)
        x = [j + (i - (len(conditions) - 1) / 2) * width for j in range(len(levels))]
        y = d["retention"].to_numpy() * 100
        err = [y - d["ci_low"].to_numpy() * 100, d["ci_high"].to_numpy() * 100 - y]
        ax.bar(x, y, width=width * 0.95, color=palette[i], label=cond)
        ax.errorbar(x, y, yerr=err, fmt="none", ecolor="black", capsize=3, linewidth=1)
    ax.axhline(100, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(levels)), [f"{lv * 100:g}% noise" for lv in levels])
    ax.set_ylabel("retention (% of clean accuracy)")
    ax.set_title("Retention under inference noise (bootstrap 95% CI)")
    # below the axes: above the bars it would hide the 100 % line and the tallest CIs
    ax.legend(title="condition", ncols=min(len(conditions), 4), fontsize="small",
              loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    # bars encode length: a truncated axis would exaggerate the differences
    ax.set_ylim(0.0, None)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _offsets(conditions: list[str], levels: pd.Series) -> dict[str, float]:
    # dodge overlapping error bars horizontally by a small fraction of the level spacing
    spread = (levels.max() - levels.min()) * 100 if len(levels) else 1.0
    step = 0.012 * (spread or 1.0)
    mid = (len(conditions) - 1) / 2
    return {c: (i - mid) * step for i, c in enumerate(conditions)}
