"""Power of McNemar's test as a function of (n, π_D, δ): normal approximation and exact.

Notation (paired 2×2 table of item outcomes, condition A = baseline, condition B):
``p10`` = P(A correct, B wrong), ``p01`` = P(A wrong, B correct), discordance
``π_D = p01 + p10`` and effect ``δ = p01 − p10`` (the difference in accuracy). Given a
discordant pair, it favours B with probability ``q = p01 / π_D = (π_D + δ) / (2 π_D)``.

Everything here works with the *effective* number of independent pairs; design effects
for repeated evaluations are applied by the caller (:mod:`robuststats.stats._power`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = [
    "EXACT_TESTS",
    "connor_n",
    "connor_power",
    "critical_counts",
    "exact_n",
    "exact_power",
]

# Binomial(n, π_D) mass outside [ppf(ε), isf(ε)] is below 2ε: dropping it changes the
# unconditional power by less than 1e-12 and keeps the sum over d to a few sd wide.
_TAIL = 1e-13
# The exact test rejects when P(X ≤ k) ≤ α/sides; the relative slack absorbs rounding in
# the binomial cdf when α hits a cdf value exactly (R's binom.test uses 1 + 1e-7).
_REL_TOL = 1e-9


def _z(alpha: float, sides: int) -> float:
    return float(stats.norm.isf(alpha / sides))


def connor_power(n: float, discordance: float, effect: float, alpha: float, sides: int) -> float:
    """Power of the asymptotic McNemar test, Connor (1987) normal approximation.

    ``power = Φ((√n·|δ| − z_{α/s}·√π_D) / √(π_D − δ²))`` with ``s`` = number of sides.
    The far tail of a two-sided test (rejecting in the wrong direction) is left out, as
    in Connor (1987, eq. 3) and R ``MESS::power_mcnemar_test(method = "normal")``; it
    contributes at most ``Φ(−z_{α/2}) · Φ(...)``, below 1e-4 at any power above 0.2.

    Connor, R. J. (1987). Sample size for testing differences in proportions for the
    paired-sample design. *Biometrics* 43(1), 207–211.
    """
    if n <= 0:
        return 0.0
    num = math.sqrt(n) * abs(effect) - _z(alpha, sides) * math.sqrt(discordance)
    return float(stats.norm.cdf(num / math.sqrt(discordance - effect**2)))


def connor_n(power: float, discordance: float, effect: float, alpha: float, sides: int) -> float:
    """Effective number of pairs for the target power (Connor 1987, eq. 4), unrounded.

    ``n = [z_{α/s}·√π_D + z_β·√(π_D − δ²)]² / δ²`` with ``z_β = Φ⁻¹(power)``.
    """
    z_beta = float(stats.norm.ppf(power))
    root = _z(alpha, sides) * math.sqrt(discordance) + z_beta * math.sqrt(discordance - effect**2)
    # A target power below α/s needs no data at all: the formula's root turns negative.
    return max(root, 0.0) ** 2 / effect**2


#: McNemar test variants whose exact unconditional power is computed (the names of
#: :func:`robuststats.stats.mcnemar`'s ``method``)
EXACT_TESTS = ("exact", "midp", "asymptotic", "asymptotic-cc")


def critical_counts(d: np.ndarray, alpha: float, sides: int, test: str = "exact") -> np.ndarray:
    """Largest count ``c_d`` of pairs favouring the worse condition that still rejects; −1 if none.

    With ``d`` discordant pairs, ``b`` of them favouring A and ``d − b`` favouring B, each
    test rejects (in B's direction) exactly when ``b ≤ c_d``:

    - ``"exact"``: binomial test, ``P(X ≤ b) ≤ α/s`` for ``X ~ Binomial(d, ½)``. As
      Binomial(d, ½) is symmetric, the two-sided p-value (twice the smaller tail, or R
      ``binom.test``'s sum of outcomes no more likely) rejects exactly when either count
      is ≤ ``c_d`` at ``α/2``.
    - ``"midp"``: mid-p test, ``P(X ≤ b) − ½·P(X = b) ≤ α/s`` (Fagerland, Lydersen & Laake
      2013).
    - ``"asymptotic"``: ``z = (d − 2b)/√d ≥ z_{α/s}`` (McNemar 1947, no correction), i.e.
      ``b ≤ (d − z√d)/2``.
    - ``"asymptotic-cc"``: with Edwards' continuity correction, ``(d − 2b − 1)/√d ≥ z``.
    """
    level = alpha / sides
    if test in ("exact", "midp"):
        # smallest k with F(k) ≥ level; the rejection bound is that k or the one below
        k = stats.binom.ppf(level, d, 0.5)
        tail = stats.binom.cdf(k, d, 0.5)
        if test == "midp":
            tail = tail - 0.5 * stats.binom.pmf(k, d, 0.5)
        return np.where(tail <= level * (1 + _REL_TOL), k, k - 1)
    z = float(stats.norm.isf(level))
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
    favouring B is ``Binomial(d, q)``, and the test rejects on the counts found by
    :func:`critical_counts`. The power ``Σ_d P(D = d) · P(reject | d)`` is summed without
    approximation (Suissa & Shuster 1991; Fagerland, Lydersen & Laake 2013). For
    ``test="exact"`` this is R ``MESS::power_mcnemar_test(method = "exact")`` and
    G*Power's exact McNemar test with α/2 assigned to each side.

    Suissa, S. & Shuster, J. J. (1991). The 2 × 2 matched-pairs trial: exact unconditional
    design and analysis. *Biometrics* 47(2), 361–372.
    """
    n = int(n)
    if n < 1:
        return 0.0
    q = (discordance + abs(effect)) / (2.0 * discordance)
    lo = int(stats.binom.ppf(_TAIL, n, discordance))
    hi = int(stats.binom.isf(_TAIL, n, discordance))
    d = np.arange(max(lo, 0), min(hi, n) + 1)
    weight = stats.binom.pmf(d, n, discordance)
    c = critical_counts(d, alpha, sides, test)
    # P(count favouring B ≥ d − c) = P(count favouring A ≤ c), the latter ~ Binomial(d, 1 − q)
    conditional = stats.binom.cdf(c, d, 1.0 - q)
    if sides == 2:
        conditional = conditional + stats.binom.cdf(c, d, q)
    return float(np.sum(weight * conditional))


def exact_n(
    power: float,
    discordance: float,
    effect: float,
    alpha: float,
    sides: int,
    test: str = "exact",
    *,
    max_n: int = 100_000_000,
) -> int:
    """Smallest effective n at which the exact unconditional power crosses ``power``.

    Integer bisection started from Connor's n. Exact power is not strictly monotone in n
    (the saw-tooth of discrete tests; Chernick & Liu 2002, *Am. Stat.* 56, 149–155), but
    summing over the Binomial(n, π_D) number of discordant pairs smooths it to ripples
    far below 0.01; the n returned has ``power(n) ≥ target > power(n − 1)``.
    """
    start = max(1, math.ceil(connor_n(power, discordance, effect, alpha, sides)))
    hi = start
    while exact_power(hi, discordance, effect, alpha, sides, test) < power:
        hi *= 2
        if hi > max_n:
            raise OverflowError(f"exact power stays below {power} up to n = {max_n}")
    lo = hi // 2 if hi > start else 0
    while lo > 0 and exact_power(lo, discordance, effect, alpha, sides, test) >= power:
        hi, lo = lo, lo // 2
    # invariant: power(lo) < target ≤ power(hi) (power(0) = 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if exact_power(mid, discordance, effect, alpha, sides, test) >= power:
            hi = mid
        else:
            lo = mid
    return hi
