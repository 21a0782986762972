"""Planning a robustness gate: items and seeds for a non-inferiority margin at given power.

The gate (``robuststats gate``, docs/gate.md) compares a candidate with ``k_c`` training
seeds against a baseline with ``k_b`` (different runs: seeds independent) on the same
``n`` items, and passes when the one-sided ``1 − α`` lower bound of the contrast lies above
``−margin``. With the variance components of the linearized metric (one model's seed SD
σ_s, the item × candidate SD σ_d, the seed × item residual SD σ_e; the same for both
sides, as for another run of the same recipe), the contrast has

    Var(T) = σ_s²·h + σ_d²/n + σ_e²·h/n,     h = 1/k_c + 1/k_b,

and the gate's variance estimate (:func:`robuststats.gate.unpaired_variance`) is built from
scaled χ² mean squares. With ``k_eff = 1/h`` it has exactly the form of the seed-random t's
``V = [max(MS_seed, MS_resid) + max(MS_item − MS_resid, 0)]/(k_eff·n)``, with E MS_seed = nσ_s² + σ_e²,
E MS_item = k_eff·σ_d² + σ_e², E MS_resid = σ_e², but other degrees of freedom:

* one candidate model (``k_c = 1``): MS_seed and MS_resid are the baseline's, on
  ``k_b − 1`` and ``(k_b − 1)(n − 1)`` df; MS_item is the per-item difference's, on
  ``n − 1`` df; ν is bounded below by ``k_b − 1``;
* several candidate seeds: the two seed mean squares (and the two residuals) are combined
  into one scaled χ² with Satterthwaite's df at their expectations (an approximation; it
  is exact for the pooled two-sample t when only the seed component is present).

The power of passing when the true contrast is ``δ`` (0: the candidate is as good as the
baseline) is the probability that the one-sided t test of H0 "contrast ≤ −margin" rejects:
``Φ((margin + δ − t_ν √V)/√Var(T))`` averaged over the mean squares by the same
Gauss–Legendre product rule as :func:`robuststats.stats.power_seeds`
(:mod:`._seeds_formulas`). With only a seed component and one candidate model it is
the noncentral t power of R ``pwr::pwr.t.test(n = k_b, d = (margin + δ)/(σ_s √(h·k_b)),
type = "one.sample", alternative = "greater")``, reproduced in the tests.

For a relative margin (``margin_type="relative"``) everything is on the log scale: the
components are relative SDs (of ``log`` retention, ≈ coefficients of variation) and the
margin ``m`` enters as ``−log(1 − m)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from robuststats.stats._common import Record
from robuststats.stats._parameters import (
    ParameterError,
    check_choice,
    check_int,
    check_number,
    check_probability,
)
from robuststats.stats.power._design import UnreachablePowerError, exactly_one_none, smallest_int
from robuststats.stats.power._seeds import MAX_SEEDS
from robuststats.stats.power._seeds_formulas import (
    _NODES,
    _critical_many,
    _scaled_chi2,
    calibrated_alpha,
    noncentral_t_power,
)

__all__ = ["GatePowerResult", "gate_power_at", "power_gate"]

#: most items a solved ``n_items`` may reach
MAX_GATE_ITEMS = 10_000_000


@dataclass(frozen=True)
class GatePowerResult(Record):
    """Result of :func:`power_gate`; one of margin, n_items, n_seeds_baseline, power solved.

    Attributes
    ----------
    margin : float
        The gate's ``max_degradation`` (relative or absolute, ``margin_type``).
    n_items : int
        Items, shared by both sides.
    n_seeds_baseline, n_seeds_candidate : int
        Training seeds of each side (the candidate is often one checkpoint).
    power : float
        Target power when solving for a size or the margin; else the computed power.
    achieved_power : float
        Power of the integer design reported.
    true_difference : float
        The candidate's true contrast (test scale) the power is computed at (0: as good as
        the baseline).
    seed_sd, item_sd, resid_sd : float
        Variance components (SDs, on the test scale: log for relative margins).
    standard_error : float
        √Var(T) of the contrast at this design.
    dof : float
        Satterthwaite's degrees of freedom at the expected mean squares.
    max_power : float
        The power with infinitely many items: the seeds bound it.
    alpha, margin_type, solved_for : str or float
    """

    margin: float
    n_items: int
    n_seeds_baseline: int
    n_seeds_candidate: int
    power: float
    achieved_power: float
    true_difference: float
    seed_sd: float
    item_sd: float
    resid_sd: float
    standard_error: float
    dof: float
    max_power: float
    alpha: float
    margin_type: str
    solved_for: str


def _shift(margin: float, margin_type: str) -> float:
    return -math.log1p(-margin) if margin_type == "relative" else margin


def _dfs(kc: int, kb: int, n: int, var_seed: float, var_resid: float
         ) -> tuple[float, float, float, float]:
    """``(k_eff, df_seed, df_resid, df_low)`` of the gate's mean squares (module doc)."""
    h = 1.0 / kc + 1.0 / kb
    if kc == 1 or kb == 1:
        k = max(kc, kb)
        return 1.0 / h, k - 1.0, (k - 1.0) * (n - 1.0), k - 1.0
    cs = (1.0 / kc, 1.0 / kb)
    dfs = (kc - 1.0, kb - 1.0)
    df_seed = h**2 / sum(c * c / d for c, d in zip(cs, dfs))
    df_resid = h**2 / sum(c * c / (d * (n - 1.0)) for c, d in zip(cs, dfs))
    return 1.0 / h, df_seed, df_resid, float(min(kc, kb) - 1)


def gate_power_at(n: int, kb: int, kc: int, effect: float, seed_sd: float, item_sd: float,
                  resid_sd: float, alpha: float) -> float:
    """Probability that the gate passes (one-sided t at ``alpha``) when the true contrast
    exceeds the margin by ``effect`` (test scale); see the module docstring."""
    import numpy as np
    from scipy import special

    vs, vi, ve = seed_sd**2, item_sd**2, resid_sd**2
    k, df_s, df_e, df_low = _dfs(kc, kb, n, vs, ve)
    var = vs / k + vi / n + ve / (k * n)
    if not var > 0.0:
        return 1.0 if effect > 0 else 0.0
    sd = math.sqrt(var)
    df_i = n - 1.0
    s, ws = _scaled_chi2(df_s, n * vs + ve, _NODES[0])
    i, wi = _scaled_chi2(df_i, k * vi + ve, _NODES[1])
    e, we = _scaled_chi2(df_e, ve, _NODES[2])
    s_, i_, e_ = s[:, None, None], i[None, :, None], e[None, None, :]
    weight = ws[:, None, None] * wi[None, :, None] * we[None, None, :]
    keep = i_ > e_
    seed_ms = np.maximum(s_, e_)  # V and its df take MS_seed ≥ MS_resid, as the gate does
    total = seed_ms + np.where(keep, i_ - e_, 0.0)
    num = total
    denom = seed_ms**2 / df_s + np.where(keep, i_**2 / df_i + e_**2 / df_e, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = np.where(denom > 0, num**2 / denom, np.inf)
    dof = np.maximum(dof, max(df_low, 1.0))
    # the gate runs the plug-in at the level calibrated for few seeds (stats/_few_seeds.py)
    run_at = calibrated_alpha(k, n, vs, vi, ve, alpha, 1, seed_df=max(df_s, 1.0),
                              resid_df=df_e)
    half = _critical_many(dof, max(df_low, 1.0), run_at, 1) * np.sqrt(total / (k * n))
    p = special.ndtr((effect - half) / sd)
    return float(min(1.0, np.sum(weight * p)))


def _max_power(kb: int, kc: int, effect: float, seed_sd: float, alpha: float) -> float:
    """Power with infinitely many items: a t test on the seed means alone."""
    if seed_sd == 0.0:
        return 1.0
    h = 1.0 / kc + 1.0 / kb
    if kc == 1 or kb == 1:
        dof = max(kc, kb) - 1.0
    else:
        dof = h**2 / ((1.0 / kc) ** 2 / (kc - 1.0) + (1.0 / kb) ** 2 / (kb - 1.0))
    return noncentral_t_power(effect / (seed_sd * math.sqrt(h)), dof, alpha, 1)


def power_gate(
    margin: float | None = None,
    n_items: int | None = None,
    n_seeds_baseline: int | None = None,
    power: float | None = None,
    *,
    n_seeds_candidate: int = 1,
    seed_sd: float = 0.0,
    item_sd: float = 0.0,
    resid_sd: float = 0.0,
    true_difference: float = 0.0,
    margin_type: str = "relative",
    alpha: float = 0.05,
) -> GatePowerResult:
    """Power of a robustness gate, or the items, baseline seeds or margin it needs.

    Exactly one of ``margin``, ``n_items``, ``n_seeds_baseline`` and ``power`` is None; it
    is solved for (sizes: the smallest integers that reach ``power``; margin: the smallest
    margin at which a candidate whose true contrast is ``true_difference`` passes with
    ``power``).

    Parameters
    ----------
    margin : float or None
        The gate's ``max_degradation``: in (0, 1) for relative, > 0 for absolute.
    n_items : int or None
        Items (≥ 2).
    n_seeds_baseline : int or None
        Baseline training seeds (≥ 2 when the candidate is one model).
    power : float or None
        Target probability of passing, in (alpha, 1).
    n_seeds_candidate : int
        Candidate training seeds (default 1: one checkpoint).
    seed_sd, item_sd, resid_sd : float
        SDs of the linearized metric (test scale; module docstring): over training seeds
        with infinitely many items, of the item × candidate interaction, and of one seed ×
        item value. Estimate them from a baseline's outcomes
        (``robuststats power --gate --pilot VERSION``).
    true_difference : float
        The candidate's true contrast on the test scale (≤ 0 is a degradation).
    margin_type : {"relative", "absolute"}
    alpha : float
        Level of the gate's one-sided test.

    Returns
    -------
    GatePowerResult
    """
    solve = exactly_one_none(margin=margin, n_items=n_items,
                              n_seeds_baseline=n_seeds_baseline, power=power)
    mt = check_choice(margin_type, "margin_type", ("relative", "absolute"))
    a = check_probability(alpha, "alpha")
    kc = check_int(n_seeds_candidate, "n_seeds_candidate", low=1, high=MAX_SEEDS)
    sds = {k: check_number(v, k, low=0.0) for k, v in
           (("seed_sd", seed_sd), ("item_sd", item_sd), ("resid_sd", resid_sd))}
    if sds["item_sd"] == 0.0 and sds["resid_sd"] == 0.0 and sds["seed_sd"] == 0.0:
        raise ParameterError("{seed_sd}, {item_sd} and {resid_sd} are all 0: the metric would "
                             "have no variance; give at least one.",
                             ["seed_sd", "item_sd", "resid_sd"])
    delta = check_number(true_difference, "true_difference")
    m = None if margin is None else check_number(
        margin, "margin", low=0.0, high=1.0 if mt == "relative" else None, low_open=True,
        high_open=mt == "relative")
    n = None if n_items is None else check_int(n_items, "n_items", low=2,
                                               high=MAX_GATE_ITEMS)
    kb = None if n_seeds_baseline is None else check_int(n_seeds_baseline,
                                                         "n_seeds_baseline", low=1,
                                                         high=MAX_SEEDS)
    target = None if power is None else check_number(power, "power", low=a, high=1.0,
                                                     low_open=True, high_open=True)
    if kb == 1 and kc == 1:
        raise ParameterError("{n_seeds_baseline} 1 with one candidate model: the gate cannot "
                             "estimate seed variation (it compares two models, not recipes); "
                             "plan at least 2 baseline seeds.", ["n_seeds_baseline"])

    def at(n_: int, kb_: int, effect: float) -> float:
        return gate_power_at(n_, kb_, kc, effect, sds["seed_sd"], sds["item_sd"],
                             sds["resid_sd"], a)

    if solve == "margin":
        assert n is not None and kb is not None and target is not None
        limit = _max_power(kb, kc, 1e6, sds["seed_sd"], a)
        from scipy import optimize

        f = lambda e: at(n, kb, e) - target  # noqa: E731
        high = 1.0
        while f(high) < 0:
            high *= 2.0
            if high > 1e6:
                raise UnreachablePowerError(
                    "no margin reaches power {target:g} with {n} items and {kb} baseline seeds "
                    "(at most {limit:.3f}).", target=target, n=n, kb=kb, limit=limit)
        effect = float(optimize.brentq(f, 0.0, high, xtol=1e-10))
        shift = effect - delta
        if shift <= 0:
            raise ParameterError("{true_difference} {delta:g} alone exceeds what is needed: "
                                 "any margin > 0 reaches the power.", ["true_difference"],
                                 delta=delta)
        m = -math.expm1(-shift) if mt == "relative" else shift
        achieved = target
    else:
        assert m is not None
        effect = _shift(m, mt) + delta
        if effect <= 0:
            raise ParameterError("{true_difference} {delta:g} lies at or below −margin: the "
                                 "gate should fail that candidate; its pass rate is at most "
                                 "alpha.", ["true_difference"], delta=delta)
        if solve == "power":
            assert n is not None and kb is not None
            achieved = target = at(n, kb, effect)
        elif solve == "n_items":
            assert kb is not None and target is not None
            ceiling = _max_power(kb, kc, effect, sds["seed_sd"], a)
            if ceiling < target:
                fewest = smallest_int(
                    lambda k_: _max_power(k_, kc, effect, sds["seed_sd"], a) >= target,
                    2, MAX_SEEDS, start=kb + 1)
                limit = _max_power(MAX_SEEDS, kc, effect, sds["seed_sd"], a)
                reason = (f"with {kb} baseline seeds the gate passes a good candidate with "
                          f"probability at most {ceiling:.3f} however many items")
                if fewest:
                    raise UnreachablePowerError("{reason}; {fewest} baseline seeds reach "
                                                "{target:g}.", reason=reason, fewest=fewest,
                                                target=target)
                raise UnreachablePowerError(
                    "{reason}; a candidate of {kc} model(s) varies by its own seed SD, which "
                    "limits the power to {limit:.3f} however many baseline seeds: evaluate "
                    "more candidate seeds ({n_seeds_candidate}).", ["n_seeds_candidate"],
                    reason=reason, kc=kc, limit=limit)
            n = smallest_int(lambda n_: at(n_, kb, effect) >= target, 2, MAX_GATE_ITEMS,
                             start=100)
            if n is None:
                raise UnreachablePowerError("more than {limit:,} items would be needed.",
                                            limit=MAX_GATE_ITEMS)
            achieved = at(n, kb, effect)
        else:
            assert n is not None and target is not None
            kb = smallest_int(lambda k_: at(n, k_, effect) >= target, 2, MAX_SEEDS,
                              start=5)
            if kb is None:
                raise UnreachablePowerError("no number of baseline seeds up to {limit} reaches "
                                            "power {target:g} with {n} items.",
                                            limit=MAX_SEEDS, target=target, n=n)
            achieved = at(n, kb, effect)
    assert n is not None and kb is not None and m is not None
    k, df_s, df_e, df_low = _dfs(kc, kb, n, sds["seed_sd"] ** 2, sds["resid_sd"] ** 2)
    var = (sds["seed_sd"] ** 2 / k + sds["item_sd"] ** 2 / n
           + sds["resid_sd"] ** 2 / (k * n))
    ms = (n * sds["seed_sd"] ** 2 + sds["resid_sd"] ** 2, k * sds["item_sd"] ** 2
          + sds["resid_sd"] ** 2, sds["resid_sd"] ** 2)
    keep = ms[1] > ms[2]
    tot = ms[0] + (ms[1] - ms[2] if keep else 0.0)
    den = ms[0] ** 2 / df_s + ((ms[1] ** 2 / (n - 1.0) + ms[2] ** 2 / df_e) if keep else 0.0)
    dof = max(tot**2 / den if den > 0 else math.inf, df_low)
    return GatePowerResult(
        margin=float(m), n_items=int(n), n_seeds_baseline=int(kb), n_seeds_candidate=kc,
        power=float(target), achieved_power=float(achieved), true_difference=delta,
        seed_sd=sds["seed_sd"], item_sd=sds["item_sd"], resid_sd=sds["resid_sd"],
        standard_error=math.sqrt(var), dof=float(dof),
        max_power=_max_power(kb, kc, effect, sds["seed_sd"], a), alpha=a, margin_type=mt,
        solved_for=solve)
