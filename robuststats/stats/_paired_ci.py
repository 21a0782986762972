"""Confidence intervals and score tests for the difference of two paired proportions.

Notation (one 2×2 table of matched pairs, condition x in rows, y in columns)::

                 y correct   y wrong
    x correct        a          b
    x wrong          c          d

``n = a + b + c + d``; the estimand is ``δ = p_x − p_y = (b − c) / n``.

Methods
-------
* ``"tango"``: Tango (1998), Stat Med 17:891–908. Score test of H0: δ = δ0 with the
  restricted maximum-likelihood estimate of the cell probability ``p_c`` under H0; the
  interval is the set of δ0 not rejected. At δ0 = 0 the score statistic is McNemar's.
* ``"newcombe"``: Newcombe (1998), Stat Med 17:2635–2650, method 10: Wilson score
  intervals for the two marginal proportions combined by "square-and-add" with the
  phi-coefficient correction for their correlation.
* ``"wald"``: the simple asymptotic interval (Newcombe's method 1), for comparison only;
  it has zero width when there are no discordant pairs.

Reference values used in the tests come from Fagerland, Lydersen & Laake (2017),
"Statistical Analysis of Contingency Tables", Ch. 8 (Cavo et al. 2012 data).
"""

from __future__ import annotations

import math

from scipy import optimize, special

from robuststats._validation import check_choice, check_confidence_level
from robuststats.stats._common import ConfidenceInterval

__all__ = ["PAIRED_CI_METHODS", "paired_difference_ci", "tango_pvalue", "tango_statistic"]

PAIRED_CI_METHODS = ("newcombe", "tango", "wald")


def _z(confidence_level: float) -> float:
    return float(special.ndtri(0.5 + confidence_level / 2.0))


def tango_statistic(b: float, c: float, n: float, delta0: float) -> float:
    """Tango's (1998) score statistic Z(δ0) for H0: p_x − p_y = δ0 (eq. 5 there).

    The restricted MLE of the probability of the ``c`` cell under H0 is the positive root
    of ``2n q² + [(2n − b + c) δ0 − (b + c)] q − c δ0 (1 − δ0) = 0``; then
    ``Z = (b − c − n δ0) / sqrt(n (2 q + δ0 − δ0²))``. Z decreases in δ0.
    """
    if delta0 <= -1.0:
        return math.inf if b - c + n > 0 else 0.0
    if delta0 >= 1.0:
        return -math.inf if b - c - n < 0 else 0.0
    qa = 2.0 * n
    qb = (2.0 * n - b + c) * delta0 - (b + c)
    qc = -c * delta0 * (1.0 - delta0)
    disc = max(qb * qb - 4.0 * qa * qc, 0.0)
    q = (-qb + math.sqrt(disc)) / (2.0 * qa)
    num = b - c - n * delta0
    var = n * (2.0 * q + delta0 - delta0 * delta0)
    if var <= 0.0:
        # only reachable when the numerator is 0 too (b = c = 0 and δ0 = 0)
        return 0.0
    return num / math.sqrt(var)


def tango_pvalue(b: float, c: float, n: float, delta0: float, alternative: str) -> float:
    """P-value of Tango's score test of H0: δ = δ0 (normal reference distribution)."""
    check_choice(alternative, "alternative", ("two-sided", "greater", "less"))
    z = tango_statistic(b, c, n, delta0)
    if alternative == "greater":
        return float(special.ndtr(-z))
    if alternative == "less":
        return float(special.ndtr(z))
    return float(min(1.0, 2.0 * special.ndtr(-abs(z))))


def _tango_ci(b: float, c: float, n: float, confidence_level: float) -> ConfidenceInterval:
    z = _z(confidence_level)
    est = (b - c) / n
    eps = 1e-12

    def f_low(d: float) -> float:
        return tango_statistic(b, c, n, d) - z

    def f_high(d: float) -> float:
        return tango_statistic(b, c, n, d) + z

    lo_edge = -1.0 + eps
    hi_edge = 1.0 - eps
    low = lo_edge if f_low(lo_edge) <= 0 else optimize.brentq(f_low, lo_edge, est, xtol=1e-12)
    high = hi_edge if f_high(hi_edge) >= 0 else optimize.brentq(f_high, est, hi_edge, xtol=1e-12)
    return ConfidenceInterval(max(-1.0, low if low > lo_edge else -1.0),
                              min(1.0, high if high < hi_edge else 1.0))


def _wilson(x: float, n: float, z: float) -> tuple[float, float]:
    """Wilson (1927) score interval for a binomial proportion x / n."""
    p = x / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _newcombe_ci(a: float, b: float, c: float, d: float, confidence_level: float
                 ) -> ConfidenceInterval:
    n = a + b + c + d
    z = _z(confidence_level)
    p1 = (a + b) / n
    p2 = (a + c) / n
    l1, u1 = _wilson(a + b, n, z)
    l2, u2 = _wilson(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    # phi estimates the correlation of the two marginal proportions. Newcombe (1998) sets it
    # to 0 when a margin is empty and shrinks a positive ad − bc by n/2 (truncated at 0);
    # Fagerland, Lydersen & Laake (2017, Sec. 8.5) use the same rule.
    cross = a * d - b * c
    if margins == 0:
        phi = 0.0
    elif cross > n / 2.0:
        phi = (cross - n / 2.0) / math.sqrt(margins)
    elif cross >= 0.0:
        phi = 0.0
    else:
        phi = cross / math.sqrt(margins)
    est = p1 - p2
    dl = math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    du = math.sqrt(max((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2, 0.0))
    return ConfidenceInterval(max(-1.0, est - dl), min(1.0, est + du))


def _wald_ci(b: float, c: float, n: float, confidence_level: float) -> ConfidenceInterval:
    z = _z(confidence_level)
    est = (b - c) / n
    se = math.sqrt(max((b + c) / n - est * est, 0.0) / n)
    return ConfidenceInterval(max(-1.0, est - z * se), min(1.0, est + z * se))


def paired_difference_ci(a: float, b: float, c: float, d: float, *, confidence_level: float,
                         method: str) -> ConfidenceInterval:
    """Two-sided interval for ``p_x − p_y = (b − c) / n`` (first minus second) from a
    paired 2×2 table. Callers validate the counts; ``method`` and the level are checked."""
    check_choice(method, "method", PAIRED_CI_METHODS)
    confidence_level = check_confidence_level(confidence_level)
    n = a + b + c + d
    if method == "tango":
        return _tango_ci(b, c, n, confidence_level)
    if method == "newcombe":
        return _newcombe_ci(a, b, c, d, confidence_level)
    return _wald_ci(b, c, n, confidence_level)
