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

The rule is applied to each training seed over its items (the seed's trained model fixed,
``se`` the item standard error, ``q`` the t quantile on ``n − 1`` df): a retention is
estimable when every seed's clean accuracy has ``g < 1``. Per seed, because the
procedure's retention is built from the seeds' ratios (the log-scale influence values
``z/Z̄ − c/C̄`` of each seed) and a seed whose ratio is unbounded makes the whole estimate
arbitrary; and not on the crossed variance of ``C̄``, whose seed component moves the noisy
and the clean accuracy of a seed together: with 2 or 3 seeds it alone puts 0 inside the
clean accuracy's raw-scale interval (a clean accuracy of 70 % on 3 seeds × 300 items has
``g = 1.1``) while the seeds' ratios agree closely (retention 57 % [51 %, 63 %]), where
Fieller's set is unbounded for lack of power, not for lack of a denominator. For one seed
of 0/1 outcomes the rule asks for more than about ``q²(1 − C̄)`` correct clean items
(4 of 40 at 95 %).

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
from robuststats.stats._seed_random import crossed_variance

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
    """Fieller's ``g`` of each seed's clean accuracy behind a retention (see the module
    docstring); ``g`` is the largest over the seeds.

    ``clean``: ``(n_seeds, n_items)`` clean outcomes in [0, 1] (a 1-D array is one seed).
    A clean accuracy of 0 has ``g = inf``; one with no spread above 0 has ``g = 0``.
    """
    c = np.atleast_2d(np.asarray(clean, dtype=float))
    mean = float(c.mean()) if c.size else 0.0
    if mean <= 0.0:
        return Estimability(False, math.inf, mean,
                            "no clean answer is correct, so retention is undefined")
    gs = [_seed_g(row, confidence_level) for row in c]
    g = max(gs)
    if g < 1.0:
        return Estimability(True, g, mean)
    failing = [i for i, value in enumerate(gs) if value >= 1.0]
    worst = min(float(c[i].mean()) for i in failing)
    seeds = (f"{len(failing)} of {len(gs)} training seeds" if len(gs) > 1
             else "the training seed")
    return Estimability(
        False, g, mean,
        f"the clean accuracy of {seeds} (lowest {100 * worst:.3g} % of {c.shape[1]} items) "
        f"cannot be told from 0 at {100 * confidence_level:.4g} % (Fieller's g "
        f"{'= ' + format(g, '.3g') if math.isfinite(g) else 'infinite'} ≥ 1), so "
        "retention has no bounded interval")


def _seed_g(row: np.ndarray, level: float) -> float:
    """Fieller's ``g`` of one seed's clean accuracy over its items (t on ``n − 1`` df)."""
    p = float(row.mean())
    if p <= 0.0:
        return math.inf
    cv = crossed_variance(row[None, :])
    if cv.variance <= 0.0:
        return 0.0
    return (cv.reference.critical(level) * math.sqrt(cv.variance) / p) ** 2


def clip_interval(ci: ConfidenceInterval, quantity: str) -> tuple[ConfidenceInterval, bool]:
    """``ci`` cut to the range of ``quantity`` (:data:`RANGES`) and whether it was cut."""
    low, high = RANGES[quantity]
    cut = ConfidenceInterval(max(low, ci.low), min(high, ci.high))
    changed = bool(cut.low != ci.low or cut.high != ci.high) and not (
        math.isnan(ci.low) or math.isnan(ci.high))
    return (cut if changed else ci), changed
