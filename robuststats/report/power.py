"""The power plot: power against the number of items, one line per design.

``robuststats power --plot`` draws it from a tidy curve computed by the library
(:func:`robuststats.stats.power_curve`: one line per discordance π_D, or
:func:`robuststats.stats.power_seeds_curve`: one line per number of training seeds).
The figure format follows the file's suffix (:data:`PLOT_FORMATS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PLOT_FORMATS", "check_plot_path", "power_figure"]

#: figure formats the power plot writes, by the file's suffix (matplotlib's Agg backend)
PLOT_FORMATS = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")


def check_plot_path(path: str, option: str = "--plot") -> str:
    """``path`` if its suffix names a figure format and its folder is writable; else an
    InputError naming ``option``.

    Checked before anything is computed, so a bad name fails at once (no matplotlib import).
    """
    import os

    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        raise InputError(
            f"`{option}` must name a figure file ending in "
            f"{', '.join('.' + s for s in PLOT_FORMATS[:3])}, ... (the suffix sets the "
            f"format: {', '.join(PLOT_FORMATS)}), got {path!r}."
        )
    folder = Path(path).parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise InputError(f"`{option}` cannot write {path!r:.200}: {str(folder)!r:.200} is not "
                         "a writable directory.")
    return path


def power_figure(
    curve: pd.DataFrame,
    path: str | Path,
    *,
    x: str,
    hue: str,
    hue_title: str,
    target: float | None = None,
    pool_size: int | None = None,
    in_use: float | None = None,
    xlabel: str = "items",
    title: str = "",
) -> Path:
    """Write power against ``x``, one line per value of ``hue`` (seaborn, viridis).

    ``target`` draws the target power as a dashed line, ``pool_size`` the item pool as a
    dotted one (when it is inside the x range), and the ``hue`` value ``in_use`` is
    marked "(in use)" in the legend. A file that cannot be written is an InputError.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import seaborn as sns

    check_plot_path(str(path))
    if curve.empty:
        raise InputError("nothing to plot: no design in the curve gives a computable power.")

    def label(v: Any) -> str:
        mark = in_use is not None and abs(float(v) - float(in_use)) < 1e-6
        return f"{v:.3g}" + (" (in use)" if mark else "")

    data = curve.assign(**{hue_title: curve[hue].map(label)})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    sns.lineplot(data=data, x=x, y="power", hue=hue_title, ax=ax, palette="viridis")
    if target is not None:  # labelled: a dashed line alone does not say what it is
        ax.axhline(target, color="grey", linestyle="--", linewidth=1)
        ax.annotate(f"target power {target:g}", (1.0, target), xycoords=("axes fraction",
                    "data"), xytext=(-4, 3), textcoords="offset points", ha="right",
                    va="bottom", color="grey", fontsize=8, gid="target")
    if pool_size and pool_size <= float(curve[x].max()):
        ax.axvline(pool_size, color="firebrick", linestyle=":", linewidth=1)
        ax.text(pool_size, 0.03, f"item pool {pool_size} ", color="firebrick", rotation=90,
                ha="right", va="bottom")
    ax.legend(title=hue_title, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("power")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot write plot {str(path)!r}: {exc}") from exc
    finally:
        plt.close(fig)
    return Path(path)
