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
an earlier look, or reaching look ``k`` and exceeding ``z`` there. It is at most the
α spent up to look ``k`` exactly when ``z ≥ b_k``, so it agrees with the boundaries' decision,
and it equals the one-look p-value at the first look. The probabilities come from the
recursion of :mod:`robuststats.stats.sequential._recursion`; checked against rpact's final
p-value (``getAnalysisResults``) in ``tests/stats/test_sequential_ordering.py``.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from robuststats.stats.sequential._recursion import crossing

__all__ = ["stagewise_pvalue"]

_P_FLOOR = 1e-300


def stagewise_pvalue(fractions, upper, lower, look: int, p_tail: float) -> float:
    """The one-sided stage-wise p-value of a study stopped at ``look`` (1-based).

    ``fractions``, ``upper``, ``lower``: the design's information fractions and its
    continuation region ``(lower_j, upper_j)`` at each look (``±inf`` for none); only the
    looks before ``look`` enter. ``p_tail``: the one-look one-sided p-value at ``look``
    (its z-equivalent ``Φ⁻¹(1 − p_tail)`` is the statistic ``z``).
    """
    if look == 1:
        return float(p_tail)
    p = min(max(float(p_tail), _P_FLOOR), 1.0)
    z = float(-special.ndtri(p)) if p < 1.0 else -np.inf
    k = look
    ups = np.r_[np.asarray(upper, dtype=float)[:k - 1], z]
    los = np.r_[np.asarray(lower, dtype=float)[:k - 1], -np.inf]
    fr = np.asarray(fractions, dtype=float)[:k]
    return float(min(1.0, crossing(fr, ups, los, 0.0).upper.sum()))
