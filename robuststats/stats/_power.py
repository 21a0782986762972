"""Power and sample size for comparing two conditions on the same items (McNemar).

See ``docs/power.md`` for the formulas and their sources.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError, closest_match
from robuststats.stats._power_design import (
    PairedDesign,
    PoolSizeWarning,
    check_alpha,
    check_exactly_one_none,
    check_positive_int,
    check_probability,
    design_effect,
    paired_design,
    sides_of,
    solve_increasing,
)
from robuststats.stats._power_methods import connor_n, connor_power, exact_n, exact_power

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PoolSizeWarning", "PowerResult", "power_mcnemar"]

MCNEMAR_METHODS = ("connor", "exact", "midp", "asymptotic", "asymptotic-cc")

#: what ``method`` means, for tables and reports
METHOD_DESCRIPTIONS = {
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
}


@dataclass(frozen=True)
class PowerResult:
    """Result of a power / sample-size calculation; one of n, power, effect was solved for.

    Attributes
    ----------
    n : int
        Items to evaluate (pairs for the paired design; items *per condition* for the
        unpaired design), each ``repeats`` times. Rounded up when solved for.
    power : float
        The target power when solving for ``n`` or ``effect``; else the computed power.
    effect : float
        Difference in accuracy δ (> 0; its direction is set by ``alternative``).
    discordance : float or None
        Discordant-pair rate π_D (paired design only).
    baseline : float or None
        Accuracy of the baseline condition p1, if given (or assumed, unpaired design).
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

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (JSON-serialisable)."""
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        """One-row tidy table of the fields, plus a readable ``method_description``."""
        import pandas as pd

        row = self.to_dict()
        row["method_description"] = METHOD_DESCRIPTIONS.get(self.method, self.method)
        return pd.DataFrame([row])


def check_method(method: object, allowed: tuple[str, ...]) -> str:
    if method not in allowed:
        hint = closest_match(method, allowed)
        extra = f" Did you mean {hint!r}?" if hint else ""
        raise InputError(f"`method` must be one of {', '.join(allowed)}, got {method!r}.{extra}")
    return str(method)


def check_power(power: object, alpha: float, sides: int) -> float:
    p = check_probability("power", power)
    if p <= alpha / sides:
        raise InputError(
            f"`power` must exceed the test's size alpha/sides = {alpha / sides:g}, got {power!r}."
        )
    return p


def fewest_repeats(pool: int, n_effective: float, icc: float) -> int | None:
    """Fewest m with ``pool · m / (1 + (m − 1)·icc) ≥ n_effective``; None if none exists.

    Rearranged: ``m · (pool − n_eff·icc) ≥ n_eff·(1 − icc)``; as m → ∞ repeats of
    ``pool`` items are worth at most ``pool / icc`` independent items.
    """
    if n_effective <= pool:
        return 1
    if pool - n_effective * icc <= 0:
        return None
    return max(1, math.ceil(n_effective * (1.0 - icc) / (pool - n_effective * icc) - 1e-9))


def pool_check(n: int, n_effective: float, pool: int | None, icc: float) -> tuple[bool, int | None]:
    """Warn (:class:`PoolSizeWarning`) when ``n`` items exceed the pool; return the facts."""
    if pool is None or n <= pool:
        return False, None
    m_min = fewest_repeats(pool, n_effective, icc)
    if m_min is not None:
        advice = f"with icc = {icc:g}, {m_min} repeats of all {pool} items reach it"
        if icc == 0:
            advice += (
                " (icc = 0 counts each repeat as a new item, which overstates repeats of the "
                "same items; estimate the ICC from repeated evaluations)"
            )
    else:
        advice = (
            f"with icc = {icc:g} no number of repeats reaches it: repeats of {pool} items "
            f"are worth at most {pool / icc:.0f} independent items"
        )
    warnings.warn(
        f"n = {n} items exceeds the item pool of {pool} (effective n needed: "
        f"{n_effective:.0f}): the rest must come from repeated noisy evaluations or training "
        f"seeds of the same items (`repeats`, `icc`); {advice}.",
        PoolSizeWarning,
        stacklevel=3,
    )
    return True, m_min


def _effect_upper_bound(
    baseline: object, discordance: object, correlation: object, alternative: str
) -> float:
    """Largest δ worth searching when solving for the effect; validates the other inputs."""
    if discordance is None and correlation is None:
        raise InputError(
            "`discordance` (π_D) or `correlation` is required to solve for the effect."
        )
    upper = 1.0
    if baseline is not None:
        p1 = check_probability("baseline", baseline)
        upper = p1 if alternative == "less" else 1.0 - p1
    elif correlation is not None:
        raise InputError("`correlation` needs `baseline` (π_D follows from both accuracies).")
    if discordance is not None:
        upper = min(upper, check_probability("discordance", discordance))
    return upper


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
    method: str = "connor",
    repeats: int = 1,
    icc: float = 0.0,
    pool_size: int | None = None,
) -> PowerResult:
    """Power or sample size of McNemar's test for a paired accuracy difference.

    Exactly one of ``effect``, ``n`` and ``power`` must be None; it is solved for.

    Parameters
    ----------
    effect : float or None
        Difference in accuracy δ = p2 − p1 to detect (> 0; for ``alternative='less'`` the
        second condition is δ *less* accurate).
    n : int or None
        Number of items (pairs), each evaluated ``repeats`` times under both conditions.
    power : float or None
        Target power in (α, 1).
    baseline : float, optional
        Accuracy p1 of the first condition. Needed with ``correlation``; otherwise only
        used to check that the design is possible.
    discordance : float, optional
        π_D, the share of items on which the two conditions disagree (≥ δ). Estimate it
        from pilot outcomes with :func:`estimate_discordance`.
    correlation : float, optional
        Instead of π_D: the correlation φ of the paired 0/1 outcomes (needs ``baseline``).
    alpha : float
        Significance level.
    alternative : {"two-sided", "greater", "less"}
        Two-sided test, or one-sided in the direction of the effect.
    method : {"connor", "exact", "midp", "asymptotic", "asymptotic-cc"}
        ``"connor"``: asymptotic McNemar test, Connor (1987) normal approximation
        (closed form; matches R ``MESS::power_mcnemar_test(method="normal")``).
        The others name the test that will be run (the ``method`` names of
        :func:`robuststats.stats.mcnemar`) and compute its exact unconditional power,
        summed over the Binomial(n, π_D) number of discordant pairs (Suissa & Shuster
        1991): ``"exact"`` conditional binomial test (R
        ``MESS::power_mcnemar_test(method="exact")``), ``"midp"`` mid-p test,
        ``"asymptotic"`` z-test without and ``"asymptotic-cc"`` with continuity
        correction.
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
        For impossible designs: effect ≤ 0, probabilities outside (0, 1), π_D < δ,
        ``baseline ± effect`` outside [0, 1], a correlation the margins do not allow.

    Examples
    --------
    >>> r = power_mcnemar(effect=0.03, power=0.8, discordance=0.20)
    >>> r.n
    1742
    """
    solve = check_exactly_one_none(effect=effect, n=n, power=power)
    alpha_ = check_alpha(alpha)
    sides = sides_of(alternative)
    method_ = check_method(method, MCNEMAR_METHODS)
    m, rho, deff = design_effect(repeats, icc)
    pool = None if pool_size is None else check_positive_int("pool_size", pool_size)
    target = None if power is None else check_power(power, alpha_, sides)
    n_items = None if n is None else check_positive_int("n", n)

    def design_for(delta: float) -> PairedDesign:
        return paired_design(
            delta,
            baseline=baseline,
            discordance=discordance,
            correlation=correlation,
            alternative=alternative,
        )

    def power_at(d: PairedDesign, n_eff: float) -> float:
        if method_ == "connor":
            return connor_power(n_eff, d.discordance, d.effect, alpha_, sides)
        return exact_power(
            math.floor(n_eff + 1e-9), d.discordance, d.effect, alpha_, sides, method_
        )

    if solve == "n":
        design = design_for(effect)  # type: ignore[arg-type]
        assert target is not None
        if method_ == "connor":
            n_eff_needed = connor_n(target, design.discordance, design.effect, alpha_, sides)
        else:
            n_eff_needed = float(
                exact_n(target, design.discordance, design.effect, alpha_, sides, method_)
            )
        n_unrounded = n_eff_needed * deff / m
        # 1e-9 guards against 520.0000000001 from floating point becoming 521
        n_items = max(1, math.ceil(n_unrounded - 1e-9))
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
            upper = _effect_upper_bound(baseline, discordance, correlation, alternative)
            delta = solve_increasing(
                lambda dl: power_at(design_for(dl), n_eff),
                upper,
                target,
                what=f"effect up to {upper:g}",
            )
            design = design_for(delta)
            achieved = power_at(design, n_eff)
        n_eff_needed = n_eff
    exceeds, m_min = pool_check(n_items, n_eff_needed, pool, rho)
    return PowerResult(
        n=n_items,
        power=float(target),
        effect=design.effect,
        discordance=design.discordance,
        baseline=design.baseline,
        alpha=alpha_,
        alternative=alternative,
        method=method_,
        design="paired",
        solved_for=solve,
        achieved_power=achieved,
        n_unrounded=n_unrounded,
        n_effective=n_items * m / deff,
        repeats=m,
        icc=rho,
        design_effect=deff,
        n_evaluations=n_items * m,
        correlation=design.correlation,
        pool_size=pool,
        exceeds_pool=exceeds,
        min_repeats=m_min,
    )
