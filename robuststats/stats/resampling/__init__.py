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

from robuststats._lazy import lazy_package

if TYPE_CHECKING:  # the public names, read by static analysers and by lazy_package
    from robuststats.stats.resampling._bootstrap import bootstrap_difference as bootstrap_difference
    from robuststats.stats.resampling._bootstrap import (
        bootstrap_retention_difference as bootstrap_retention_difference,
    )
    from robuststats.stats.resampling._bootstrap import degenerate_interval as degenerate_interval
    from robuststats.stats.resampling._bootstrap import fit_bootstrap as fit_bootstrap
    from robuststats.stats.resampling._bootstrap_ci import BootstrapFit as BootstrapFit
    from robuststats.stats.resampling._resample import (
        crossed_variance_ratio as crossed_variance_ratio,
    )
    from robuststats.stats.resampling._resample import resampled_totals as resampled_totals

__getattr__, __dir__ = lazy_package(globals())
