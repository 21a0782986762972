"""The exact unconditional power of McNemar's tests and the sample size it needs.

The number of discordant pairs among ``n`` is ``D ~ Binomial(n, π_D)``; given ``D = d``
the count favouring the worse condition is ``Binomial(d, 1 − q)`` with
``q = (π_D + |δ|) / (2 π_D)`` (notation of :mod:`._formulas`), and each test rejects on
the counts of :func:`critical_counts`. The power ``Σ_d P(D = d) · P(reject | d)`` is summed
without approximation (Suissa & Shuster 1991; Fagerland, Lydersen & Laake 2013). As in
:mod:`._formulas`, ``n`` is the effective number of independent pairs.

The sums use :mod:`scipy.special`'s binomial distribution functions, never
:mod:`scipy.stats` (0.6 s to import).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import TYPE_CHECKING

from robuststats.stats.power._formulas import connor_n, z_upper

if TYPE_CHECKING:
    import numpy as np

__all__ = ["EXACT_TESTS", "critical_counts", "exact_n", "exact_power"]

#: McNemar test variants whose exact unconditional power is computed (the names of
#: :func:`robuststats.stats.mcnemar`'s ``method``)
EXACT_TESTS = ("exact", "midp", "asymptotic", "asymptotic-cc")

# Binomial(n, π_D) mass outside [ppf(ε), isf(ε)] is below 2ε: dropping it changes the
# unconditional power by less than 1e-12 and keeps the sum over d to a few sd wide.
_TAIL = 1e-13
# The exact test rejects when P(X ≤ k) ≤ α/sides; the relative slack absorbs rounding in
# the binomial cdf when α hits a cdf value exactly (R's binom.test uses 1 + 1e-7).
_REL_TOL = 1e-9
_STANDARD = NormalDist()


def _binom_cdf(k: np.ndarray, n: np.ndarray | int, p: float) -> np.ndarray:
    """P(X ≤ k), X ~ Binomial(n, p), for integer arrays ``k`` (0 below 0, 1 at n and above)."""
    import numpy as np
    from scipy import special

    k = np.asarray(k, dtype=np.int64)
    n_arr = np.broadcast_to(np.asarray(n, dtype=np.int64), k.shape)
    inside = special.bdtr(np.clip(k, 0, n_arr), n_arr, p)
    return np.where(k < 0, 0.0, np.where(k >= n_arr, 1.0, inside))


def _binom_quantile(level: float, n: np.ndarray | int, p: float, *,
                    normal_start: bool = False) -> np.ndarray:
    """Smallest integer k with P(X ≤ k) ≥ ``level`` (``scipy.stats.binom.ppf``).

    The search starts from ``bdtrik``'s continuous solution, or, with ``normal_start``,
    from the normal approximation (``bdtrik`` costs about 50 µs a value; the normal start
    is within a few steps of the answer except in far tails, where ``bdtrik`` takes over).
    """
    import numpy as np
    from scipy import special

    n_arr = np.atleast_1d(np.asarray(n, dtype=float))
    if normal_start:
        mean, sd = n_arr * p, np.sqrt(n_arr * p * (1.0 - p))
        start = np.floor(mean + _STANDARD.inv_cdf(level) * sd)
        k = np.clip(start, 0, n_arr).astype(np.int64)
        k, done = _step_to_quantile(k, level, n_arr, p, steps=8)
        if done.all():
            return k
        rest = ~done
        k[rest] = _binom_quantile(level, n_arr[rest], p)
        return k
    with np.errstate(invalid="ignore"):
        start = special.bdtrik(level, n_arr, p)  # continuous solution; NaN at the edges
    k = np.clip(np.nan_to_num(np.floor(start), nan=0.0), 0, n_arr).astype(np.int64)
    # the continuous inverse is only a start: step to the exact integer quantile
    return _step_to_quantile(k, level, n_arr, p, steps=64)[0]


def _step_to_quantile(k: np.ndarray, level: float, n: np.ndarray, p: float, *,
                      steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Step each ``k`` by ±1 towards the integer quantile; also say which arrived."""
    import numpy as np

    for _ in range(steps):
        up = _binom_cdf(k, n, p) < level
        down = (k > 0) & (_binom_cdf(k - 1, n, p) >= level)
        if not up.any() and not down.any():
            return k, np.ones(k.shape, dtype=bool)
        k = k + up.astype(np.int64) - down.astype(np.int64)
    up = _binom_cdf(k, n, p) < level
    down = (k > 0) & (_binom_cdf(k - 1, n, p) >= level)
    return k, ~(up | down)


def critical_counts(d: np.ndarray, alpha: float, sides: int, test: str = "exact") -> np.ndarray:
    """Largest count ``c_d`` of pairs favouring the worse condition that still rejects; −1 if none.

    With ``d`` discordant pairs, ``w`` of them favouring the worse condition and ``d − w``
    the better one, each test rejects (in the better condition's direction) exactly when
    ``w ≤ c_d``:

    - ``"exact"``: binomial test, ``P(X ≤ w) ≤ α/s`` for ``X ~ Binomial(d, ½)``. As
      Binomial(d, ½) is symmetric, the two-sided p-value (twice the smaller tail, or R
      ``binom.test``'s sum of outcomes no more likely) rejects exactly when either count
      is ≤ ``c_d`` at ``α/2``.
    - ``"midp"``: mid-p test, ``P(X ≤ w) − ½·P(X = w) ≤ α/s`` (Fagerland, Lydersen & Laake
      2013).
    - ``"asymptotic"``: ``z = (d − 2w)/√d ≥ z_{α/s}`` (McNemar 1947, no correction), i.e.
      ``w ≤ (d − z√d)/2``.
    - ``"asymptotic-cc"``: with Edwards' continuity correction, ``(d − 2w − 1)/√d ≥ z``.
    """
    import numpy as np

    d = np.asarray(d)
    level = alpha / sides
    if test in ("exact", "midp"):
        # smallest k with F(k) ≥ level; the rejection bound is that k or the one below
        k = _binom_quantile(level, d, 0.5, normal_start=True)
        tail = _binom_cdf(k, d, 0.5)
        if test == "midp":
            tail = (tail + _binom_cdf(k - 1, d, 0.5)) / 2.0  # F(k) − ½·P(X = k)
        return np.where(tail <= level * (1 + _REL_TOL), k, k - 1)
    z = z_upper(level)
    shift = 1.0 if test == "asymptotic-cc" else 0.0
    with np.errstate(invalid="ignore"):
        bound = np.floor((d - shift - z * np.sqrt(d)) / 2.0 + 1e-12)
    # no discordant pair: the statistic is undefined and the test never rejects
    return np.where(d > 0, np.maximum(bound, -1.0), -1.0)


def exact_power(
    n: int, discordance: float, effect: float, alpha: float, sides: int, test: str = "exact"
) -> float:
    """Exact unconditional power of a McNemar test (``test``: see :func:`critical_counts`).

    The number of discordant pairs is ``D ~ Binomial(n, π_D)``; given ``D = d`` the count
    favouring the worse condition is ``Binomial(d, 1 − q)``, and the test rejects on the
    counts found by :func:`critical_counts`. The power ``Σ_d P(D = d) · P(reject | d)`` is
    summed without approximation (Suissa & Shuster 1991; Fagerland, Lydersen & Laake
    2013). For ``test="exact"`` this is R ``MESS::power_mcnemar_test(method = "exact")``
    and G*Power's exact McNemar test with α/2 assigned to each side.

    Suissa, S. & Shuster, J. J. (1991). The 2 × 2 matched-pairs trial: exact unconditional
    design and analysis. *Biometrics* 47(2), 361–372.
    """
    import numpy as np

    n = int(n)
    if n < 1:
        return 0.0
    q = (discordance + abs(effect)) / (2.0 * discordance)
    lo = int(_binom_quantile(_TAIL, n, discordance)[0])
    hi = int(_binom_quantile(1.0 - _TAIL, n, discordance)[0])
    d = np.arange(max(lo, 0), min(hi, n) + 1)
    # P(D = d) from the ratios P(d + 1)/P(d) = (n − d)/(d + 1) · π/(1 − π), summed in logs
    # and normalised over the window (whose mass is 1 − 2e-13): exact to ~1e-12 at any n,
    # where differences of cdfs lose every digit once n reaches 10^8
    ratio = np.log((n - d[:-1]) / (d[:-1] + 1.0)) + math.log(discordance / (1.0 - discordance))
    log_weight = np.concatenate(([0.0], np.cumsum(ratio)))
    weight = np.exp(log_weight - log_weight.max())
    weight /= weight.sum()
    c = critical_counts(d, alpha, sides, test)
    # P(count favouring the worse condition ≤ c), that count ~ Binomial(d, 1 − q)
    conditional = _binom_cdf(c, d, 1.0 - q)
    if sides == 2:
        conditional = conditional + _binom_cdf(c, d, q)
    return float(np.sum(weight * conditional))


def exact_n(
    power: float,
    discordance: float,
    effect: float,
    alpha: float,
    sides: int,
    test: str = "exact",
    *,
    max_n: int = 10**7,
) -> int | None:
    """Smallest effective n at which the exact unconditional power crosses ``power``.

    Exact power is not strictly monotone in n (the saw-tooth of discrete tests; Chernick &
    Liu 2002, *Am. Stat.* 56, 149–155), but summing over the Binomial(n, π_D) number of
    discordant pairs smooths it to ripples far below 0.01; the n returned has
    ``power(n) ≥ target > power(n − 1)``. The search brackets the crossing from Connor's
    n (growing the bracket by 5 %, then doubling) and closes the bracket by interpolation
    in √n, where power is close to linear, falling back to bisection whenever an
    interpolated step does not halve it: about 6 evaluations instead of 20. ``None`` when
    no n up to ``max_n`` reaches the target.
    """
    def power_at(n: int) -> float:
        return exact_power(n, discordance, effect, alpha, sides, test)

    start = connor_n(power, discordance, effect, alpha, sides)
    if not start <= max_n:
        return None
    guess = min(max(1, math.ceil(start)), max_n)
    p_guess = power_at(guess)
    if p_guess >= power:
        hi, p_hi, lo, p_lo = guess, p_guess, guess, p_guess
        while lo > 0 and p_lo >= power:  # move down until below the target (power(0) = 0)
            hi, p_hi = lo, p_lo
            lo = int(lo / 1.05) if lo > 20 else lo - 1
            p_lo = power_at(lo) if lo > 0 else 0.0
    else:
        lo, p_lo, hi, p_hi = guess, p_guess, guess, p_guess
        growth = 1.05
        while p_hi < power:
            if hi >= max_n:
                return None
            lo, p_lo = hi, p_hi
            hi = min(max_n, max(hi + 1, math.ceil(hi * growth)))
            growth = min(2.0, growth * 1.5)
            p_hi = power_at(hi)
    # invariant: power(lo) < target ≤ power(hi)
    while hi - lo > 1:
        width = hi - lo
        root_lo, root_hi = math.sqrt(lo), math.sqrt(hi)
        frac = (power - p_lo) / (p_hi - p_lo) if p_hi > p_lo else 0.5
        mid = round((root_lo + frac * (root_hi - root_lo)) ** 2)
        mid = min(max(mid, lo + 1), hi - 1)
        p_mid = power_at(mid)
        if p_mid >= power:
            hi, p_hi = mid, p_mid
        else:
            lo, p_lo = mid, p_mid
        if hi - lo > width / 2 and hi - lo > 1:  # a poor step: bisect once
            mid = (lo + hi) // 2
            p_mid = power_at(mid)
            if p_mid >= power:
                hi, p_hi = mid, p_mid
            else:
                lo, p_lo = mid, p_mid
    return hi
