"""Anytime-valid confidence sequences for a paired difference and a ratio of bounded means.

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

    K_t^±(m) = Π_{i≤t} (1 ± λ_i^±(m)·(z_i − m)),   K_t(m) = ½K_t^+(m) + ½K_t^−(m),

with the predictable plug-in bets ``λ_i = √(2 log(2/α) / (σ̂²_{i−1} · i · log(i + 1)))``,
``σ̂²_{i} = (¼ + Σ_{j≤i} (z_j − μ̂_j)²)/(i + 1)``, ``μ̂_i = (½ + Σ_{j≤i} z_j)/(i + 1)``,
truncated to ``λ_i^+ ≤ c/m`` and ``λ_i^− ≤ c/(1 − m)`` with ``c = ½``. ``K_t(m)``, the
even mix of the two one-sided processes, is a nonnegative martingale with mean 1 when ``m``
is the true mean (the bets are predictable: ``λ_i`` uses items before ``i``), so by Ville's
inequality
``C_t = {m : K_j(m) < 1/α for all j ≤ t}`` is a confidence sequence. ``m`` runs over a grid
of 2,001 points of [0, 1] (the reported bounds are grid points outside the set's edge:
conservative by at most 0.001 in ``δ``).

Ratio (retention ``ρ = μ_x/μ_y``, noisy over clean accuracy of one model), exactly, without
the delta method: for a candidate ``r ≥ 0``, ``w_i = x_i − r·y_i ∈ [−r, 1]`` has mean 0
exactly when ``r = ρ``; ``z_i(r) = (w_i + r)/(1 + r) ∈ [0, 1]`` then has mean
``m_0(r) = r/(1 + r)``, and the same capital process tests it (each candidate with its own
stream ``z(r)``, so its own plug-in variance). ``r`` runs over 0 to 2 in steps of 0.001,
geometric steps (1.6 %) up to 1,000, and ``r = ∞`` (``z = 1 − y``, ``m_0 = 1``: the
clean mean is 0). At ``r = 1``, ``z = (x − y + 1)/2`` and ``m_0 = ½``: the difference's
stream at ``δ = 0``. A set that reaches past 1,000 is reported unbounded above (``inf``):
with a clean accuracy near 0 no finite upper bound is valid.

Both are one loop (:func:`running_sets`): every candidate null is an affine stream
``z_i = a·x_i + b·y_i + c`` tested against its mean ``m``; a null every stream has
rejected is dropped from the loop (it can never come back), which leaves the others'
numbers unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from robuststats._validation import check_probability
from robuststats.errors import InputError

__all__ = ["ConfidenceSequence", "Nulls", "betting_confidence_sequence", "bounds",
           "difference_nulls", "ratio_bounds", "ratio_nulls", "retention_confidence_sequence",
           "running_sets"]

_GRID = 2001
_C = 0.5
#: the finite ratios tried: 0..2 by 0.001, then geometric to R_MAX (∞ is added)
R_MAX = 1000.0
_RATIOS = np.concatenate([np.arange(2001) / 1000.0, np.geomspace(2.0, R_MAX, 401)[1:]])


@dataclass(frozen=True)
class ConfidenceSequence:
    """A running confidence sequence for ``δ = mean(x − y)`` (or ``ρ = mean(x)/mean(y)``).

    Attributes
    ----------
    n : numpy.ndarray
        Items seen, ``1..N``.
    estimate : numpy.ndarray
        Running mean difference (or ratio of running means: ``inf`` while the clean sum is
        0 and the noisy one is not, NaN while both are 0).
    low, high : numpy.ndarray
        The sequence's bounds after each item (running intersection; a ratio's ``high`` is
        ``inf`` while the set is unbounded above).
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


@dataclass(frozen=True)
class Nulls:
    """Candidate nulls, each an affine stream ``z_i = a·x_i + b·y_i + c ∈ [0, 1]`` whose
    mean is ``m`` under that null (arrays of one length)."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    m: np.ndarray


def difference_nulls(m: np.ndarray) -> Nulls:
    """``z = (x − y + 1)/2`` against each mean ``m`` (``δ = 2m − 1``)."""
    m = np.asarray(m, dtype=float)
    half = np.full_like(m, 0.5)
    return Nulls(half, -half, half, m)


def ratio_nulls(r: np.ndarray) -> Nulls:
    """``z(r) = (x − r·y + r)/(1 + r)`` against ``r/(1 + r)``; ``r = inf`` is ``1 − y``
    against 1."""
    r = np.asarray(r, dtype=float)
    finite = np.isfinite(r)
    rr = np.where(finite, r, 0.0)
    share = np.where(finite, rr / (1.0 + rr), 1.0)
    return Nulls(np.where(finite, 1.0 / (1.0 + rr), 0.0), -share, share, share)


def _running(x: np.ndarray, y: np.ndarray, nulls: Nulls, alpha: float
             ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """After each item, ``(live, alive)``: the indices (ascending) of the nulls that some
    stream has not rejected, and ``(S, len(live))`` booleans of which each stream keeps. A
    null every stream has rejected stays rejected (running intersection), so it is dropped
    from the computation: the same numbers for the rest, at the cost of the live ones."""
    n_streams, n = x.shape
    live = np.arange(len(nulls.m))
    a, b, c, m = (v[None, :] for v in (nulls.a, nulls.b, nulls.c, nulls.m))
    shape = (n_streams, m.shape[1])
    log_plus, log_minus = np.zeros(shape), np.zeros(shape)
    total, var_sum = np.zeros(shape), np.zeros(shape)
    alive = np.ones(shape, dtype=bool)
    threshold = np.log(1.0 / alpha)
    with np.errstate(divide="ignore"):
        cap_plus = np.where(m > 0, _C / m, np.inf)
        cap_minus = np.where(m < 1, _C / (1.0 - m), np.inf)
    for i in range(1, n + 1):
        z = a * x[:, i - 1, None] + b * y[:, i - 1, None] + c
        sigma2 = (0.25 + var_sum) / i  # σ̂²_{i−1}
        lam = np.sqrt(2.0 * np.log(2.0 / alpha) / (sigma2 * i * np.log(i + 1.0)))
        step = z - m
        log_plus += np.log1p(np.minimum(lam, cap_plus) * step)
        log_minus += np.log1p(-np.minimum(lam, cap_minus) * step)
        alive &= np.logaddexp(log_plus, log_minus) + np.log(0.5) < threshold
        yield live, alive
        total += z
        mu = (0.5 + total) / (i + 1.0)  # μ̂_i, which includes z_i
        var_sum += (z - mu) ** 2
        keep = alive.any(axis=0)
        if not keep.all():
            live = live[keep]
            a, b, c, m, cap_plus, cap_minus = (v[:, keep] for v in (a, b, c, m, cap_plus,
                                                                   cap_minus))
            log_plus, log_minus, total, var_sum, alive = (
                v[:, keep] for v in (log_plus, log_minus, total, var_sum, alive))


def running_sets(x: np.ndarray, y: np.ndarray, nulls: Nulls, alpha: float
                 ) -> Iterator[np.ndarray]:
    """After each item, which nulls the capital process has not rejected: ``x``, ``y`` of
    shape ``(S, n)``; yields a new ``(S, G)`` boolean array (running intersection) for
    ``i = 1..n``."""
    for live, alive in _running(x, y, nulls, alpha):
        full = np.zeros((x.shape[0], len(nulls.m)), dtype=bool)
        full[:, live] = alive
        yield full


def _edges(x: np.ndarray, y: np.ndarray, nulls: Nulls, alpha: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """The first and last surviving null's index after each item, ``(S, n)`` each
    (−1 where none survives)."""
    n_streams, n = x.shape
    first, last = np.full((n_streams, n), -1), np.full((n_streams, n), -1)
    for i, (live, alive) in enumerate(_running(x, y, nulls, alpha)):
        some = alive.any(axis=1)
        if some.any():
            first[some, i] = live[np.argmax(alive, axis=1)][some]
            last[some, i] = live[len(live) - 1 - np.argmax(alive[:, ::-1], axis=1)][some]
    return first, last


def bounds(d: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Running bounds of ``S`` streams at once: ``d`` of shape ``(S, n)`` in [−1, 1];
    returns ``(low, high)``, each ``(S, n)`` (NaN once a stream's set is empty)."""
    d = np.asarray(d, dtype=float)
    grid = np.linspace(0.0, 1.0, _GRID)
    first, last = _edges(d, np.zeros_like(d), difference_nulls(grid), alpha)
    empty = first < 0
    low = np.where(empty, np.nan, grid[np.maximum(first - 1, 0)] * 2.0 - 1.0)
    high = np.where(empty, np.nan, grid[np.minimum(last + 1, _GRID - 1)] * 2.0 - 1.0)
    return low, high


def ratio_bounds(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Running bounds of ``μ_x/μ_y`` for ``S`` paired streams (``x``, ``y`` of shape
    ``(S, n)`` in [0, 1]); ``high`` is ``inf`` while the set reaches past ``R_MAX``, and both
    are NaN once a set is empty."""
    grid = np.append(_RATIOS, np.inf)
    first, last = _edges(np.asarray(x, dtype=float), np.asarray(y, dtype=float),
                         ratio_nulls(grid), alpha)
    empty = first < 0
    low = np.where(empty, np.nan, grid[np.maximum(first - 1, 0)])
    # the last finite ratio, or ∞, still alive: nothing between it and ∞ was tested
    unbounded = last >= len(_RATIOS) - 1
    high = np.where(empty, np.nan,
                    np.where(unbounded, np.inf, grid[np.minimum(last + 1, len(grid) - 1)]))
    return low, high


def _stream(values, name: str) -> np.ndarray:
    out = np.asarray(values, dtype=float)
    if out.ndim != 1 or len(out) == 0:
        raise InputError(f"`{name}` must be a non-empty 1-d sequence.")
    return out


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


def retention_confidence_sequence(noisy, clean, *, alpha: float = 0.05) -> ConfidenceSequence:
    """The confidence sequence of retention ``mean(noisy)/mean(clean)`` of one model over
    the items in stream order (``noisy[i]``, ``clean[i]``: its outcomes in [0, 1] on item
    ``i`` with and without noise). Exact for every ``r`` of the grid (module docstring);
    ``high`` is ``inf`` while the clean accuracy cannot be told from 0."""
    a = check_probability(alpha, "alpha")
    x, y = _stream(noisy, "noisy"), _stream(clean, "clean")
    if len(x) != len(y):
        raise InputError(f"`noisy` and `clean` must have the same length, got {len(x)} and "
                         f"{len(y)}.")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))) or min(x.min(), y.min()) < 0 \
            or max(x.max(), y.max()) > 1:
        raise InputError("`noisy` and `clean` outcomes must lie in [0, 1].")
    low, high = ratio_bounds(x[None, :], y[None, :], a)
    counts = np.arange(1, len(x) + 1)
    sx, sy = np.cumsum(x), np.cumsum(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = np.where(sy > 0, sx / np.where(sy > 0, sy, 1.0),
                            np.where(sx > 0, np.inf, np.nan))
    return ConfidenceSequence(counts, estimate, low[0], high[0], a,
                              method="betting confidence sequence of a ratio (x − r·y "
                                     "streams, Waudby-Smith & Ramdas 2023); this model, not "
                                     "its training procedure")
