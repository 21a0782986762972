"""Figures of a search (matplotlib, Agg): optimisation history, per-layer scale profile and,
for a multi-objective search, the Pareto front."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from robuststats.search._spec import SearchSpec

__all__ = ["write_figures"]

_DPI = 120


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def write_figures(directory: Path, spec: SearchSpec, trials: pd.DataFrame,
                  profile: pd.DataFrame, base_scale: float) -> list[str]:
    """Write the figures; returns their paths relative to the version directory."""
    directory.mkdir(parents=True, exist_ok=True)
    done = trials[trials["state"] == "COMPLETE"]
    written = []
    if not done.empty:
        written.append(_history(directory, spec, done))
    if not profile.empty:
        written.append(_profile(directory, spec, profile, base_scale))
    if spec.search.multi_objective and not done.empty:
        written.append(_pareto(directory, spec, done))
    return [f"figures/{name}" for name in written]


def _history(directory: Path, spec: SearchSpec, done: pd.DataFrame) -> str:
    plt = _pyplot()
    s = spec.search
    fig, ax = plt.subplots(figsize=(7, 4))
    x = done["number"].to_numpy()
    if s.objective == "tolerance":
        y, label = done["budget"].astype(float).to_numpy(), "noise budget (geometric mean scale)"
        feasible = done["feasible"].fillna(False).astype(bool).to_numpy()
        if feasible.any():  # no legend entry for what is not drawn
            ax.scatter(x[feasible], y[feasible], s=18, color="tab:blue",
                       label=f"drop ≤ {s.bound:g}")
        if (~feasible).any():
            ax.scatter(x[~feasible], y[~feasible], s=18, color="tab:red", marker="x",
                       label=f"drop > {s.bound:g}")
        best = np.maximum.accumulate(np.where(feasible, y, -np.inf))
    else:
        y = done["value_0"].astype(float).to_numpy()
        label = f"noisy {s.metric} (search items)"
        ax.scatter(x, y, s=18, color="tab:blue", label="trial")
        best = np.maximum.accumulate(y)
    ok = np.isfinite(best)
    if ok.any():
        ax.step(x[ok], best[ok], where="post", color="black", lw=1, label="best so far")
    for _, r in done[done["baseline"].notna()].iterrows():
        value = r["budget"] if s.objective == "tolerance" else r["value_0"]
        ax.annotate(str(r["baseline"]), (r["number"], float(value)), fontsize=8,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("trial")
    ax.set_ylabel(label)
    ax.set_title(f"{spec.name}: optimisation history (search values are optimistic)",
                 fontsize=10)
    return _save(plt, fig, ax, directory, "history.png")


def _profile(directory: Path, spec: SearchSpec, profile: pd.DataFrame,
             base_scale: float) -> str:
    plt = _pyplot()
    fig = _profile_figure(plt, spec, profile, base_scale)
    return _save(plt, fig, fig.axes[0], directory, "layer_profile.png")


def _profile_figure(plt: Any, spec: SearchSpec, profile: pd.DataFrame,
                    base_scale: float) -> Any:
    """Each configuration's scale multiplier per layer (block) as markers joined by a line,
    dodged side by side, on a log axis (a multiplier is a ratio; bars on a log axis would
    start at an arbitrary floor); the right axis reads the absolute noise scale."""
    params = list(dict.fromkeys(profile["param"]))
    configs = list(dict.fromkeys(profile["config"]))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(params) + 3.5), 4.2))
    pos = np.arange(len(params))
    width = 0.5 / max(1, len(configs))
    markers = "osD^vP*X"
    for i, name in enumerate(configs):
        sub = profile[profile["config"] == name].set_index("param").reindex(params)
        ax.plot(pos + (i - (len(configs) - 1) / 2) * width,
                sub["multiplier"].to_numpy(dtype=float), marker=markers[i % len(markers)],
                markersize=7, lw=1.2, label=name, gid=f"profile:{name}")
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_yscale("log")
    values = profile["multiplier"].to_numpy(dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if values.size:  # room around the extremes, 1 always in view
        low, high = min(values.min(), 1.0), max(values.max(), 1.0)
        ax.set_ylim(low / 1.4, high * 1.4)
    ax.set_xticks(pos, params, rotation=45 if len(params) > 6 else 0, ha="right"
                  if len(params) > 6 else "center", fontsize=8)
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")  # 2, not 2×10⁰
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel(f"{spec.search.space}")
    ax.set_ylabel("scale multiplier (log; 1 = the uniform scale)")
    if base_scale > 0:
        right = ax.secondary_yaxis("right", functions=(lambda m: m * base_scale,
                                                       lambda s: s / base_scale))
        right.set_ylabel(f"noise scale (multiplier × {base_scale:g})")
        right.yaxis.set_major_formatter(plain)
        right.yaxis.set_minor_formatter(plain)
    ax.set_title(f"{spec.name}: per-{spec.search.space} noise scale profile", fontsize=10)
    return fig


def _pareto(directory: Path, spec: SearchSpec, done: pd.DataFrame) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    b = done["value_1"].astype(float)
    a = done["value_0"].astype(float)
    front = done["pareto"].astype(bool)
    ax.scatter(b[~front], a[~front], s=16, color="tab:gray", label="trial")
    order = np.argsort(b[front].to_numpy())
    ax.plot(b[front].to_numpy()[order], a[front].to_numpy()[order], "o-", color="tab:blue",
            ms=5, label="Pareto front")
    ax.set_xlabel("noise budget (geometric mean scale)")
    metric = "accuracy" if spec.search.objective == "tolerance" else spec.search.metric
    ax.set_ylabel(f"noisy {metric} (search items, optimistic)")
    ax.set_title(f"{spec.name}: {metric} vs noise budget", fontsize=10)
    return _save(plt, fig, ax, directory, "pareto.png")


def _save(plt: Any, fig: Any, ax: Any, directory: Path, name: str) -> str:
    """Legend, layout, ``directory/name`` at the figures' resolution; the figure closed."""
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(directory / name, dpi=_DPI)
    plt.close(fig)
    return name
