"""P-values after a group-sequential study under the stage-wise ordering.

When a study may stop at any of ``K`` looks, the p-value of the look where it stopped,
computed as if that look were the only analysis, is too small. The stage-wise ordering
(Armitage 1957; Fairbanks & Madsen 1982, Biometrics 38:1057–1063; Jennison & Turnbull 2000,
*Group Sequential Methods with Applications to Clinical Trials*, §8.4) ranks outcomes first
by the look at which the boundary was crossed (earlier is more extreme) and then by the
statistic. For a study that stops at look ``k`` with statistic ``z`` on the verifying side,
the one-sided p-value is

    p = Σ_{j<k} P_0(Z_j ≥ b_j, a_i < Z_i < b_i for i < j)
        + P_0(Z_k ≥ z, a_i < Z_i < b_i for i < k),

the probability under the null of a result at least as extreme: crossing the upper bound at
an earlier look, or reaching look ``k`` and exceeding ``z`` there. Under a drift ``η`` (the
mean of the statistic at the last look) the same probability ``g(η)`` increases with ``η``;
the *median-unbiased* drift solves ``g(η) = ½`` (Jennison & Turnbull 2000, §8.4; Kim 1989,
Biometrika 76:255–263), and its estimate on the scale of the look is ``η̂√t_k``, against
the observed ``z``: at the first look the two are equal, later the median-unbiased one is
pulled toward the design's continuation region, which an early stop overshoots. It is at most the
α spent up to look ``k`` exactly when ``z ≥ b_k``, so it agrees with the boundaries' decision,
and it equals the one-look p-value at the first look. The probabilities come from the
recursion of :mod:`robuststats.stats.sequential._recursion`; checked against rpact's final
p-value (``getAnalysisResults``) in ``tests/stats/test_sequential_ordering.py``.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, special

from robuststats.stats.sequential._recursion import crossing

__all__ = ["median_unbiased_ratio", "stagewise_drift", "stagewise_pvalue"]

#: the smallest one-sided p-value turned into a statistic (``Φ⁻¹`` of 0 is infinite)
P_FLOOR = 1e-300


def stagewise_pvalue(fractions, upper, lower, look: int, p_tail: float) -> float:
    """The one-sided stage-wise p-value of a study stopped at ``look`` (1-based).

    ``fractions``, ``upper``, ``lower``: the design's information fractions and its
    continuation region ``(lower_j, upper_j)`` at each look (``±inf`` for none); only the
    looks before ``look`` enter. ``p_tail``: the one-look one-sided p-value at ``look``
    (its z-equivalent ``Φ⁻¹(1 − p_tail)`` is the statistic ``z``).
    """
    if look == 1:
        return float(p_tail)
    p = min(max(float(p_tail), P_FLOOR), 1.0)
    z = float(-special.ndtri(p)) if p < 1.0 else -np.inf
    return min(1.0, _as_extreme(fractions, upper, lower, look, z, 0.0))


def _as_extreme(fractions, upper, lower, look: int, z: float,  # type: ignore[no-untyped-def]
                eta: float) -> float:
    """``P_η`` of a result at least as extreme as ``(look, z)`` under the stage-wise
    ordering: an upper crossing before ``look``, or ``Z_look ≥ z`` on the paths that reach
    it."""
    k = look
    ups = np.r_[np.asarray(upper, dtype=float)[:k - 1], z]
    los = np.r_[np.asarray(lower, dtype=float)[:k - 1], -np.inf]
    fr = np.asarray(fractions, dtype=float)[:k]
    return float(crossing(fr, ups, los, eta).upper.sum())


def stagewise_drift(fractions, upper, lower, look: int, z: float, q: float = 0.5) -> float:
    """The drift ``η`` at which a result at least as extreme as ``(look, z)`` under the
    stage-wise ordering has probability ``q`` (``q = ½``: median-unbiased; ``α/2`` and
    ``1 − α/2``: the stage-wise confidence bounds)."""
    def g(eta: float) -> float:
        return _as_extreme(fractions, upper, lower, look, z, eta) - q

    centre = z / np.sqrt(float(np.asarray(fractions, dtype=float)[look - 1]))
    # a result beyond an earlier bound's reach is explained by a drift near that bound, so
    # the bracket spans 0 as well as the observed statistic
    return float(optimize.brentq(g, min(centre, 0.0) - 20.0, max(centre, 0.0) + 20.0,
                                 xtol=1e-10))


#: beyond this |z| the one-sided p-values behind a statistic have lost their resolution
#: (``1 − Φ(8)`` is 6e-16), so the ratio to it would not be the statistic's
MAX_Z = 8.0


def median_unbiased_ratio(fractions, upper, lower, look: int, z: float) -> float:
    """``η̂√t_k / z``: the factor that takes the observed distance of an estimate from the
    tested value to the median-unbiased one (1 at the first look; NaN at ``z = 0`` and
    beyond ``|z| = MAX_Z``). With a symmetric region (two-sided designs) a negative ``z``
    is ordered downward, by the mirror image."""
    if look == 1:
        return 1.0
    if not np.isfinite(z) or z == 0.0 or abs(z) > MAX_Z:
        return float("nan")
    k = look - 1
    if z < 0 and np.allclose(np.asarray(lower, dtype=float)[:k],
                             -np.asarray(upper, dtype=float)[:k]):
        z = -z
    eta = stagewise_drift(fractions, upper, lower, look, z)
    return float(eta * np.sqrt(float(np.asarray(fractions, dtype=float)[look - 1])) / z)
