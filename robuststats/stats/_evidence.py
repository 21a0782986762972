"""Evidence for one hypothesis: an estimate of ``a − b`` and intervals at any level.

An :class:`Evidence` knows how to produce its two-sided interval at any confidence level
and how to invert it: ``tails(v) = (α_low, α_high)`` where the one-sided lower bound
exceeds ``v`` iff α > α_low and the upper bound falls below ``v`` iff α > α_high. The
verdict logic in :mod:`._hypotheses` turns these into p-values that agree exactly with
the intervals, so a multiplicity adjustment of the p-values corresponds to an adjusted
interval level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scipy import special

from robuststats.stats._common import ConfidenceInterval
from robuststats.stats._paired_ci import paired_difference_ci, tango_statistic
from robuststats.stats.resampling import BootstrapFit

__all__ = ["Evidence", "bootstrap_evidence", "normal_evidence", "tango_evidence"]


@dataclass(frozen=True)
class Evidence:
    estimate: float
    interval: Callable[[float], ConfidenceInterval]
    tails: Callable[[float], tuple[float, float]]
    method: str
    detail: str
    #: why there is no estimate (the verdict's reason), when there is none
    missing: str = ""


def tango_evidence(a: int, b: int, c: int, d: int, detail: str) -> Evidence:
    """Tango (1998) score interval and test for ``p_x − p_y`` from one paired table."""
    n = a + b + c + d

    def interval(level: float) -> ConfidenceInterval:
        return paired_difference_ci(a, b, c, d, confidence_level=level, method="tango")

    def tails(value: float) -> tuple[float, float]:
        z = tango_statistic(b, c, n, value)
        return float(special.ndtr(-z)), float(special.ndtr(z))

    return Evidence((b - c) / n, interval, tails, "Tango score test and interval", detail)


def bootstrap_evidence(fit: BootstrapFit, method: str, detail: str) -> Evidence:
    """Evidence from a bootstrap fit (any interval method of :class:`BootstrapFit`)."""
    return Evidence(fit.estimate, fit.interval, fit.tails, method, detail)


def normal_evidence(estimate: float, half_width: float, level: float, method: str,
                    detail: str) -> Evidence:
    """Normal-shaped evidence with the given half-width at ``level`` (degenerate data)."""
    z_ref = float(special.ndtri(0.5 + level / 2.0))
    se = half_width / z_ref

    def interval(lvl: float) -> ConfidenceInterval:
        z = float(special.ndtri(0.5 + lvl / 2.0))
        return ConfidenceInterval(estimate - z * se, estimate + z * se)

    def tails(value: float) -> tuple[float, float]:
        low = float(special.ndtr((value - estimate) / se))
        return low, 1.0 - low

    return Evidence(estimate, interval, tails, method, detail)
