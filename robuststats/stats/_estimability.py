"""When a retention can be estimated at all, and the range an interval may take.

Retention is a ratio, ``R = Z̄/C̄`` (noisy over clean accuracy). Fieller (1954) showed that
the confidence set of a ratio at level ``1 − α`` is a bounded interval only when the
denominator is itself distinguishable from 0 at that level:

    g = (q · se(C̄) / C̄)² < 1

with ``q`` the two-sided critical value and ``se(C̄)`` the denominator's standard error.
When ``g ≥ 1`` the set is the whole line or the outside of an interval: the data are
consistent with a clean accuracy of 0, and so with any retention at all. A delta-method
interval then still prints two numbers (``[0.0, 16489390.7]``), which only looks like an
answer. The rule here reports such a retention as not estimable, with the reason.

``se(C̄)`` and ``q`` are those of the clean accuracy in the same design as the retention's
own interval: the crossed variance of the ``(seeds, items)`` clean outcomes and its
calibrated few-seed reference (:func:`~robuststats.stats.crossed_variance`; with one seed,
the item variance on ``n − 1`` df). ``g ≥ 1`` is the same as the raw-scale interval
``C̄ ± q·se`` reaching 0. For one seed of 0/1 outcomes it asks for more than about
``q²(1 − C̄)`` correct clean items (4 of 40 at 95 %).

:func:`clip_interval` keeps an interval inside what its quantity can take (accuracy in
[0, 1], an accuracy difference in [−1, 1], a retention at least 0). Cutting a confidence
interval to the parameter space keeps its coverage, since the true value lies inside the
space (Mandelkern 2002); the row says that it was cut.

References: Fieller EC (1954). Some problems in interval estimation. J R Stat Soc B
16:175–185. Franz VH (2007). Ratios: a short guide to confidence limits and proper use.
arXiv:0710.2024. Mandelkern M (2002). Setting confidence intervals for bounded parameters.
Stat Sci 17:149–172.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robuststats.stats._common import ConfidenceInterval

__all__ = ["RANGES", "Estimability", "clip_interval", "retention_estimability"]

#: the values each quantity can take (accuracy and its differences are shares, not %)
RANGES: dict[str, tuple[float, float]] = {
    "accuracy": (0.0, 1.0),
    "accuracy_difference": (-1.0, 1.0),
    "retention": (0.0, math.inf),
}


@dataclass(frozen=True)
class Estimability:
    """Whether a retention with these clean outcomes has a bounded interval (Fieller's
    ``g < 1``); ``reason`` says why not (empty when it does), to follow "not estimable: "."""

    estimable: bool
    g: float
    clean_accuracy: float
    reason: str = ""


def retention_estimability(clean: object, *, confidence_level: float = 0.95) -> Estimability:
    """Fieller's ``g`` of the clean accuracy behind a retention (see the module docstring).

    ``clean``: ``(n_seeds, n_items)`` clean outcomes in [0, 1] (a 1-D array is one seed).
    A clean accuracy of 0 has ``g = inf``; one with no spread above 0 has ``g = 0``.
    """
    from robuststats.stats._seed_random import crossed_variance

    c = np.atleast_2d(np.asarray(clean, dtype=float))
    mean = float(c.mean()) if c.size else 0.0
    if mean <= 0.0:
        return Estimability(False, math.inf, mean,
                            "no clean answer is correct, so retention is undefined")
    cv = crossed_variance(c)
    if cv.variance <= 0.0:
        return Estimability(True, 0.0, mean)
    q = cv.reference.critical(confidence_level)
    g = (q * math.sqrt(cv.variance) / mean) ** 2
    if g < 1.0:
        return Estimability(True, g, mean)
    return Estimability(
        False, g, mean,
        f"the clean accuracy, {100 * mean:.3g} %, cannot be told from 0 at "
        f"{100 * confidence_level:.4g} % (Fieller's g = {g:.3g} ≥ 1), so retention has no "
        "bounded interval")


def clip_interval(ci: ConfidenceInterval, quantity: str) -> tuple[ConfidenceInterval, bool]:
    """``ci`` cut to the range of ``quantity`` (:data:`RANGES`) and whether it was cut."""
    low, high = RANGES[quantity]
    cut = ConfidenceInterval(max(low, ci.low), min(high, ci.high))
    changed = bool(cut.low != ci.low or cut.high != ci.high) and not (
        math.isnan(ci.low) or math.isnan(ci.high))
    return (cut if changed else ci), changed
