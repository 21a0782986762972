"""Power and sample size: the public functions for one design.

``power_mcnemar`` (paired: both conditions on the same items) and
``power_two_proportions`` (unpaired, for comparison) solve for whichever of ``effect``,
``n`` and ``power`` is left ``None``. Sign rule, *first minus second*: the effect is
``acc(a) − acc(b)``, ``baseline`` is acc(b), and ``alternative="greater"`` claims that
the first condition is the more accurate. Formulas and sources: ``docs/power.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from robuststats.stats._common import Record
from robuststats.stats._parameters import ParameterError, check_int, check_probability
from robuststats.stats.power._design import (
    PairedDesign,
    PoolSizeWarning,
    check_effect,
    check_power,
    check_test_settings,
    design_effect,
    effect_upper_bound,
    exactly_one_none,
    paired_design,
    pool_check,
    rounded_n,
    unpaired_accuracies,
)
from robuststats.stats.power._exact import exact_n, exact_power
from robuststats.stats.power._formulas import (
    connor_n,
    connor_power,
    solve_increasing,
    two_proportions_n,
    two_proportions_power,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["POWER_METHODS", "PoolSizeWarning", "PowerResult", "power_mcnemar",
           "power_two_proportions"]

MCNEMAR_METHODS = ("connor", "exact", "midp", "asymptotic", "asymptotic-cc")
UNPAIRED_METHODS = ("pooled", "pooled-cc", "unpooled", "arcsine")
#: largest effective n the exact sums are computed for: their cost grows with √n (1 s at
#: 10^7) and the binomial tails of scipy.special lose digits past it; Connor is exact enough there
MAX_EXACT_N = 10**7

#: every ``method`` of the power functions and what it means (for tables and reports)
POWER_METHODS = {
    "connor": "McNemar test, normal approximation (Connor 1987)",
    "exact": "exact McNemar test, exact unconditional power (Suissa & Shuster 1991)",
    "midp": "mid-p McNemar test, exact unconditional power (Fagerland et al. 2013)",
    "asymptotic": "asymptotic McNemar test, exact unconditional power",
    "asymptotic-cc": "asymptotic McNemar test with continuity correction, exact "
    "unconditional power",
    "pooled": "two-proportion z-test, pooled variance, no continuity correction (Fleiss)",
    "pooled-cc": "two-proportion z-test with continuity correction (Fleiss, Tytun & Ury 1980)",
    "unpooled": "two-proportion z-test, unpooled (Wald) variance",
    "arcsine": "arcsine transform, Cohen's h (Cohen 1988)",
    "seed-random": "seed-random t test over training seeds and items (crossed ANOVA, "
    "calibrated Satterthwaite df), power averaged over its mean squares",
    "noncentral-t": "seed-random t test, noncentral t at the expected mean squares "
    "(Satterthwaite 1946)",
}


class PowerPlan(Record):
    """``to_dict`` and ``to_frame`` of the power results (frozen dataclasses with a
    ``method`` field)."""

    def to_frame(self) -> pd.DataFrame:
        """One-row tidy table of the fields, plus a readable ``method_description``."""
        import pandas as pd

        row = self.to_dict()
        row["method_description"] = POWER_METHODS.get(self.method, self.method)  # type: ignore[attr-defined]
        return pd.DataFrame([row])


@dataclass(frozen=True)
class PowerResult(PowerPlan):
    """Result of a power / sample-size calculation; one of n, power, effect was solved for.

    Attributes
    ----------
    n : int
        Items to evaluate (pairs for the paired design; items *per condition* for the
        unpaired design), each ``repeats`` times. Rounded up when solved for.
    power : float
        The target power when solving for ``n`` or ``effect``; else the computed power.
    effect : float
        Size of the accuracy difference δ = |acc(a) − acc(b)| (> 0); ``alternative``
        says which condition is the more accurate.
    discordance : float or None
        Discordant-pair rate π_D (paired design only).
    baseline : float or None
        Accuracy of the second condition b, if given (or assumed, unpaired design).
    alpha, alternative, method, design
        Test settings; ``design`` is ``"paired"`` or ``"unpaired"``.
    solved_for : str
        ``"n"``, ``"power"`` or ``"effect"``.
    achieved_power : float
        Power at the integer ``n`` reported (≥ ``power`` when solving for ``n``).
    n_unrounded : float
        Items before rounding up (equals ``n`` when ``n`` was given).
    n_effective : float
        ``n · repeats / design_effect``: the number of independent items it is worth.
    repeats, icc, design_effect
        Evaluations per item, their intra-item correlation, Kish's ``1 + (m − 1)·ICC``.
    n_evaluations : int
        ``n · repeats`` evaluations per condition.
    correlation : float or None
        Correlation of the paired outcomes, when π_D was derived from it.
    pool_size : int or None
        Items available (e.g. 1,319 for the GSM8K test split); ``None`` = not checked.
    exceeds_pool : bool
        ``n > pool_size``; a :class:`PoolSizeWarning` was issued.
    min_repeats : int or None
        When the pool is exceeded: the fewest repeats of all ``pool_size`` items that reach
        the required effective n at the given ICC (``None`` if no number of repeats does).
    """

    n: int
    power: float
    effect: float
    discordance: float | None
    baseline: float | None
    alpha: float
    alternative: str
    method: str
    design: str
    solved_for: str
    achieved_power: float
    n_unrounded: float
    n_effective: float
    repeats: int = 1
    icc: float = 0.0
    design_effect: float = 1.0
    n_evaluations: int = 0
    correlation: float | None = None
    pool_size: int | None = None
    exceeds_pool: bool = False
    min_repeats: int | None = None


# ------------------------------------------------------------------------ paired design
def power_mcnemar(
    effect: float | None = None,
    n: int | None = None,
    power: float | None = None,
    *,
    baseline: float | None = None,
    discordance: float | None = None,
    correlation: float | None = None,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    method: str | None = None,
    repeats: int = 1,
    icc: float = 0.0,
    pool_size: int | None = None,
) -> PowerResult:
    """Power or sample size of McNemar's test for a paired accuracy difference.

    Exactly one of ``effect``, ``n`` and ``power`` must be None; it is solved for.
    Conditions a (first) and b (second) are compared as ``acc(a) − acc(b)``, the sign
    rule of :func:`robuststats.stats.mcnemar`.

    Parameters
    ----------
    effect : float or None
        Size δ of the accuracy difference to detect, in (0, 1). ``alternative`` says
        which condition is the more accurate.
    n : int or None
        Number of items (pairs), each evaluated ``repeats`` times under both conditions.
    power : float or None
        Target power in (α/sides, 1).
    baseline : float, optional
        Accuracy of the second condition b (the reference); acc(a) = baseline + δ
        (baseline − δ for ``alternative='less'``). Needed with ``correlation``;
        otherwise only used to check that the design is possible.
    discordance : float, optional
        π_D, the share of items on which the two conditions disagree (≥ δ). Estimate it
        from pilot outcomes with :func:`estimate_discordance`.
    correlation : float, optional
        Instead of π_D: the correlation φ of the paired 0/1 outcomes (needs ``baseline``).
    alpha : float
        Significance level.
    alternative : {"two-sided", "greater", "less"}
        Two-sided test, or one-sided: ``"greater"`` claims acc(a) > acc(b) (a is δ more
        accurate), ``"less"`` acc(a) < acc(b), as in ``mcnemar(a, b, alternative=...)``.
    method : {"exact", "midp", "asymptotic", "asymptotic-cc", "connor"}, optional
        The test that will be run (the ``method`` names of
        :func:`robuststats.stats.mcnemar`), whose exact unconditional power is summed
        over the Binomial(n, π_D) number of discordant pairs (Suissa & Shuster 1991):
        ``"exact"`` conditional binomial test, the test ``mcnemar`` and ``analyze`` run
        (R ``MESS::power_mcnemar_test(method="exact")``), ``"midp"`` mid-p test,
        ``"asymptotic"`` z-test without and ``"asymptotic-cc"`` with continuity
        correction. ``"connor"``: Connor's (1987) normal approximation of the asymptotic
        test (closed form; R ``MESS::power_mcnemar_test(method="normal")``); it misstates
        the power of the test it approximates by up to 15 points when π_D ≈ δ, and that of
        the exact test by up to 4 points at its own n (``docs/power.md``). Default
        (None): ``"exact"``; past 10⁷ effective pairs, where the exact sums stop and the
        two agree to within 10⁻³, ``"connor"`` (the result's ``method`` says which).
    repeats, icc : int, float
        Each item evaluated ``repeats`` times (noise seeds, training seeds) with
        intra-item correlation ``icc``: the ``n · repeats`` evaluations are worth
        ``n · repeats / (1 + (repeats − 1)·icc)`` independent items (Kish's design effect).
        For the exact computations that effective n is rounded down.
    pool_size : int, optional
        Items available; a :class:`PoolSizeWarning` says when ``n`` exceeds it.

    Returns
    -------
    PowerResult

    Raises
    ------
    InputError
        For impossible designs: δ outside (0, 1), probabilities outside (0, 1), π_D < δ,
        ``baseline ± effect`` outside [0, 1], a correlation the margins do not allow, an
        effect too small to detect with at most 10¹² items.

    Examples
    --------
    >>> r = power_mcnemar(effect=0.03, power=0.8, discordance=0.20)
    >>> r.n, r.method
    (1800, 'exact')
    >>> power_mcnemar(effect=0.03, power=0.8, discordance=0.20, method="connor").n
    1742
    """
    solve = exactly_one_none(effect=effect, n=n, power=power)
    default = method is None
    alpha_, alternative_, sides, method_ = check_test_settings(
        alpha, alternative, "exact" if default else method, MCNEMAR_METHODS)
    m, rho, deff = design_effect(repeats, icc)
    pool = None if pool_size is None else check_int(pool_size, "pool_size", low=1)
    target = None if power is None else check_power(power, alpha_, sides)
    n_items = None if n is None else check_int(n, "n", low=1)
    if n_items is not None and method_ != "connor" and n_items * m / deff > MAX_EXACT_N:
        if default:
            return power_mcnemar(effect, n, power, baseline=baseline, discordance=discordance,
                                 correlation=correlation, alpha=alpha, alternative=alternative,
                                 method="connor", repeats=repeats, icc=icc,
                                 pool_size=pool_size)
        raise ParameterError(
            "{n} = {value} is worth {pairs:.3g} independent pairs, more than the exact "
            "computation handles ({limit:.0e}); use method='connor'.", ["n"], value=n_items,
            pairs=n_items * m / deff, limit=MAX_EXACT_N)

    def design_for(delta: float) -> PairedDesign:
        return paired_design(delta, baseline=baseline, discordance=discordance,
                             correlation=correlation, alternative=alternative_)

    def power_at(d: PairedDesign, n_eff: float) -> float:
        if method_ == "connor":
            return connor_power(n_eff, d.discordance, d.effect, alpha_, sides)
        return exact_power(math.floor(n_eff + 1e-9), d.discordance, d.effect, alpha_, sides,
                           method_)

    if solve == "n":
        design = design_for(effect)  # type: ignore[arg-type]
        assert target is not None
        if method_ == "connor":
            n_eff_needed = connor_n(target, design.discordance, design.effect, alpha_, sides)
        else:
            found = exact_n(target, design.discordance, design.effect, alpha_, sides, method_,
                            max_n=MAX_EXACT_N)
            if found is None and default:
                return power_mcnemar(effect, n, power, baseline=baseline,
                                     discordance=discordance, correlation=correlation,
                                     alpha=alpha, alternative=alternative, method="connor",
                                     repeats=repeats, icc=icc, pool_size=pool_size)
            if found is None:
                raise ParameterError(
                    "{effect} = {value:g} needs more than {limit:.0e} independent pairs, more "
                    "than the exact computation handles; use method='connor' (exact enough "
                    "at that size).", ["effect"], value=design.effect, limit=MAX_EXACT_N)
            n_eff_needed = float(found)
        n_unrounded = n_eff_needed * deff / m
        n_items = rounded_n(n_unrounded, design.effect)
        achieved = power_at(design, n_items * m / deff)
    else:
        assert n_items is not None
        n_unrounded = float(n_items)
        n_eff = n_items * m / deff
        if solve == "power":
            design = design_for(effect)  # type: ignore[arg-type]
            achieved = power_at(design, n_eff)
            target = achieved
        else:
            assert target is not None
            upper = effect_upper_bound(baseline, discordance, correlation, alternative_)
            delta = solve_increasing(lambda dl: power_at(design_for(dl), n_eff), upper,
                                     target, what=f"effect up to {upper:g}")
            design = design_for(delta)
            achieved = power_at(design, n_eff)
        n_eff_needed = n_eff
    exceeds, m_min = pool_check(n_items, n_eff_needed, pool, rho)
    return PowerResult(
        n=n_items, power=float(target), effect=design.effect, discordance=design.discordance,
        baseline=design.baseline, alpha=alpha_, alternative=alternative_, method=method_,
        design="paired", solved_for=solve, achieved_power=achieved, n_unrounded=n_unrounded,
        n_effective=n_items * m / deff, repeats=m, icc=rho, design_effect=deff,
        n_evaluations=n_items * m, correlation=design.correlation, pool_size=pool,
        exceeds_pool=exceeds, min_repeats=m_min,
    )


# ---------------------------------------------------------------------- unpaired design
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
    items *per condition* (different items in each). ``baseline`` is acc(b) and acc(a) =
    baseline ± δ as for :func:`power_mcnemar`; without it the accuracies are centred on ½
    (``acc(b) = ½ − δ/2`` for ``"greater"``), the largest-variance, most conservative case.

    Methods (z = z_{α/sides}, z_β = Φ⁻¹(power), p̄ = (p_a + p_b)/2):

    - ``"pooled"`` (default): the z-test with pooled variance under H0, no continuity
      correction; ``n = [z√(2p̄q̄) + z_β√(p_a q_a + p_b q_b)]² / δ²`` (Fleiss, Levin & Paik
      2003, eq. 4.14).
    - ``"pooled-cc"``: the same with the continuity correction of Fleiss, Tytun & Ury
      (1980): ``n_cc = (n/4)·[1 + √(1 + 4/(n·δ))]²``.
    - ``"unpooled"``: Wald variance under both hypotheses,
      ``n = (z + z_β)²·(p_a q_a + p_b q_b) / δ²``.
    - ``"arcsine"``: Cohen's ``h = 2 asin√p_a − 2 asin√p_b``, ``n = 2·((z + z_β)/h)²``
      (Cohen 1988, ch. 6; statsmodels ``NormalIndPower`` with ``proportion_effectsize``).

    As for McNemar, the far tail of a two-sided test is not counted.
    """
    solve = exactly_one_none(effect=effect, n=n, power=power)
    alpha_, alternative_, sides, method_ = check_test_settings(alpha, alternative, method,
                                                          UNPAIRED_METHODS)
    p_b_in = None if baseline is None else check_probability(baseline, "baseline")
    pool = None if pool_size is None else check_int(pool_size, "pool_size", low=1)
    target = None if power is None else check_power(power, alpha_, sides)
    n_items = None if n is None else check_int(n, "n", low=1)

    if solve == "effect":
        assert target is not None and n_items is not None
        if p_b_in is None:
            upper = 1.0
        else:
            upper = p_b_in if alternative_ == "less" else 1.0 - p_b_in
        delta = solve_increasing(
            lambda d: two_proportions_power(
                n_items, *unpaired_accuracies(d, p_b_in, alternative_), alpha_, sides, method_
            ),
            upper, target, what=f"effect up to {upper:g}",
        )
    else:
        delta = check_effect(effect)
    p_a, p_b = unpaired_accuracies(delta, p_b_in, alternative_)
    if solve == "n":
        assert target is not None
        n_unrounded = two_proportions_n(target, p_a, p_b, alpha_, sides, method_)
        n_items = rounded_n(n_unrounded, delta)
    else:
        assert n_items is not None
        n_unrounded = float(n_items)
    achieved = two_proportions_power(n_items, p_a, p_b, alpha_, sides, method_)
    if target is None:
        target = achieved
    exceeds, m_min = pool_check(n_items, float(n_items), pool, 0.0)
    return PowerResult(
        n=n_items, power=float(target), effect=delta, discordance=None, baseline=p_b,
        alpha=alpha_, alternative=alternative_, method=method_, design="unpaired",
        solved_for=solve, achieved_power=achieved, n_unrounded=n_unrounded,
        n_effective=float(n_items), n_evaluations=n_items, pool_size=pool,
        exceeds_pool=exceeds, min_repeats=m_min,
    )
