"""Resampling: the two-way bootstrap of seeds and items and its intervals.

``_resample`` draws the resamples (seeds and items resampled independently, Owen 2007) as
integer totals, ``_bootstrap_ci`` turns a fitted bootstrap into percentile and BCa
intervals, ``_bootstrap`` holds the public ``bootstrap_*`` functions. The public names are
exported by :mod:`robuststats.stats`; the names exported here are the ones the rest of
``robuststats.stats`` builds on (the hypotheses' evidence, the critical threshold's
interval, the seed calibration). They load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "BootstrapFit": "robuststats.stats.resampling._bootstrap_ci",
    "bootstrap_difference": "robuststats.stats.resampling._bootstrap",
    "bootstrap_retention_difference": "robuststats.stats.resampling._bootstrap",
    "crossed_variance_ratio": "robuststats.stats.resampling._resample",
    "degenerate_interval": "robuststats.stats.resampling._bootstrap",
    "fit_bootstrap": "robuststats.stats.resampling._bootstrap",
    "resampled_totals": "robuststats.stats.resampling._resample",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the real names
    from robuststats.stats.resampling._bootstrap import (  # noqa: F401
        bootstrap_difference,
        bootstrap_retention_difference,
        degenerate_interval,
        fit_bootstrap,
    )
    from robuststats.stats.resampling._bootstrap_ci import BootstrapFit  # noqa: F401
    from robuststats.stats.resampling._resample import (  # noqa: F401
        crossed_variance_ratio,
        resampled_totals,
    )

__getattr__, __dir__ = lazy_exports("robuststats.stats.resampling", _EXPORTS, globals())
