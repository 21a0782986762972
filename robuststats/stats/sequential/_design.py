"""Group-sequential boundaries from spending functions, their operating characteristics and
repeated confidence intervals.

Efficacy. At look ``k`` the upper bound ``b_k`` solves ``P_0(Z_k ≥ b_k, no stop before k) =
f(t_k; α) − f(t_{k−1}; α)`` (Lan & DeMets 1983) by Brent's method on the recursion of
:mod:`._recursion`. Two-sided designs are symmetric: the region is ``(−b_k, b_k)`` and each
side spends ``f(t; α/2)``.

Futility (one-sided designs). Given a drift ``η = θ√I_K`` (the planned effect in units of
the last look's standard error), the lower bound ``a_k`` solves ``P_η(Z_k ≤ a_k, no stop
before k) = f(t_k; β) − f(t_{k−1}; β)`` (β-spending: Pampallona, Tsiatis & Kim 2001;
Jennison & Turnbull 2000, ch. 7), capped at ``b_k``; the last look has ``a_K = b_K``, so the
design always ends with a decision. *Binding*: the efficacy bounds are computed on the
region ``(a_j, b_j)``, so they are lower and the type I error is ``α`` only if every futility
stop is obeyed. *Non-binding*: the efficacy bounds ignore the futility bound (region
``(−∞, b_j)``), so ignoring a futility stop never inflates the type I error; with the
futility bound obeyed the error is below ``α`` (Jennison & Turnbull 2000, ch. 7; the
convention of gsDesign's ``test.type = 4`` and rpact's ``bindingFutility = FALSE``). With the
information fixed (the looks are given), the power is what it is: ``β`` sets only the shape
of the futility bound, and :meth:`GroupSequentialDesign.operating` reports the power.

Repeated confidence intervals. For a two-sided design at level ``α``, the intervals
``θ̂_k ± b_k·se_k`` (k = 1..K) cover θ simultaneously with probability ``1 − α``, whatever
rule stops the study, so the interval at the look where it stopped is valid after
sequential stopping (Jennison & Turnbull 1989, JRSS B 51:305–361; 2000, ch. 9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy.optimize import brentq

from robuststats._validation import check_choice, check_number, check_probability
from robuststats.errors import InputError
from robuststats.stats.sequential._recursion import Crossing, crossing, crossing_at, next_density
from robuststats.stats.sequential._spending import check_spending, spent

__all__ = ["FUTILITY", "GroupSequentialDesign", "OperatingCharacteristics",
           "group_sequential_design"]

FUTILITY = ("none", "binding", "non_binding")
_TOO_SMALL = 1e-15  # an increment below this spends nothing: the bound is +inf
_Z_MAX = 38.0


@dataclass(frozen=True)
class OperatingCharacteristics:
    """What a design does at one drift ``η = θ√I_K``.

    Attributes
    ----------
    drift : float
    reject : float
        Probability of crossing an efficacy bound (the power, or the type I error at 0).
    stop : numpy.ndarray
        Probability of stopping at each look (the last look takes every path left).
    expected_fraction : float
        Expected information at stopping as a fraction of ``I_K`` (with seeds as the
        information, the expected number of seeds over the maximum).
    """

    drift: float
    reject: float
    stop: np.ndarray
    expected_fraction: float


@dataclass(frozen=True)
class GroupSequentialDesign:
    """Boundaries of a group-sequential test on the z scale.

    Attributes
    ----------
    fractions : tuple of float
        Information fractions ``t_k = I_k/I_K`` of the looks (the last is 1).
    alpha : float
        Type I error: two-sided (both tails together) when ``sides == 2``, else one-sided.
    sides : int
    spending : str
        ``"obf"``, ``"pocock"`` or ``"hsd(γ)"`` (:mod:`._spending`).
    futility : str
        ``"none"``, ``"binding"`` or ``"non_binding"``.
    beta : float or None
        Type II error spent by the futility bound.
    drift : float or None
        ``η = θ√I_K`` the futility bound was spent under.
    upper, lower : numpy.ndarray
        Efficacy bounds ``b_k`` and the lower bounds: ``−b_k`` (two-sided), futility ``a_k``,
        or ``−inf``.
    alpha_spent : numpy.ndarray
        Cumulative error spent per tail by look k, ``f(t_k; α/sides)``.
    """

    fractions: tuple[float, ...]
    alpha: float
    sides: int
    spending: str
    futility: str
    beta: float | None
    drift: float | None
    upper: np.ndarray
    lower: np.ndarray
    alpha_spent: np.ndarray

    @property
    def nominal(self) -> np.ndarray:
        """One-sided nominal p-value ``Φ̄(b_k)`` at which each look rejects on a tail."""
        return special.ndtr(-self.upper)

    @property
    def futility_nominal(self) -> np.ndarray:
        """One-sided p-value ``Φ̄(a_k)`` above which a look is futile (1 without a bound)."""
        return special.ndtr(-self.lower) if self.futility != "none" else np.ones(len(self.upper))

    def operating(self, drift: float, *, futility_obeyed: bool = True
                  ) -> OperatingCharacteristics:
        """Power, stopping probabilities and expected information at drift ``η``.

        A two-sided design rejects on either tail. ``futility_obeyed=False`` ignores the
        futility bound (the worst case of a non-binding design).
        """
        eta = check_number(drift, "drift")
        lower = self.lower
        if not futility_obeyed and self.futility != "none":
            lower = np.full(len(self.upper), -np.inf)
            lower[-1] = self.upper[-1]
        c = crossing(np.asarray(self.fractions), self.upper, lower, eta)
        reject = float(c.upper.sum() + (c.lower.sum() if self.sides == 2 else 0.0))
        stop = c.stop.copy()
        stop[-1] = max(0.0, 1.0 - stop[:-1].sum())
        return OperatingCharacteristics(eta, reject, stop,
                                        float(stop @ np.asarray(self.fractions)))

    def repeated_interval(self, look: int, estimate: float, se: float
                          ) -> tuple[float, float]:
        """The repeated confidence interval ``θ̂_k ± b_k·se_k`` at look ``look`` (1-based) of
        a two-sided design, simultaneous over looks at level ``1 − α``."""
        if self.sides != 2:
            raise InputError("repeated confidence intervals need a two-sided design "
                             "(sides=2).")
        c = float(self.upper[look - 1])
        return estimate - c * se, estimate + c * se


def _check_fractions(fractions) -> np.ndarray:
    try:
        t = np.asarray(fractions, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"`fractions` must be a sequence of numbers, got {fractions!r}.") \
            from None
    if t.ndim != 1 or len(t) == 0:
        raise InputError(f"`fractions` must be a non-empty sequence, got {fractions!r}.")
    if not (np.all(np.isfinite(t)) and t[0] > 0 and np.all(np.diff(t) > 0)
            and math.isclose(t[-1], 1.0)):
        raise InputError(f"`fractions` must increase strictly from above 0 to 1, got "
                         f"{t.tolist()}.")
    t[-1] = 1.0
    return t


def _solve(target: float, prob) -> float:  # type: ignore[no-untyped-def]
    """The bound ``x`` with ``prob(x) = target`` for a decreasing ``prob``."""
    if target <= _TOO_SMALL:
        return math.inf
    if prob(-_Z_MAX) <= target:
        return -math.inf
    return float(brentq(lambda x: prob(x) - target, -_Z_MAX, _Z_MAX, xtol=1e-10))


def group_sequential_design(
    fractions,
    *,
    alpha: float = 0.05,
    sides: int = 2,
    spending: str = "obf",
    futility: str = "none",
    beta: float = 0.2,
    beta_spending: str | None = None,
    drift: float | None = None,
) -> GroupSequentialDesign:
    """Lan–DeMets boundaries for looks at information ``fractions``.

    ``alpha``: two-sided error when ``sides=2`` (symmetric bounds), one-sided when
    ``sides=1``. ``futility`` (one-sided only) spends ``beta`` with ``beta_spending``
    (default: the same function as ``spending``) under ``drift = θ√I_K``.
    """
    t = _check_fractions(fractions)
    a = check_probability(alpha, "alpha")
    if sides not in (1, 2):
        raise InputError(f"`sides` must be 1 or 2, got {sides!r}.")
    name = check_spending(spending)
    fut = check_choice(futility, "futility", FUTILITY)
    if fut != "none":
        if sides != 1:
            raise InputError("a futility bound needs a one-sided design (sides=1).")
        b_err = check_probability(beta, "beta")
        if drift is None:
            raise InputError("a futility bound needs `drift`, the planned effect over the "
                             "last look's standard error.")
        eta = check_number(drift, "drift", low=0.0)
        b_name = check_spending(beta_spending or name, "beta_spending")
        beta_cum = spent(b_name, t, b_err)
    side_alpha = a / sides
    alpha_cum = spent(name, t, side_alpha)
    k_max = len(t)
    upper, lower = np.full(k_max, np.inf), np.full(k_max, -np.inf)
    null_grid = alt_grid = None
    t_prev = 0.0
    for k in range(k_max):
        inc = alpha_cum[k] - (alpha_cum[k - 1] if k else 0.0)
        g0, tk = null_grid, t[k]
        upper[k] = _solve(inc, lambda x, g=g0, tp=t_prev, tk=tk:
                          crossing_at(g, tp, tk, 0.0, x, True))
        if sides == 2:
            lower[k] = -upper[k]
        elif fut != "none":
            if k == k_max - 1:
                lower[k] = upper[k]
            else:
                b_inc = beta_cum[k] - (beta_cum[k - 1] if k else 0.0)
                ga = alt_grid
                a_k = -_solve(b_inc, lambda x, g=ga, tp=t_prev, tk=tk:
                              crossing_at(g, tp, tk, eta, -x, False))
                lower[k] = min(a_k, upper[k])
        null_low = lower[k] if (sides == 2 or fut == "binding") else -np.inf
        null_grid = next_density(null_grid, t_prev, tk, 0.0, null_low, upper[k])
        if fut != "none":
            alt_grid = next_density(alt_grid, t_prev, tk, eta, lower[k], upper[k])
        t_prev = tk
    return GroupSequentialDesign(
        tuple(float(x) for x in t), a, sides, name, fut,
        b_err if fut != "none" else None, eta if fut != "none" else None,
        upper, lower, alpha_cum)


def crossing_of(design: GroupSequentialDesign, drift: float) -> Crossing:
    """The raw first-crossing probabilities of ``design`` at ``drift``."""
    return crossing(np.asarray(design.fractions), design.upper, design.lower, drift)
