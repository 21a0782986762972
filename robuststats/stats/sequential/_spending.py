"""Lan–DeMets error-spending functions.

A spending function ``f(t; α)`` gives the share of the error rate ``α`` spent by
information fraction ``t ∈ [0, 1]``: non-decreasing, ``f(0) = 0``, ``f(1) = α``. Lan & DeMets
(1983), "Discrete sequential boundaries for clinical trials", Biometrika 70:659–663:

* O'Brien–Fleming-like (``obf``): ``f(t; α) = 2 − 2Φ(Φ⁻¹(1 − α/2)/√t)``; it spends almost
  nothing early and keeps the last boundary close to the fixed design's.
* Pocock-like (``pocock``): ``f(t; α) = α·log(1 + (e − 1)t)``; it spends evenly, so early
  looks stop more often and the last boundary is higher.

``α`` here is the error of one side (one tail); a two-sided symmetric design spends
``α/2`` on each tail with the same function (the convention of rpact's
``getDesignGroupSequential(sided = 2)`` and of Jennison & Turnbull 2000, ch. 7). The same
functions spend the type II error ``β`` of a futility bound (Pampallona, Tsiatis & Kim
2001, Drug Inf J 35:1113–1121; Jennison & Turnbull 2000, ch. 7).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from robuststats._validation import check_choice

__all__ = ["SPENDING_FUNCTIONS", "spent"]

SPENDING_FUNCTIONS = ("obf", "pocock")


def spent(spending: str, fractions: np.ndarray | list[float], alpha: float) -> np.ndarray:
    """Cumulative error spent ``f(t; α)`` at each information fraction (clipped to [0, 1]).

    >>> spent("pocock", [1.0], 0.025).round(6).tolist()
    [0.025]
    """
    name = check_choice(spending, "spending", SPENDING_FUNCTIONS)
    t = np.clip(np.asarray(fractions, dtype=float), 0.0, 1.0)
    if name == "obf":
        with np.errstate(divide="ignore"):
            z = special.ndtri(1.0 - alpha / 2.0) / np.sqrt(t)
        return np.where(t > 0, 2.0 - 2.0 * special.ndtr(z), 0.0)
    return alpha * np.log1p((np.e - 1.0) * t)
