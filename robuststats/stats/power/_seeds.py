"""Power and sample size for a comparison of procedures over k training seeds × n items.

``power_seeds`` solves for whichever of ``effect``, ``n_items``, ``n_seeds`` and ``power``
is left ``None``; ``power_seeds_table`` (:mod:`._seeds_table`) lists the (seeds, items)
combinations that reach a target power. The test is the one the analysis runs with
several seeds, :func:`robuststats.stats.seed_random_test` (formulas:
:mod:`._seeds_formulas` and ``docs/power.md``). Sign rule, *first minus second*: the effect is ``acc(a) − acc(b)``.

The variance components of the per-item difference come from quantities a user can
know or estimate: a 0/±1 difference with discordance π_D and mean δ has variance
``π_D − δ²`` over seeds and items; ``seed_sd`` (the SD over training seeds of the
per-seed accuracy difference, with infinitely many items) takes σ_seed² from it, and
``icc`` (the correlation of an item's differences across seeds) splits the rest into
the item and residual parts:

    σ_seed² = seed_sd²,  σ_item² = icc·(π_D − δ² − σ_seed²),
    σ_resid² = (1 − icc)·(π_D − δ² − σ_seed²).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from robuststats.stats._parameters import (
    ParameterError,
    check_choice,
    check_int,
    check_number,
    check_probability,
)
from robuststats.stats.power._design import (
    ALTERNATIVES,
    MAX_ITEMS,
    PoolSizeWarning,
    UnreachablePowerError,
    check_power,
    effect_upper_bound,
    exactly_one_none,
    paired_design,
    smallest_int,
)
from robuststats.stats.power._formulas import solve_increasing
from robuststats.stats.power._mcnemar import PowerPlan
from robuststats.stats.power._seeds_formulas import (
    SEED_POWER_METHODS,
    expected_dof,
    seed_random_power,
)

if TYPE_CHECKING:
    pass

__all__ = ["MAX_SEEDS", "SeedPowerResult", "TooFewSeedsError", "check_seeds", "power_seeds"]

#: largest number of training seeds a solved ``n_seeds`` may reach
MAX_SEEDS = 10_000


@dataclass(frozen=True)
class SeedPowerResult(PowerPlan):
    """Result of :func:`power_seeds`; one of n_items, n_seeds, power, effect was solved for.

    Attributes
    ----------
    n_items, n_seeds : int
        Items (the same under both conditions and every seed) and training seeds per
        condition; the design has ``n_seeds × n_items`` pairs per comparison.
    power : float
        The target power when solving for a size or the effect; else the computed power.
    achieved_power : float
        Power at the integer design reported (≥ ``power`` when solving for a size).
    effect : float
        Size δ = |acc(a) − acc(b)| of the difference of procedures (> 0).
    discordance, baseline, correlation
        π_D over seeds and items; acc(b) and φ when given.
    seed_sd : float
        SD over training seeds of the per-seed accuracy difference (infinitely many items):
        σ_seed, seeds shifting a and b differently.
    icc : float
        Correlation of an item's differences across seeds (the item share of the
        within-seed variance).
    var_seed, var_item, var_resid : float
        Variance components σ_seed², σ_item², σ_resid² of the per-item difference.
    standard_error : float
        ``√(σ_seed²/k + σ_item²/n + σ_resid²/(kn))``, the SD of the estimated difference.
    dof : float
        Satterthwaite's degrees of freedom at the expected mean squares (≥ k − 1).
    max_power : float
        The power these seeds tend to with infinitely many items: below 1 whenever
        σ_seed > 0, since more items cannot make up for too few seeds. With a seed and an
        item component and 2–3 seeds ``power`` at a finite n can exceed it: more items
        make the seed part (k − 1 df) dominate and the calibrated test tends to the t on
        k − 1 df (``docs/power.md``).
    n_evaluations : int
        ``n_seeds · n_items`` evaluations per condition.
    alpha, alternative, method, solved_for, design
        Test settings; ``design`` is ``"seeds"``.
    pool_size, exceeds_pool
        Items available and whether ``n_items`` exceeds them (a :class:`PoolSizeWarning`).
    """

    n_items: int
    n_seeds: int
    power: float
    achieved_power: float
    effect: float
    discordance: float
    seed_sd: float
    icc: float
    var_seed: float
    var_item: float
    var_resid: float
    standard_error: float
    dof: float
    max_power: float
    n_evaluations: int
    alpha: float
    alternative: str
    method: str
    solved_for: str
    design: str = "seeds"
    baseline: float | None = None
    correlation: float | None = None
    pool_size: int | None = None
    exceeds_pool: bool = False


@dataclass(frozen=True)
class _Components:
    effect: float
    discordance: float
    baseline: float | None
    correlation: float | None
    var_seed: float
    var_item: float
    var_resid: float


class TooFewSeedsError(UnreachablePowerError):
    """No number of items reaches the target power with these seeds (the message says the
    most they reach and the fewest seeds that would do)."""


def _components(effect: object, *, baseline: object, discordance: object,
                correlation: object, seed_sd: float, icc: float,
                alternative: str) -> _Components:
    """Validate the design at δ = ``effect`` and split ``π_D − δ²`` into the components."""
    design = paired_design(effect, baseline=baseline, discordance=discordance,  # type: ignore[arg-type]
                           correlation=correlation, alternative=alternative)
    total = design.discordance - design.effect**2
    within = total - seed_sd**2
    if not within > 0.0:
        raise ParameterError(
            "impossible: {seed_sd} = {sd:g} needs a seed variance {var:.4g} larger than the "
            "whole variance of the per-item difference, π_D − δ² = {pi_d:g} − {delta:g}² = "
            "{total:.4g}.", ["seed_sd"], sd=seed_sd, var=seed_sd**2, pi_d=design.discordance,
            delta=design.effect, total=total)
    return _Components(design.effect, design.discordance, design.baseline,
                       design.correlation, seed_sd**2, icc * within, (1.0 - icc) * within)


def _power_at(c: _Components, k: int, n: int, alpha: float, sides: int, method: str) -> float:
    return seed_random_power(k, n, c.effect, c.var_seed, c.var_item, c.var_resid, alpha,
                             sides, method)


def power_seeds(
    effect: float | None = None,
    n_items: int | None = None,
    n_seeds: int | None = None,
    power: float | None = None,
    *,
    discordance: float | None = None,
    seed_sd: float = 0.0,
    icc: float = 0.0,
    baseline: float | None = None,
    correlation: float | None = None,
    alpha: float = 0.05,
    alternative: str = "two-sided",
    method: str = "seed-random",
    pool_size: int | None = None,
) -> SeedPowerResult:
    """Power of the seed-random t test for k training seeds × n items, or the design size.

    Exactly one of ``effect``, ``n_items``, ``n_seeds`` and ``power`` must be None; it is
    solved for (sizes are the smallest integers reaching ``power``). The question is one
    of procedures: does training procedure a beat b over seeds and items?

    Parameters
    ----------
    effect : float or None
        Size δ of the difference of procedures, acc(a) − acc(b), in (0, 1).
    n_items : int or None
        Items, each evaluated under both conditions and every seed (≥ 2).
    n_seeds : int or None
        Training seeds per condition (≥ 2; one seed cannot separate procedures from
        trained models: plan it with :func:`power_mcnemar`, the exact McNemar test).
    power : float or None
        Target power in (α/sides, 1).
    discordance, correlation, baseline
        π_D over seeds and items, or the correlation φ of the paired outcomes with the
        baseline acc(b), as for :func:`power_mcnemar`.
    seed_sd : float
        SD over training seeds of the per-seed accuracy difference acc_s(a) − acc_s(b)
        (infinitely many items), ≥ 0; estimate it from pilot outcomes with
        :func:`estimate_seed_components`.
    icc : float
        Correlation of an item's differences across seeds, in [0, 1]: 0 when a's
        advantage is the same on every item, larger when it is concentrated on some.
    alpha, alternative
        As for :func:`power_mcnemar`.
    method : {"seed-random", "noncentral-t"}
        ``"seed-random"``: the power of the test as it runs (its truncated variance and
        Satterthwaite df averaged over the mean squares' distribution); ``"noncentral-t"``:
        the closed-form noncentral t at the expected mean squares.
    pool_size : int, optional
        Items available; a :class:`PoolSizeWarning` says when ``n_items`` exceeds it.

    Returns
    -------
    SeedPowerResult

    Raises
    ------
    InputError
        For impossible designs (as :func:`power_mcnemar`, and ``seed_sd² ≥ π_D − δ²``),
        and when no number of items can reach the target with ``n_seeds`` seeds: the
        message gives the most power those seeds reach and the fewest seeds that do.

    Examples
    --------
    >>> r = power_seeds(effect=0.03, n_seeds=5, power=0.8, discordance=0.2, seed_sd=0.005)
    >>> r.n_items, round(r.max_power, 3)
    (1170, 0.999)
    """
    solve = exactly_one_none(effect=effect, n_items=n_items, n_seeds=n_seeds, power=power)
    alt = check_choice(alternative, "alternative", ALTERNATIVES)
    sides = 2 if alt == "two-sided" else 1
    alpha_ = check_probability(alpha, "alpha")
    method_ = check_choice(method, "method", SEED_POWER_METHODS)
    sd = check_number(seed_sd, "seed_sd", low=0.0)
    rho = check_number(icc, "icc", low=0.0, high=1.0)
    pool = None if pool_size is None else check_int(pool_size, "pool_size", low=1)
    target = None if power is None else check_power(power, alpha_, sides)
    n = None if n_items is None else check_int(n_items, "n_items", low=2)
    k = None if n_seeds is None else check_seeds(n_seeds)
    settings = dict(baseline=baseline, discordance=discordance, correlation=correlation,
                    seed_sd=sd, icc=rho, alternative=alt)

    if solve == "effect":
        assert n is not None and k is not None and target is not None
        upper = effect_upper_bound(baseline, discordance, correlation, alt)
        delta = solve_increasing(
            lambda d: _power_at(_components(d, **settings), k, n, alpha_, sides, method_),
            upper, target, what=f"effect up to {upper:g}")
        comp = _components(delta, **settings)
    else:
        comp = _components(effect, **settings)
    if solve == "n_items":
        assert k is not None and target is not None
        n = _solve_items(comp, k, target, alpha_, sides, method_)
    elif solve == "n_seeds":
        assert n is not None and target is not None
        found = smallest_int(
            lambda kk: _power_at(comp, kk, n, alpha_, sides, method_) >= target, 2, MAX_SEEDS)
        if found is None:
            raise UnreachablePowerError(
                "{effect} = {value:g} needs more than {limit} seeds with {n} items to reach "
                "power {target:g}.", ["effect"], value=comp.effect, limit=MAX_SEEDS, n=n,
                target=target)
        k = found
    assert n is not None and k is not None
    achieved = _power_at(comp, k, n, alpha_, sides, method_)
    exceeds = pool is not None and n > pool
    if exceeds:
        warnings.warn(
            f"n_items = {n} exceeds the item pool of {pool}: add seeds instead (see "
            f"power_seeds_table), or repeat the noisy evaluations.",
            PoolSizeWarning, stacklevel=2,
        )
    return SeedPowerResult(
        n_items=n, n_seeds=k, power=float(achieved if target is None else target),
        achieved_power=achieved, effect=comp.effect, discordance=comp.discordance,
        seed_sd=sd, icc=rho, var_seed=comp.var_seed, var_item=comp.var_item,
        var_resid=comp.var_resid,
        standard_error=math.sqrt(comp.var_seed / k + comp.var_item / n
                                 + comp.var_resid / (k * n)),
        dof=expected_dof(k, n, comp.var_seed, comp.var_item, comp.var_resid),
        max_power=_max_power(comp, k, alpha_, sides, method_), n_evaluations=k * n,
        alpha=alpha_, alternative=alt, method=method_, solved_for=solve,
        baseline=comp.baseline, correlation=comp.correlation, pool_size=pool,
        exceeds_pool=exceeds,
    )


def check_seeds(value: object, name: str = "n_seeds") -> int:
    k = check_int(value, name, low=1)
    if k < 2:
        raise ParameterError.about(
            name, " must be ≥ 2, got 1: one seed cannot tell procedures from trained models "
            "(plan one seed with power_mcnemar, the exact McNemar test).")
    if k > MAX_SEEDS:
        raise ParameterError.about(name, f" must be at most {MAX_SEEDS}, got {k}.")
    return k


def _max_power(c: _Components, k: int, alpha: float, sides: int, method: str) -> float:
    """Power with ``k`` seeds and (practically) infinitely many items."""
    if c.var_seed == 0.0:
        return 1.0
    return _power_at(c, k, MAX_ITEMS, alpha, sides, method)


def _solve_items(c: _Components, k: int, target: float, alpha: float, sides: int,
                 method: str) -> int:
    def reaches(nn: int) -> bool:
        return _power_at(c, k, nn, alpha, sides, method) >= target

    ceiling = _max_power(c, k, alpha, sides, method)
    if ceiling < target:
        # with a seed component the calibrated test's power need not grow with n: more
        # items make the seed part (k − 1 df) dominate, so a finite n can do better than
        # the limit; scan a log grid of n and bisect on the rising side
        import numpy as np

        grid = np.unique(np.round(np.logspace(np.log10(2.0), 8.0, 49)).astype(int))
        powers = np.array([_power_at(c, k, int(m), alpha, sides, method) for m in grid])
        reached = np.flatnonzero(powers >= target)
        if reached.size == 0:
            fewest = smallest_int(
                lambda kk: _max_power(c, kk, alpha, sides, method) >= target, k, MAX_SEEDS)
            advice = (f"at least {fewest} seeds are needed" if fewest is not None
                      else f"no number of seeds up to {MAX_SEEDS} is enough")
            best = int(np.argmax(powers))
            where = ("however many items" if ceiling >= powers[best] - 1e-4
                     else f"(the most, at about {int(grid[best])} items)")
            raise TooFewSeedsError(
                "with {seed_sd} = {sd:g}, {k} seeds reach at most power {most:.3f} {where}: "
                "more items cannot make up for too few seeds; {advice} for power {target:g}.",
                ["seed_sd"], sd=math.sqrt(c.var_seed), k=k,
                most=max(ceiling, float(powers[best])), where=where, advice=advice,
                target=target)
        j = int(reached[0])  # bisect on the rising side, between grid[j − 1] and grid[j]
        return smallest_int(reaches, int(grid[j - 1]) if j > 0 else 2, int(grid[j]),
                            int(grid[j]))
    found = smallest_int(reaches, 2, MAX_ITEMS, _normal_items(c, k, target, alpha, sides))
    if found is None:  # pragma: no cover - the ceiling above already reaches the target
        raise ParameterError("{effect} = {value:g} needs more than {limit:.0e} items.",
                             ["effect"], value=c.effect, limit=MAX_ITEMS)
    return found


def _normal_items(c: _Components, k: int, target: float, alpha: float, sides: int) -> int:
    """The items a z test would need: a start for the search (the t test needs more)."""
    from robuststats.stats.power._formulas import z_upper

    allowed = (c.effect / (z_upper(alpha / sides) + z_upper(1.0 - target))) ** 2
    room = allowed - c.var_seed / k
    if room <= 0:
        return MAX_ITEMS
    return max(2, min(MAX_ITEMS, math.ceil((c.var_item + c.var_resid / k) / room)))
