"""Training curves of a study's models: the mean reward per step, one panel per condition,
one line per training seed (the ``grpo`` trainer's ``reward_curve``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from robuststats.errors import InputError
from robuststats.report.figures import _pyplot, _save

__all__ = ["reward_curves_figure"]


def reward_curves_figure(curves: pd.DataFrame, path: str | Path, *,
                         title: str = "GRPO reward per step") -> Path:
    """Plot ``curves`` (columns ``condition``, ``train_seed``, ``step``, ``reward``: the mean
    reward of the step's completions) to ``path``; thin lines are seeds, the thick line is
    their mean per step."""
    missing = {"condition", "train_seed", "step", "reward"} - set(curves.columns)
    if missing:
        raise InputError(f"`curves` lacks columns {sorted(missing)}.")
    if curves.empty:
        raise InputError("`curves` has no rows.")
    plt, sns = _pyplot()
    conditions = list(dict.fromkeys(curves["condition"]))
    palette = dict(zip(conditions, sns.color_palette("colorblind", len(conditions))))
    fig, axes = plt.subplots(1, len(conditions), figsize=(3.2 * len(conditions), 3.2),
                             sharey=True, squeeze=False)
    for ax, condition in zip(axes[0], conditions):
        part = curves[curves["condition"] == condition]
        for _, seed in part.groupby("train_seed"):
            ax.plot(seed["step"], seed["reward"], color=palette[condition], alpha=0.35, lw=1)
        mean = part.groupby("step")["reward"].mean()
        ax.plot(mean.index, mean.to_numpy(), color=palette[condition], lw=2.2)
        ax.set_title(f"{condition} ({part['train_seed'].nunique()} seeds)")
        ax.set_xlabel("GRPO step")
    axes[0][0].set_ylabel("mean reward of the step's completions")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, Path(path))
