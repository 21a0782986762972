"""The gate's three questions, each a decision rule on the same estimate and variance.

With T the contrast on the test scale (``log θ_c − log θ_b`` for a relative margin,
``θ_c − θ_b`` for an absolute one), ``se`` its standard error, ``t`` the calibrated
one-sided critical value at ``alpha`` and ``d`` the margin:

* ``non-inferiority`` (``--max-degradation d``): H0 ``T ≤ −d`` (relative ``log(1 − d)``);
  pass when the lower bound ``T − t·se > −d``.
* ``superiority`` (``--min-improvement d``, "better by at least d"): H0 ``T ≤ d``
  (relative ``log(1 + d)``); pass when ``T − t·se > d``. ``d = 0`` is plain superiority.
* ``equivalence`` (``--equivalence d``, "within d"): H0 ``|T| ≥ d``, two one-sided tests
  (TOST; Schuirmann 1987), each at ``alpha``: pass when ``T − t·se > −d`` and
  ``T + t·se < d``, i.e. the two-sided ``1 − 2·alpha`` interval lies inside ``(−d, d)``.
  Relative: ``(log(1 − d), −log(1 − d))``, symmetric on the log scale, so ``d = 0.2`` is
  the 0.80–1.25 ratio range of bioequivalence. The p-value is the larger of the two.

Requiring every level to pass keeps the intersection–union argument of the gate (Berger
1982): each question's level-``alpha`` test per level, no adjustment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy import special

from robuststats.stats import noncentral_t_power

__all__ = ["QUESTIONS", "Decision", "decide", "nulls", "power_note"]

QUESTIONS = ("non-inferiority", "superiority", "equivalence")


def nulls(question: str, d: float, relative: bool) -> tuple[float, float | None]:
    """The null boundaries on the test scale: the lower one, and the upper one for
    equivalence (None for a one-sided question)."""
    if question == "superiority":
        return (math.log1p(d) if relative else d), None
    low = math.log1p(-d) if relative else -d
    return low, (-low if question == "equivalence" else None)


@dataclass(frozen=True)
class Decision:
    """One level's test: statistic and p-value of the deciding one-sided test (the larger
    p of TOST), the one-sided ``1 − alpha`` bounds (``upper`` NaN for a one-sided
    question) and the decision."""

    statistic: float
    pvalue: float
    lower: float
    upper: float
    passed: bool


def decide(est: float, se: float, dof: float, ref: Any, alpha: float, low: float,
           high: float | None) -> Decision:
    """The decision rule of the module docstring; ``ref`` is the calibrated reference
    (``critical_one_sided``, ``tail``) or None for Student's t on ``dof``."""
    if ref is not None:
        crit, tail = ref.critical_one_sided(1.0 - alpha), ref.tail
    else:
        crit = float(special.stdtrit(dof, 1.0 - alpha))
        tail = lambda t: float(special.stdtr(dof, -t))  # noqa: E731 - P(T >= t)
    t_low = (est - low) / se
    lower = est - crit * se
    if high is None:
        return Decision(float(t_low), float(tail(t_low)), lower, math.nan, bool(lower > low))
    t_up = (est - high) / se
    upper = est + crit * se
    p_low, p_up = float(tail(t_low)), float(tail(-t_up))
    passed = bool(lower > low and upper < high)
    if p_low >= p_up:
        return Decision(float(t_low), p_low, lower, upper, passed)
    return Decision(float(t_up), p_up, lower, upper, passed)


def power_note(question: str, shift: float, se: float, dof: float, alpha: float,
               detect: Any) -> tuple[float, float]:
    """``(smallest margin with 80 % power, power at the margin)`` on the test scale, for a
    candidate exactly as good as the baseline. ``shift`` is the margin's distance from 0;
    ``detect(power)`` solves the one-sided t for a power. Equivalence uses
    ``P(pass) ≈ 2·P1 − 1`` (both one-sided tests pass; P1 one side's power), so 80 % needs
    90 % per side. Superiority has no such number (an equal candidate should fail): NaN."""
    if question == "superiority":
        return math.nan, math.nan
    if question == "non-inferiority":
        power = noncentral_t_power(shift / se, dof, alpha, 1) if shift > 0 else float(alpha)
        return float(detect(0.8)), float(power)
    one = noncentral_t_power(shift / se, dof, alpha, 1) if shift > 0 else 0.0
    return float(detect(0.9)), max(0.0, 2.0 * float(one) - 1.0)
