"""Lack of fit of a fitted error model: per site, measured against simulated, with intervals.

Per site t, for rel RMS (compared through its square, which adds over sources) and for WAPE
(the error's shape: a relative Gaussian makes an op's error proportional to each element, a
weight quantization does not): the ratio of the mean over items of the measured value to the
mean of the value simulated under the fitted spec, with a percentile bootstrap interval over
items (measured and simulated rows resampled together). A site *misfits* when an interval
lies entirely outside [1/(1 + tolerance), 1 + tolerance], or when it diverges where the
simulation puts no error at all (ratio ∞).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["CHECKED", "site_checks"]

#: the metrics compared per site
CHECKED = ("rel_rms", "wape")


def _ratio(num: np.ndarray, den: np.ndarray, power: int) -> np.ndarray:
    """(num / den)^(1/power): inf where only den is 0, NaN where both are."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (num / den) ** (1 / power)
    return np.where((den == 0) & (num == 0), np.nan, out)


def site_checks(measured: Mapping[str, np.ndarray], simulated: Mapping[str, np.ndarray], *,
                sites: Sequence[str], layers: Sequence[int], types: Sequence[str],
                tolerance: float, confidence_level: float, n_resamples: int, rng: Any
                ) -> tuple[pd.DataFrame, float]:
    """The per-site table (module docstring) and the RMS of the finite log ratios.

    ``measured`` and ``simulated`` map each of :data:`CHECKED` to ``(n_items, n_sites)``
    arrays with the same items in the same rows.
    """
    alpha = 1 - confidence_level
    ratios = {}
    for metric in CHECKED:
        a, s = measured[metric], simulated[metric]
        n = a.shape[0]
        power = 2 if metric == "rel_rms" else 1  # squares add; WAPE is a ratio of sums
        est = _ratio(np.nanmean(a ** power, axis=0), np.nanmean(s ** power, axis=0), power)
        gen = np.random.default_rng([rng, 1])
        reps = np.empty((n_resamples, a.shape[1]))
        for b in range(n_resamples):
            idx = gen.integers(0, n, n)
            reps[b] = _ratio(np.nanmean(a[idx] ** power, axis=0),
                             np.nanmean(s[idx] ** power, axis=0), power)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a site never simulated: NaN
            ratios[metric] = (est, np.nanquantile(reps, alpha / 2, axis=0),
                              np.nanquantile(reps, 1 - alpha / 2, axis=0),
                              np.nanmean(a, axis=0), np.nanmean(s, axis=0))
    band = (1 / (1 + tolerance), 1 + tolerance)
    rows = []
    for t, site in enumerate(sites):
        row: dict[str, Any] = {"site": site, "layer": layers[t], "module_type": types[t]}
        worst, worst_metric, misfit = 1.0, "rel_rms", False
        for metric in CHECKED:
            est, low, high, mean_a, mean_s = (float(v[t]) for v in ratios[metric])
            row.update({f"{metric}_measured": mean_a, f"{metric}_simulated": mean_s,
                        f"{metric}_ratio": est, f"{metric}_ratio_ci_low": low,
                        f"{metric}_ratio_ci_high": high})
            if est > 0 and not math.isnan(est) and abs(math.log(est)) > abs(math.log(worst)):
                worst, worst_metric = est, metric
            # measured where the model puts no error at all (est inf) misfits too
            misfit |= bool(est == math.inf or (math.isfinite(low) and (low > band[1]
                                                                        or high < band[0])))
        row.update(worst_metric=worst_metric, worst_ratio=worst,
                   abs_log_ratio=abs(math.log(worst)), misfit=misfit)
        rows.append(row)
    table = pd.DataFrame(rows)
    both = table[[f"{m}_ratio" for m in CHECKED]].to_numpy(float)
    finite = both[np.isfinite(both) & (both > 0)]
    rms_log = float(np.sqrt(np.mean(np.log(finite) ** 2))) if finite.size else math.nan
    return table, rms_log
