"""The design: π_D from (δ, baseline, π_D or correlation), repeats and ICC, the item pool.

Sign rule, *first minus second*: condition a is the first, b the second and the baseline
(accuracy ``baseline`` = acc(b)); the effect is ``δ = acc(a) − acc(b)``. ``p10`` =
P(a correct, b wrong), ``p01`` = P(a wrong, b correct), ``π_D = p10 + p01``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from robuststats.errors import RobuststatsWarning
from robuststats.stats._parameters import (
    ParameterError,
    check_choice,
    check_int,
    check_number,
    check_probability,
)

__all__ = [
    "ALTERNATIVES",
    "MAX_ITEMS",
    "PairedDesign",
    "PoolSizeWarning",
    "UnreachablePowerError",
    "check_power",
    "check_test_settings",
    "design_effect",
    "discordance_from_correlation",
    "effect_upper_bound",
    "exactly_one_none",
    "fewest_repeats",
    "paired_design",
    "pool_check",
    "rounded_n",
    "smallest_int",
    "unpaired_accuracies",
]


ALTERNATIVES = ("two-sided", "greater", "less")
#: largest number of items a solved n may reach; past it the effect is undetectable
MAX_ITEMS = 10**12


class PoolSizeWarning(RobuststatsWarning):
    """The required number of items exceeds the item pool (e.g. GSM8K test: 1,319 items).

    Past the pool, effective sample size can only come from repeated noisy evaluations or
    training seeds, which are clustered by item: see ``repeats`` and ``icc``.
    """


def check_effect(effect: object) -> float:
    """δ as a float in (0, 1): the *size* of the accuracy difference."""
    value = check_number(effect, "effect")
    if value <= 0:
        raise ParameterError(
            "{effect} must be > 0 (the size of the accuracy difference; its direction is "
            "set by {alternative}), got {given!r}.", ["effect", "alternative"], given=effect)
    return check_number(effect, "effect", low=0.0, high=1.0, low_open=True, high_open=True)


def accuracy_of_a(baseline: float, delta: float, alternative: str) -> float:
    """acc(a) = baseline ± δ: a is δ *less* accurate than b only for ``'less'``."""
    return baseline - delta if alternative == "less" else baseline + delta


def design_effect(repeats: object, icc: object) -> tuple[int, float, float]:
    """``(m, ρ, deff)`` with Kish's design effect ``deff = 1 + (m − 1)·ρ``.

    ``m`` evaluations of each item whose outcomes correlate with intra-item correlation
    ``ρ`` carry the information of ``m / deff`` independent items (Kish 1965, *Survey
    Sampling*, §5.4; Donner & Klar 2000, *Design and Analysis of Cluster Randomization
    Trials*, ch. 5).
    """
    m = check_int(repeats, "repeats", low=1)
    rho = check_number(icc, "icc", low=0.0, high=1.0)
    return m, rho, 1.0 + (m - 1) * rho


def discordance_from_correlation(p_a: float, p_b: float, correlation: float) -> float:
    """π_D from the two accuracies and the correlation φ of the paired 0/1 outcomes.

    φ is Pearson's correlation of the two outcome indicators (the phi coefficient),
    ``φ = (p11 − p_a·p_b) / √(p_a(1 − p_a)·p_b(1 − p_b))``, so
    ``p11 = p_a·p_b + φ·√(p_a(1 − p_a)·p_b(1 − p_b))`` and
    ``π_D = p10 + p01 = p_a + p_b − 2·p11``
    (Fleiss, Levin & Paik 2003, *Statistical Methods for Rates and Proportions*, 3rd ed.,
    §13.1; the same conversion as R ``powertools::pss.mcnemar.test``). φ is bounded by the
    margins: ``p11`` must lie in ``[max(0, p_a + p_b − 1), min(p_a, p_b)]``. Symmetric in
    the two accuracies.
    """
    spread = math.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    p11 = p_a * p_b + correlation * spread
    lo, hi = max(0.0, p_a + p_b - 1.0), min(p_a, p_b)
    tol = 1e-12
    if spread == 0.0 or not lo - tol <= p11 <= hi + tol:
        if spread == 0.0:
            raise ParameterError(
                "impossible: accuracies {p_a:.4g} and {p_b:.4g} leave no variance, so the "
                "{correlation} of their outcomes is undefined.", ["correlation"], p_a=p_a,
                p_b=p_b)
        phi_lo, phi_hi = (lo - p_a * p_b) / spread, (hi - p_a * p_b) / spread
        raise ParameterError(
            "impossible: {correlation} = {given} is outside the range "
            "[{phi_lo:.4f}, {phi_hi:.4f}] that accuracies {p_a:.4g} and {p_b:.4g} allow.",
            ["correlation"], given=correlation, phi_lo=phi_lo, phi_hi=phi_hi, p_a=p_a, p_b=p_b)
    return p_a + p_b - 2.0 * min(max(p11, lo), hi)


@dataclass(frozen=True)
class PairedDesign:
    """A feasible paired design: effect δ > 0, discordance π_D ≥ δ, optional baseline."""

    effect: float
    discordance: float
    baseline: float | None
    correlation: float | None


def paired_design(
    effect: object,
    *,
    baseline: float | None,
    discordance: object,
    correlation: object,
    alternative: str,
) -> PairedDesign:
    """Validate (δ, acc(b), π_D | φ) and return the design; impossible inputs raise InputError.

    The first condition's accuracy is ``acc(a) = baseline + δ`` (``baseline − δ`` for
    ``alternative='less'``, where the claim is that a is *less* accurate by δ).
    """
    delta = check_effect(effect)
    p_b = None if baseline is None else check_probability(baseline, "baseline")
    p_a = None
    if p_b is not None:
        p_a = accuracy_of_a(p_b, delta, alternative)
        if not 0.0 <= p_a <= 1.0:
            sign = "−" if alternative == "less" else "+"
            raise ParameterError(
                "impossible: {baseline} {sign} {effect} = {p_b:g} {sign} {delta:g} = "
                "{p_a:g} is not an accuracy in [0, 1] (acc(a) = acc(b) {sign} δ).",
                ["baseline", "effect"], sign=sign, p_b=p_b, delta=delta, p_a=p_a)
    if discordance is not None and correlation is not None:
        raise ParameterError("Pass either {discordance} or {correlation}, not both.",
                             ["discordance", "correlation"])
    if correlation is not None:
        phi = check_number(correlation, "correlation", low=-1.0, high=1.0)
        if p_a is None or p_b is None:
            raise _correlation_needs_baseline()
        pi_d = discordance_from_correlation(p_a, p_b, phi)
        if not 0.0 < pi_d < 1.0 or pi_d < delta:
            raise ParameterError(
                "impossible: {correlation} = {given} gives a discordance of {pi_d:g}.",
                ["correlation"], given=correlation, pi_d=pi_d)
        return PairedDesign(delta, pi_d, p_b, phi)
    if discordance is None:
        raise ParameterError(
            "{discordance} (π_D, the share of items on which the two conditions disagree) or "
            "{correlation} is required: McNemar's power depends on it as much as on the effect.",
            ["discordance", "correlation"])
    pi_d = check_probability(discordance, "discordance")
    if pi_d < delta:
        raise ParameterError(
            "impossible: π_D must be ≥ |δ|: {discordance} = {pi_d:g} is below {effect} = "
            "{delta:g} (a difference of δ needs at least δ of the items to be discordant).",
            ["discordance", "effect"], pi_d=pi_d, delta=delta)
    if p_a is not None and p_b is not None:
        # each condition's wins over the other must fit in the margins:
        # p10 = P(a right, b wrong) ≤ min(acc(a), 1 − acc(b)), p01 likewise
        p10 = (pi_d + delta) / 2.0 if alternative != "less" else (pi_d - delta) / 2.0
        p01 = pi_d - p10
        tol = 1e-12
        if p10 > min(p_a, 1.0 - p_b) + tol or p01 > min(p_b, 1.0 - p_a) + tol:
            raise ParameterError(
                "impossible: {discordance} = {pi_d:g} with {baseline} = {p_b:g} and {effect} = "
                "{delta:g} needs P(a correct, b wrong) = {p10:g} ≤ {max10:g} and "
                "P(a wrong, b correct) = {p01:g} ≤ {max01:g}.",
                ["discordance", "baseline", "effect"], pi_d=pi_d, p_b=p_b, delta=delta, p10=p10,
                max10=min(p_a, 1 - p_b), p01=p01, max01=min(p_b, 1 - p_a))
    return PairedDesign(delta, pi_d, p_b, None)


def unpaired_accuracies(
    effect: float, baseline: float | None, alternative: str
) -> tuple[float, float]:
    """``(acc(a), acc(b))`` of the unpaired design.

    Without a baseline the two accuracies are centred on ½, where the variance
    ``p(1 − p)`` peaks: the largest (most conservative) n for a given difference.
    """
    if baseline is None:
        high, low = 0.5 + effect / 2.0, 0.5 - effect / 2.0
        return (low, high) if alternative == "less" else (high, low)
    p_a = accuracy_of_a(baseline, effect, alternative)
    if not 0.0 <= p_a <= 1.0:
        raise ParameterError(
            "impossible: {baseline} ± {effect} = {p_a:g} is not an accuracy in [0, 1].",
            ["baseline", "effect"], p_a=p_a)
    return p_a, baseline


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


# ------------------------------------------------------------ what every planner checks
class UnreachablePowerError(ParameterError):
    """No design of the size asked for reaches the target power: a part held fixed (the
    seeds, the items, the candidate's own seed variation) caps it.

    ``reason`` says what caps it, in one clause without parameters (a table's note); it is
    also a field of the template. By default it is the whole message.
    """

    def __init__(self, template: str, parameters: Iterable[str] = (), /, *,
                 reason: str | None = None, **values: Any) -> None:
        if reason is not None:
            values["reason"] = reason
        super().__init__(template, parameters, **values)
        self.reason = str(self) if reason is None else reason


def _correlation_needs_baseline() -> ParameterError:
    return ParameterError("{correlation} needs {baseline} (π_D follows from both accuracies).",
                          ["correlation", "baseline"])


def exactly_one_none(**values: object) -> str:
    """Name of the single argument left ``None`` (pingouin's solve-for-the-missing pattern)."""
    missing = [name for name, value in values.items() if value is None]
    if len(missing) != 1:
        names = ", ".join("{" + name + "}" for name in values)
        raise ParameterError(
            "Exactly one of " + names + " must be None (it is solved for); got {count} None.",
            list(values), count=len(missing))
    return missing[0]


def check_test_settings(alpha: object, alternative: object, method: object,
                        methods: tuple[str, ...]) -> tuple[float, str, int, str]:
    alpha_ = check_probability(alpha, "alpha")
    alternative_ = check_choice(alternative, "alternative", ALTERNATIVES)
    method_ = check_choice(method, "method", methods)
    return alpha_, alternative_, 2 if alternative_ == "two-sided" else 1, method_


def check_power(power: object, alpha: float, sides: int) -> float:
    p = check_probability(power, "power")
    if p <= alpha / sides:
        raise ParameterError(
            "{power} must exceed the test's size alpha/sides = {size:g}, got {given!r}.",
            ["power"], size=alpha / sides, given=power)
    return p


def rounded_n(n_unrounded: float, effect: float) -> int:
    """Round a solved n up; an n beyond :data:`MAX_ITEMS` means the effect is undetectable."""
    if not n_unrounded <= MAX_ITEMS:
        raise ParameterError(
            "{effect} = {value:g} is too small to detect: it needs more than "
            "{limit:.0e} items.", ["effect"], value=effect, limit=MAX_ITEMS)
    # 1e-9 guards against 520.0000000001 from floating point becoming 521
    return max(1, math.ceil(n_unrounded - 1e-9))


def effect_upper_bound(
    baseline: object, discordance: object, correlation: object, alternative: str
) -> float:
    """Largest δ worth searching when solving for the effect; validates the other inputs."""
    if discordance is None and correlation is None:
        raise ParameterError(
            "{discordance} (π_D) or {correlation} is required to solve for the effect.",
            ["discordance", "correlation"])
    upper = 1.0
    if baseline is not None:
        p_b = check_probability(baseline, "baseline")
        upper = p_b if alternative == "less" else 1.0 - p_b
    elif correlation is not None:
        raise _correlation_needs_baseline()
    if discordance is not None:
        upper = min(upper, check_probability(discordance, "discordance"))
    return upper


def smallest_int(reaches: Any, low: int, high: int, start: int | None = None) -> int | None:
    """Smallest integer in [low, high] where the increasing predicate ``reaches`` holds.

    ``start`` is a guess: the bracket grows from it by factors of 1.5 either way, then
    bisection closes it, so a good guess needs few evaluations.
    """
    guess = low if start is None else min(max(int(start), low), high)
    if reaches(guess):
        hi = guess
        lo = guess
        while lo > low:
            lo = max(low, int(lo / 1.5))
            if not reaches(lo):
                break
            hi = lo
        else:
            return hi
    else:
        lo = hi = guess
        while True:
            if hi >= high:
                return None
            lo, hi = hi, min(high, max(hi + 1, int(hi * 1.5)))
            if reaches(hi):
                break
    while hi - lo > 1:  # invariant: not reaches(lo), reaches(hi)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi
