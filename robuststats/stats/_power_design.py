"""Input validation and design conversions shared by the power functions.

Paired design (condition A = baseline with accuracy ``p1``, condition B with ``p2``):
``p10`` = P(A correct, B wrong), ``p01`` = P(A wrong, B correct), ``p11`` = both correct.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real

from robuststats.errors import InputError, RobuststatsWarning

__all__ = [
    "ALTERNATIVES",
    "PairedDesign",
    "PoolSizeWarning",
    "check_alpha",
    "check_exactly_one_none",
    "check_positive_int",
    "check_probability",
    "design_effect",
    "discordance_from_correlation",
    "paired_design",
    "sides_of",
    "solve_increasing",
]

ALTERNATIVES = ("two-sided", "greater", "less")


class PoolSizeWarning(RobuststatsWarning):
    """The required number of items exceeds the item pool (e.g. GSM8K test: 1,319 items).

    Past the pool, effective sample size can only come from repeated noisy evaluations or
    training seeds, which are clustered by item: see ``repeats`` and ``icc``.
    """


def _is_number(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def check_probability(name: str, value: object, *, closed: bool = False) -> float:
    """``value`` as a float in (0, 1) (or [0, 1] when ``closed``), else :class:`InputError`."""
    ok = _is_number(value) and math.isfinite(float(value))  # type: ignore[arg-type]
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (0.0 <= v <= 1.0) if closed else (0.0 < v < 1.0)
    if not ok:
        interval = "[0, 1]" if closed else "(0, 1)"
        raise InputError(f"`{name}` must be a probability in {interval}, got {value!r}.")
    return v


def check_alpha(alpha: object) -> float:
    return check_probability("alpha", alpha)


def check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not (
        isinstance(value, Integral) or (_is_number(value) and float(value).is_integer())  # type: ignore[arg-type]
    ):
        raise InputError(f"`{name}` must be a positive integer, got {value!r}.")
    if int(value) < 1:  # type: ignore[arg-type]
        raise InputError(f"`{name}` must be a positive integer, got {value!r}.")
    return int(value)  # type: ignore[arg-type]


def check_exactly_one_none(**values: object) -> str:
    """Name of the single argument left ``None`` (pingouin's solve-for-the-missing pattern)."""
    missing = [name for name, value in values.items() if value is None]
    if len(missing) != 1:
        names = ", ".join(f"`{name}`" for name in values)
        raise InputError(
            f"Exactly one of {names} must be None (it is solved for); got {len(missing)} None."
        )
    return missing[0]


def sides_of(alternative: object) -> int:
    if alternative not in ALTERNATIVES:
        raise InputError(
            f"`alternative` must be one of {', '.join(ALTERNATIVES)}, got {alternative!r}."
        )
    return 2 if alternative == "two-sided" else 1


def design_effect(repeats: object, icc: object) -> tuple[int, float, float]:
    """``(m, ρ, deff)`` with Kish's design effect ``deff = 1 + (m − 1)·ρ``.

    ``m`` evaluations of each item whose outcomes correlate with intra-item correlation
    ``ρ`` carry the information of ``m / deff`` independent items (Kish 1965, *Survey
    Sampling*, §5.4; Donner & Klar 2000, *Design and Analysis of Cluster Randomization
    Trials*, ch. 5).
    """
    m = check_positive_int("repeats", repeats)
    if not _is_number(icc) or not 0.0 <= float(icc) <= 1.0:  # type: ignore[arg-type]
        raise InputError(f"`icc` must be a number in [0, 1], got {icc!r}.")
    rho = float(icc)  # type: ignore[arg-type]
    return m, rho, 1.0 + (m - 1) * rho


def discordance_from_correlation(p1: float, p2: float, correlation: float) -> float:
    """π_D from the two accuracies and the correlation φ of the paired 0/1 outcomes.

    φ is Pearson's correlation of the two outcome indicators (the phi coefficient),
    ``φ = (p11 − p1·p2) / √(p1(1 − p1)·p2(1 − p2))``, so
    ``p11 = p1·p2 + φ·√(p1(1 − p1)·p2(1 − p2))`` and
    ``π_D = p10 + p01 = p1 + p2 − 2·p11``
    (Fleiss, Levin & Paik 2003, *Statistical Methods for Rates and Proportions*, 3rd ed.,
    §13.1; the same conversion as R ``powertools::pss.mcnemar.test``). φ is bounded by the
    margins: ``p11`` must lie in ``[max(0, p1 + p2 − 1), min(p1, p2)]``.
    """
    spread = math.sqrt(p1 * (1 - p1) * p2 * (1 - p2))
    p11 = p1 * p2 + correlation * spread
    lo, hi = max(0.0, p1 + p2 - 1.0), min(p1, p2)
    tol = 1e-12
    if not lo - tol <= p11 <= hi + tol:
        phi_lo, phi_hi = (lo - p1 * p2) / spread, (hi - p1 * p2) / spread
        raise InputError(
            f"impossible: `correlation` = {correlation} is outside the range "
            f"[{phi_lo:.4f}, {phi_hi:.4f}] that accuracies {p1:.4g} and {p2:.4g} allow."
        )
    return p1 + p2 - 2.0 * min(max(p11, lo), hi)


@dataclass(frozen=True)
class PairedDesign:
    """A feasible paired design: effect δ > 0, discordance π_D ≥ δ, optional baseline."""

    effect: float
    discordance: float
    baseline: float | None
    correlation: float | None


def paired_design(
    effect: float,
    *,
    baseline: float | None,
    discordance: float | None,
    correlation: float | None,
    alternative: str,
) -> PairedDesign:
    """Validate (δ, p1, π_D | φ) and return the design; impossible inputs raise InputError.

    The second condition's accuracy is ``p2 = p1 + δ`` (``p1 − δ`` for
    ``alternative='less'``, where the claim is that B is *less* accurate by δ).
    """
    if not _is_number(effect) or not math.isfinite(float(effect)) or float(effect) <= 0:
        raise InputError(
            f"`effect` must be > 0 (the accuracy difference to detect; give its size and "
            f"choose the direction with `alternative`), got {effect!r}."
        )
    delta = float(effect)
    if delta >= 1:
        raise InputError(f"`effect` must be a difference of accuracies below 1, got {effect!r}.")
    p1 = None if baseline is None else check_probability("baseline", baseline)
    p2 = None
    if p1 is not None:
        p2 = p1 - delta if alternative == "less" else p1 + delta
        if not 0.0 <= p2 <= 1.0:
            raise InputError(
                f"impossible: `baseline` + `effect` = {p1:g} {'−' if alternative == 'less' else '+'} "
                f"{delta:g} = {p2:g} is not an accuracy in [0, 1]."
            )
    if discordance is not None and correlation is not None:
        raise InputError("Pass either `discordance` or `correlation`, not both.")
    if correlation is not None:
        if not _is_number(correlation) or not -1.0 <= float(correlation) <= 1.0:
            raise InputError(f"`correlation` must be a number in [-1, 1], got {correlation!r}.")
        if p1 is None or p2 is None:
            raise InputError("`correlation` needs `baseline` (π_D follows from both accuracies).")
        pi_d = discordance_from_correlation(p1, p2, float(correlation))
        if not 0.0 < pi_d < 1.0:
            raise InputError(
                f"impossible: `correlation` = {correlation} gives a discordance of {pi_d:g}."
            )
        return PairedDesign(delta, pi_d, p1, float(correlation))
    if discordance is None:
        raise InputError(
            "`discordance` (π_D, the share of items on which the two conditions disagree) or "
            "`correlation` is required: McNemar's power depends on it as much as on the effect."
        )
    pi_d = check_probability("discordance", discordance)
    if pi_d < delta:
        raise InputError(
            f"impossible: π_D must be ≥ |δ|: `discordance` = {pi_d:g} is below `effect` = "
            f"{delta:g} (a difference of δ needs at least δ of the items to be discordant)."
        )
    if p1 is not None:
        # the better condition's wins over the worse one must fit in the margins
        lose_a = (pi_d - delta) / 2.0 if alternative != "less" else (pi_d + delta) / 2.0
        win_b = (pi_d + delta) / 2.0 if alternative != "less" else (pi_d - delta) / 2.0
        if lose_a > p1 + 1e-12 or win_b > 1.0 - p1 + 1e-12:
            raise InputError(
                f"impossible: `discordance` = {pi_d:g} with `baseline` = {p1:g} and `effect` = "
                f"{delta:g} needs P(A correct, B wrong) = {lose_a:g} ≤ {p1:g} and "
                f"P(A wrong, B correct) = {win_b:g} ≤ {1 - p1:g}."
            )
    return PairedDesign(delta, pi_d, p1, None)


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
        if val is None:
            prev = None
            continue
        if val < 0:
            prev = x
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
    for _ in range(200):
        cand = hi / 2
        val = excess(cand)
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
