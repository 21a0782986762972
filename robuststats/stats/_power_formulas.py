"""The formulas: power and sample size as functions of (n, π_D, δ) or (n, p_a, p_b).

Closed forms (Connor 1987 for McNemar; Fleiss, Cohen for two proportions), the exact
unconditional power of the McNemar tests (Suissa & Shuster 1991), and the root finder
that inverts power in the effect.

Paired design (McNemar), conditions a (first) and b (second), sign rule *first minus
second*: ``p10`` = P(a correct, b wrong), ``p01`` = P(a wrong, b correct), discordance
``π_D = p10 + p01`` and effect ``δ = p10 − p01 = acc(a) − acc(b)``. Only the size ``|δ|``
enters the power: given a discordant pair, it favours the better condition with
probability ``q = (π_D + |δ|) / (2 π_D)``.

Everything here works with the *effective* number of independent pairs; design effects
for repeated evaluations are applied by the caller (:mod:`robuststats.stats._power`).

The normal quantiles and tail probabilities come from the standard library
(:class:`statistics.NormalDist`, Wichura's AS241 algorithm, and :func:`math.erfc`), so
the closed forms import nothing heavy; the exact sums use :mod:`scipy.special`'s
binomial distribution functions, never :mod:`scipy.stats` (0.6 s to import).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist
from typing import TYPE_CHECKING

from robuststats.errors import InputError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "EXACT_TESTS",
    "connor_n",
    "connor_power",
    "critical_counts",
    "exact_n",
    "exact_power",
    "norm_cdf",
    "solve_increasing",
    "two_proportions_n",
    "two_proportions_power",
    "z_upper",
]

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


# ------------------------------------------------------------------ McNemar, exact sums
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
