"""Anytime-valid confidence sequences for a paired difference of bounded outcomes.

For one fixed pair of models evaluated on a stream of items, ``d_i = x_i − y_i ∈ [−1, 1]``
(0/1 correctness or scores in [0, 1]). The confidence sequence ``C_1 ⊇ … ⊇ C_n`` covers the
mean difference ``δ`` *at every item count at once* with probability ``1 − α``: an evaluation
may be watched item by item and stopped whenever the interval decides, without any
correction (Howard, Ramdas, McAuliffe & Sekhon 2021, Ann. Stat. 49:1055–1080). It is a
statement about these two trained models on this item distribution, not about the training
procedures: with several training seeds, the seed-random t of a study answers that.

Construction: the hedged capital process of Waudby-Smith & Ramdas (2023, "Estimating means
of bounded random variables by betting", JRSS B 86:1–27, §4), applied to
``z_i = (d_i + 1)/2 ∈ [0, 1]`` with mean ``m = (δ + 1)/2``. For each candidate ``m``,

    K_t^±(m) = Π_{i≤t} (1 ± λ_i^±(m)·(z_i − m)),   K_t(m) = max(½K_t^+(m), ½K_t^−(m)),

with the predictable plug-in bets ``λ_i = √(2 log(2/α) / (σ̂²_{i−1} · i · log(i + 1)))``,
``σ̂²_{i} = (¼ + Σ_{j≤i} (z_j − μ̂_j)²)/(i + 1)``, ``μ̂_i = (½ + Σ_{j≤i} z_j)/(i + 1)``,
truncated to ``λ_i^+ ≤ c/m`` and ``λ_i^− ≤ c/(1 − m)`` with ``c = ½``. ``K_t(m)`` is at
most ``½K_t^+(m) + ½K_t^−(m)``, a nonnegative martingale with mean 1 when ``m`` is the true
mean (the bets are predictable: ``λ_i`` uses items before ``i``), so by Ville's inequality
``C_t = {m : K_j(m) < 1/α for all j ≤ t}`` is a confidence sequence. ``m`` runs over a grid
of 2,001 points of [0, 1] (the reported bounds are grid points outside the set's edge:
conservative by at most 0.001 in ``δ``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robuststats._validation import check_probability
from robuststats.errors import InputError

__all__ = ["ConfidenceSequence", "betting_confidence_sequence", "bounds"]

_GRID = 2001
_C = 0.5


@dataclass(frozen=True)
class ConfidenceSequence:
    """A running confidence sequence for ``δ = mean(x − y)``.

    Attributes
    ----------
    n : numpy.ndarray
        Items seen, ``1..N``.
    estimate : numpy.ndarray
        Running mean difference.
    low, high : numpy.ndarray
        The sequence's bounds after each item (running intersection).
    alpha : float
    method : str
    """

    n: np.ndarray
    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    alpha: float
    method: str = ("betting confidence sequence (Waudby-Smith & Ramdas 2023, hedged capital, "
                   "predictable plug-in); these models, not training procedures")

    def first_excluding(self, value: float) -> int | None:
        """The first item count at which the sequence excludes ``value`` (None: never)."""
        out = np.flatnonzero((self.low > value) | (self.high < value))
        return int(self.n[out[0]]) if len(out) else None


def betting_confidence_sequence(x, y=None, *, alpha: float = 0.05) -> ConfidenceSequence:
    """The confidence sequence of ``mean(x − y)`` over the items in stream order.

    ``x``, ``y``: outcomes in [0, 1] of the two models on the same items, in the order
    they were evaluated (or ``x`` alone: differences in [−1, 1]).
    """
    a = check_probability(alpha, "alpha")
    d = np.asarray(x, dtype=float) if y is None else \
        np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    if d.ndim != 1 or len(d) == 0:
        raise InputError("`x` and `y` must be non-empty 1-d sequences of the same length.")
    if not np.all(np.isfinite(d)) or d.min() < -1 or d.max() > 1:
        raise InputError("outcomes must lie in [0, 1] (differences in [-1, 1]).")
    low, high = bounds(d[None, :], a)
    counts = np.arange(1, len(d) + 1)
    return ConfidenceSequence(counts, np.cumsum(d) / counts, low[0], high[0], a)


def bounds(d: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Running bounds of ``S`` streams at once: ``d`` of shape ``(S, n)`` in [−1, 1];
    returns ``(low, high)``, each ``(S, n)`` (NaN once a stream's set is empty)."""
    z = (d + 1.0) / 2.0
    n_streams, n = z.shape
    m = np.linspace(0.0, 1.0, _GRID)[None, :]
    log_plus = np.zeros((n_streams, _GRID))
    log_minus = np.zeros((n_streams, _GRID))
    alive = np.ones((n_streams, _GRID), dtype=bool)
    threshold = np.log(1.0 / alpha)
    low, high = np.full((n_streams, n), np.nan), np.full((n_streams, n), np.nan)
    total, var_sum = np.zeros(n_streams), np.zeros(n_streams)
    with np.errstate(divide="ignore"):
        cap_plus = np.where(m > 0, _C / m, np.inf)
        cap_minus = np.where(m < 1, _C / (1.0 - m), np.inf)
    index = np.arange(_GRID)
    for i in range(1, n + 1):
        sigma2 = (0.25 + var_sum) / i  # σ̂²_{i−1}
        lam = np.sqrt(2.0 * np.log(2.0 / alpha) / (sigma2 * i * np.log(i + 1.0)))[:, None]
        step = z[:, i - 1, None] - m
        log_plus += np.log1p(np.minimum(lam, cap_plus) * step)
        log_minus += np.log1p(-np.minimum(lam, cap_minus) * step)
        alive &= np.logaddexp(log_plus, log_minus) + np.log(0.5) < threshold
        some = alive.any(axis=1)
        first = np.where(alive, index, _GRID).min(axis=1)
        last = np.where(alive, index, -1).max(axis=1)
        grid = m[0]
        low[some, i - 1] = grid[np.maximum(first[some] - 1, 0)] * 2.0 - 1.0
        high[some, i - 1] = grid[np.minimum(last[some] + 1, _GRID - 1)] * 2.0 - 1.0
        total += z[:, i - 1]
        mu = (0.5 + total) / (i + 1.0)  # μ̂_i, which includes z_i
        var_sum += (z[:, i - 1] - mu) ** 2
    return low, high
