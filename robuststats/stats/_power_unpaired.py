"""Power of the unpaired two-proportion comparison (different items per condition).

For comparison with the paired design only: evaluating both conditions on the same items
and testing with McNemar needs far fewer items whenever π_D is well below
``p1(1 − p1) + p2(1 − p2)``.
"""

from __future__ import annotations

import math

from scipy import stats

from robuststats.errors import InputError
from robuststats.stats._power import (
    PowerResult,
    check_method,
    check_power,
    pool_check,
)
from robuststats.stats._power_design import (
    check_alpha,
    check_exactly_one_none,
    check_positive_int,
    check_probability,
    sides_of,
    solve_increasing,
)

__all__ = ["power_two_proportions"]

UNPAIRED_METHODS = ("pooled", "pooled-cc", "unpooled", "arcsine")


def _margins(effect: float, baseline: float | None, alternative: str) -> tuple[float, float]:
    if baseline is None:
        # the variance p(1 − p) peaks at 1/2: centring the two accuracies there gives the
        # largest (most conservative) n for a given difference
        return 0.5 - effect / 2.0, 0.5 + effect / 2.0
    p1 = baseline
    p2 = p1 - effect if alternative == "less" else p1 + effect
    if not 0.0 <= p2 <= 1.0:
        raise InputError(
            f"impossible: `baseline` ± `effect` = {p2:g} is not an accuracy in [0, 1]."
        )
    return p1, p2


def _power_per_group(
    n: float, p1: float, p2: float, alpha: float, sides: int, method: str
) -> float:
    if n <= 0:
        return 0.0
    z = float(stats.norm.isf(alpha / sides))
    delta = abs(p2 - p1)
    var_alt = p1 * (1 - p1) + p2 * (1 - p2)
    if method == "arcsine":
        h = abs(2 * math.asin(math.sqrt(p2)) - 2 * math.asin(math.sqrt(p1)))
        return float(stats.norm.cdf(h * math.sqrt(n / 2.0) - z))
    if method == "unpooled":
        return float(
            stats.norm.cdf((delta * math.sqrt(n) - z * math.sqrt(var_alt)) / math.sqrt(var_alt))
        )
    if method == "pooled-cc":
        # invert Fleiss, Tytun & Ury (1980): n' = (n/4)(1 + √(1 + 4/(n δ)))²  ⇔
        # n = (n' − 1/δ)² / n'  for n' > 1/δ (below that the correction eats the signal)
        n = (n - 1.0 / delta) ** 2 / n if n > 1.0 / delta else 0.0
    p_bar = (p1 + p2) / 2.0
    num = delta * math.sqrt(n) - z * math.sqrt(2 * p_bar * (1 - p_bar))
    return float(stats.norm.cdf(num / math.sqrt(var_alt)))


def _n_per_group(
    power: float, p1: float, p2: float, alpha: float, sides: int, method: str
) -> float:
    z = float(stats.norm.isf(alpha / sides))
    z_beta = float(stats.norm.ppf(power))
    delta = abs(p2 - p1)
    var_alt = p1 * (1 - p1) + p2 * (1 - p2)
    if method == "arcsine":
        h = abs(2 * math.asin(math.sqrt(p2)) - 2 * math.asin(math.sqrt(p1)))
        return 2.0 * ((z + z_beta) / h) ** 2
    if method == "unpooled":
        return (z + z_beta) ** 2 * var_alt / delta**2
    p_bar = (p1 + p2) / 2.0
    n = (z * math.sqrt(2 * p_bar * (1 - p_bar)) + z_beta * math.sqrt(var_alt)) ** 2 / delta**2
    if method == "pooled-cc":
        n = n / 4.0 * (1.0 + math.sqrt(1.0 + 4.0 / (n * delta))) ** 2
    return n


def power_two_proportions(
    effect: float | None = None,
    n: int | None = None,
    power: float | None = None,
    *,
    baseline: float | None = None,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    method: str = "pooled",
    pool_size: int | None = None,
) -> PowerResult:
    """Power or sample size per condition for two independent proportions (unpaired).

    Exactly one of ``effect``, ``n`` and ``power`` must be None. ``n`` is the number of
    items *per condition* (different items in each). Without ``baseline`` the accuracies
    are centred on ½ (``p1 = ½ − δ/2``), the largest-variance, most conservative case.

    Methods (z = z_{α/sides}, z_β = Φ⁻¹(power), p̄ = (p1 + p2)/2):

    - ``"pooled"`` (default): the z-test with pooled variance under H0, no continuity
      correction; ``n = [z√(2p̄q̄) + z_β√(p1q1 + p2q2)]² / δ²`` (Fleiss, Levin & Paik
      2003, eq. 4.14).
    - ``"pooled-cc"``: the same with the continuity correction of Fleiss, Tytun & Ury
      (1980): ``n_cc = (n/4)·[1 + √(1 + 4/(n·δ))]²``.
    - ``"unpooled"``: Wald variance under both hypotheses,
      ``n = (z + z_β)²·(p1q1 + p2q2) / δ²``.
    - ``"arcsine"``: Cohen's ``h = 2 asin√p2 − 2 asin√p1``, ``n = 2·((z + z_β)/h)²``
      (Cohen 1988, ch. 6; statsmodels ``NormalIndPower`` with ``proportion_effectsize``).

    As for McNemar, the far tail of a two-sided test is not counted.
    """
    solve = check_exactly_one_none(effect=effect, n=n, power=power)
    alpha_ = check_alpha(alpha)
    sides = sides_of(alternative)
    method_ = check_method(method, UNPAIRED_METHODS)
    p1_in = None if baseline is None else check_probability("baseline", baseline)
    pool = None if pool_size is None else check_positive_int("pool_size", pool_size)
    target = None if power is None else check_power(power, alpha_, sides)
    n_items = None if n is None else check_positive_int("n", n)

    def check_effect(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise InputError(f"`effect` must be > 0 and < 1, got {value!r}.")
        return float(value)

    if solve == "effect":
        assert target is not None and n_items is not None
        if p1_in is None:
            upper = 1.0
        else:
            upper = p1_in if alternative == "less" else 1.0 - p1_in
        delta = solve_increasing(
            lambda d: _power_per_group(
                n_items, *_margins(d, p1_in, alternative), alpha_, sides, method_
            ),
            upper,
            target,
            what=f"effect up to {upper:g}",
        )
    else:
        delta = check_effect(effect)
    p1, p2 = _margins(delta, p1_in, alternative)
    if solve == "n":
        assert target is not None
        n_unrounded = _n_per_group(target, p1, p2, alpha_, sides, method_)
        n_items = max(1, math.ceil(n_unrounded - 1e-9))
    else:
        assert n_items is not None
        n_unrounded = float(n_items)
    achieved = _power_per_group(n_items, p1, p2, alpha_, sides, method_)
    if target is None:
        target = achieved
    exceeds, m_min = pool_check(n_items, float(n_items), pool, 0.0)
    return PowerResult(
        n=n_items,
        power=float(target),
        effect=delta,
        discordance=None,
        baseline=p1,
        alpha=alpha_,
        alternative=alternative,
        method=method_,
        design="unpaired",
        solved_for=solve,
        achieved_power=achieved,
        n_unrounded=n_unrounded,
        n_effective=float(n_items),
        n_evaluations=n_items,
        pool_size=pool,
        exceeds_pool=exceeds,
        min_repeats=m_min,
    )
