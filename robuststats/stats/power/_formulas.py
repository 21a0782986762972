"""The formulas: power and sample size as functions of (n, π_D, δ) or (n, p_a, p_b).

Closed forms (Connor 1987 for McNemar; Fleiss, Cohen for two proportions) and the root
finder that inverts power in the effect; the exact unconditional power of the McNemar
tests is in :mod:`._exact`.

Paired design (McNemar), conditions a (first) and b (second), sign rule *first minus
second*: ``p10`` = P(a correct, b wrong), ``p01`` = P(a wrong, b correct), discordance
``π_D = p10 + p01`` and effect ``δ = p10 − p01 = acc(a) − acc(b)``. Only the size ``|δ|``
enters the power: given a discordant pair, it favours the better condition with
probability ``q = (π_D + |δ|) / (2 π_D)``.

Everything here works with the *effective* number of independent pairs; design effects
for repeated evaluations are applied by the caller (:mod:`robuststats.stats.power._mcnemar`).

The normal quantiles and tail probabilities come from the standard library
(:class:`statistics.NormalDist`, Wichura's AS241 algorithm, and :func:`math.erfc`), so
the closed forms import nothing heavy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist
from typing import TYPE_CHECKING

from robuststats.errors import InputError

if TYPE_CHECKING:
    pass

__all__ = [
    "connor_n",
    "connor_power",
    "norm_cdf",
    "solve_increasing",
    "two_proportions_n",
    "two_proportions_power",
    "z_upper",
]

_STANDARD = NormalDist()


def norm_cdf(x: float) -> float:
    """Φ(x), accurate in both tails (``erfc`` does not cancel as ``1 + erf`` does)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def z_upper(p: float) -> float:
    """Φ⁻¹(1 − p) for p in (0, 1), computed as −Φ⁻¹(p) so that tiny p keep their digits."""
    return -_STANDARD.inv_cdf(p)


# ------------------------------------------------------------------ McNemar, closed form
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
    num = math.sqrt(n) * abs(effect) - z_upper(alpha / sides) * math.sqrt(discordance)
    return norm_cdf(num / math.sqrt(discordance - effect**2))


def connor_n(power: float, discordance: float, effect: float, alpha: float, sides: int) -> float:
    """Effective number of pairs for the target power (Connor 1987, eq. 4), unrounded.

    ``n = [z_{α/s}·√π_D + z_β·√(π_D − δ²)]² / δ²`` with ``z_β = Φ⁻¹(power)``. Returns
    ``inf`` when δ² underflows (the caller reports such an effect as undetectable).
    """
    z_beta = _STANDARD.inv_cdf(power)
    root = z_upper(alpha / sides) * math.sqrt(discordance) + z_beta * math.sqrt(
        discordance - effect**2
    )
    # A target power below α/s needs no data at all: the formula's root turns negative.
    squared = effect * effect
    return math.inf if squared == 0.0 else max(root, 0.0) ** 2 / squared


# ------------------------------------------------------------- two independent proportions
def two_proportions_power(
    n: float, p_a: float, p_b: float, alpha: float, sides: int, method: str
) -> float:
    """Power of the two-proportion test with ``n`` items per condition (see ``_n``)."""
    if n <= 0:
        return 0.0
    z = z_upper(alpha / sides)
    delta = abs(p_a - p_b)
    var_alt = p_a * (1 - p_a) + p_b * (1 - p_b)
    if method == "arcsine":
        h = abs(2 * math.asin(math.sqrt(p_a)) - 2 * math.asin(math.sqrt(p_b)))
        return norm_cdf(h * math.sqrt(n / 2.0) - z)
    if method == "unpooled":
        return norm_cdf((delta * math.sqrt(n) - z * math.sqrt(var_alt)) / math.sqrt(var_alt))
    if method == "pooled-cc":
        # invert Fleiss, Tytun & Ury (1980): n' = (n/4)(1 + √(1 + 4/(n δ)))²  ⇔
        # n = (n' − 1/δ)² / n'  for n' > 1/δ (below that the correction eats the signal)
        n = (n - 1.0 / delta) ** 2 / n if n > 1.0 / delta else 0.0
    p_bar = (p_a + p_b) / 2.0
    num = delta * math.sqrt(n) - z * math.sqrt(2 * p_bar * (1 - p_bar))
    return norm_cdf(num / math.sqrt(var_alt))


def two_proportions_n(
    power: float, p_a: float, p_b: float, alpha: float, sides: int, method: str
) -> float:
    """Items per condition for the target power, unrounded (``inf`` if δ underflows).

    ``pooled``: ``[z√(2p̄q̄) + z_β√(p_a q_a + p_b q_b)]² / δ²`` (Fleiss, Levin & Paik 2003,
    eq. 4.14); ``pooled-cc``: ``n/4·[1 + √(1 + 4/(n·δ))]²`` (Fleiss, Tytun & Ury 1980);
    ``unpooled``: ``(z + z_β)²·(p_a q_a + p_b q_b) / δ²``; ``arcsine``: ``2·((z + z_β)/h)²``
    with Cohen's ``h = 2 asin√p_a − 2 asin√p_b`` (Cohen 1988, ch. 6).
    """
    z = z_upper(alpha / sides)
    z_beta = _STANDARD.inv_cdf(power)
    delta = abs(p_a - p_b)
    var_alt = p_a * (1 - p_a) + p_b * (1 - p_b)
    if method == "arcsine":
        h = abs(2 * math.asin(math.sqrt(p_a)) - 2 * math.asin(math.sqrt(p_b)))
        return math.inf if h == 0.0 else 2.0 * ((z + z_beta) / h) ** 2
    if delta * delta == 0.0:
        return math.inf
    if method == "unpooled":
        return (z + z_beta) ** 2 * var_alt / delta**2
    p_bar = (p_a + p_b) / 2.0
    n = (z * math.sqrt(2 * p_bar * (1 - p_bar)) + z_beta * math.sqrt(var_alt)) ** 2 / delta**2
    if method == "pooled-cc":
        n = n / 4.0 * (1.0 + math.sqrt(1.0 + 4.0 / (n * delta))) ** 2
    return n


# ------------------------------------------------------------------ inverting power
def solve_increasing(
    func: Callable[[float], float], upper: float, target: float, *, what: str
) -> float:
    """Smallest x in (0, upper] with ``func(x) ≥ target`` for a power increasing in x.

    ``func`` may raise :class:`InputError` where x is infeasible (e.g. π_D < δ). A grid
    over (0, upper] finds the first feasible point reaching the target; below it the
    bracket is refined by halving (targets met below the first grid point) or by
    bisecting to the edge of the feasible region, and Brent's method finds the root.
    """
    from scipy.optimize import brentq

    def excess(x: float) -> float | None:
        try:
            return func(x) - target
        except InputError:
            return None

    prev: float | None = None
    for k in range(1, 401):
        x = upper * k / 400
        val = excess(x)
        if val is None or val < 0:
            prev = None if val is None else x
            continue
        if prev is None:
            prev, x = _refine_below(excess, x)
            if prev is None:
                return x
        return float(brentq(lambda t: func(t) - target, prev, x, xtol=1e-12, rtol=1e-10))
    raise InputError(f"no {what} reaches power {target:g} with these settings.")


def _refine_below(excess: Callable[[float], float | None], x: float) -> tuple[float | None, float]:
    """Bracket below a feasible ``x`` whose excess is ≥ 0: ``(lo, hi)`` with excess(lo) < 0.

    ``lo`` is None when no such point exists below ``x``: then ``hi`` is (within 1e-12
    relative) the smallest feasible x, which already reaches the target.
    """
    hi = x
    for _ in range(1100):  # halving down to the smallest positive float
        cand = hi / 2
        val = excess(cand) if cand > 0 else None
        if val is None:  # the feasible region starts between cand and hi
            lo_bad = cand
            for _ in range(100):
                mid = (lo_bad + hi) / 2
                v = excess(mid)
                if v is None:
                    lo_bad = mid
                elif v < 0:
                    return mid, hi
                else:
                    hi = mid
                if hi - lo_bad <= 1e-12 * hi:
                    break
            return None, hi
        if val < 0:
            return cand, hi
        hi = cand
    return None, hi
