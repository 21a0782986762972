"""One look of a sequential study: each driving hypothesis against its boundaries.

Information. Look ``k`` has the first ``n_k`` of ``K`` training seeds and every item; its
information fraction is ``t_k = n_k/K``. The contrast's variance is ``σ²_seed/n + σ²_item/N +
σ²_res/(nN)`` over ``n`` seeds and ``N`` items, so the estimates at looks ``j < k`` (nested
seeds, the same items) have ``Cov(θ̂_j, θ̂_k) = Var θ̂_k``: the canonical joint distribution
holds with ``I_k = 1/Var θ̂_k`` (Jennison & Turnbull 2000, §3.1). ``I_j/I_k ≥ n_j/n_k``, with
equality without an item component; so the seed fraction understates the correlation of
the looks, and by Slepian's (1962) inequality boundaries computed with it cross, per tail,
no more often than designed. Using ``n_k/K`` also keeps the spending schedule fixed before
any data, which the Lan–DeMets method asks.

Few degrees of freedom. The statistics are the seed-random t with its calibrated
reference (:mod:`robuststats.stats._few_seeds`), not normal. Each z boundary ``b_k`` is
applied on the p-value scale: look ``k`` rejects on a tail when the calibrated one-sided
p-value is at most ``Φ̄(b_k)``, the nominal level of the normal design (the
"significance-level approach" to group-sequential t-tests: Pocock 1977, Biometrika
64:191–199). Equivalently the repeated confidence interval
at look ``k`` is the seed-random interval at the nominal level ``1 − 2Φ̄(c_k)``, and the
statistic shown against the boundaries is the z-equivalent ``Φ⁻¹(1 − p)`` of that p-value.

Decisions (``greater``; ``less`` mirrors it). With ``c_k`` the symmetric two-sided bound at
``α`` (``α/m`` per hypothesis with ``m`` driving hypotheses under a multiplicity
adjustment: Bonferroni): VERIFIED when ``z_k(margin) ≥ b_k`` (``b_k = c_k`` unless the
futility bound is binding, then the one-sided bound at ``α/2`` computed with it); FALSIFIED
when the opposite tail's ``z ≥ c_k``; futile when ``z_k(margin) ≤ a_k`` at a look before the
last. ``equivalent``: VERIFIED when both tails of the TOST pass ``c_k``; FALSIFIED when the
interval lies beyond a margin. The study stops when every driving hypothesis is decided or
futile, or at the last look. The reported interval is the repeated confidence interval at
the look it stopped: valid whatever the stopping rule did (ch. 9).

Futility. Its β-spending runs under the planned drift ``η`` (``drift``, the z at the last
look that the planner prints), so the bounds are fixed before any data. Without it, under
``η = (effect − margin)/se_K``, where ``se_K`` is projected from this look's
normal-equivalent standard error as ``se_k·√(n_k/K)``: the bounds then move with each
look's noisy standard error, which costs power (docs/statistics.md §11, calibration). A
non-binding bound may be ignored without any cost to the type I error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from robuststats._validation import check_confidence_level
from robuststats.errors import InputError
from robuststats.stats._estimability import clip_interval
from robuststats.stats._evidence import Evidence
from robuststats.stats._hypotheses import Hypothesis, _decide
from robuststats.stats.sequential._design import GroupSequentialDesign, group_sequential_design
from robuststats.stats.sequential._ordering import (
    P_FLOOR,
    median_unbiased_ratio,
    stagewise_pvalue,
)

__all__ = ["LookDecision", "SequentialOptions", "analyse_look", "decide_look", "look_designs"]


@dataclass(frozen=True)
class SequentialOptions:
    """The sequential plan of a study (``sequential:``, :mod:`robuststats.config.sequential`).

    ``looks``: seeds at each look (the last is every seed); ``alpha``: the study's two-sided
    error; ``split``: how many driving hypotheses share ``alpha`` (Bonferroni).
    """

    looks: tuple[int, ...]
    alpha: float = 0.05
    spending: str = "obf"
    futility: str = "none"
    beta: float = 0.2
    beta_spending: str | None = None
    effect: float | None = None
    split: int = 1
    drift: float | None = None

    @property
    def fractions(self) -> np.ndarray:
        return np.asarray(self.looks, dtype=float) / self.looks[-1]

    @property
    def hypothesis_alpha(self) -> float:
        return self.alpha / self.split


@dataclass(frozen=True)
class LookDecision:
    """One driving hypothesis at one look.

    ``statistic_z``: z-equivalent of the calibrated one-sided p-value of the verifying tail
    (the smaller of the two TOST tails for equivalence); ``efficacy_bound``: the efficacy bound it is
    compared with; ``futility_bound``: the futility bound (NaN without one); ``ci_low``/``ci_high``:
    the repeated confidence interval at nominal level ``ci_level``; ``decision``: VERIFIED,
    FALSIFIED, FUTILE or CONTINUE; ``pvalue``: the decision p-value under the stage-wise
    ordering for a study that stops at this look (:mod:`._ordering`; NaN on CONTINUE; on
    FUTILE the verifying tail's alone); ``median_unbiased``: there, the estimate
    median-unbiased under the same ordering (greater/less hypotheses that did not stop for
    futility; NaN otherwise).
    """

    id: str
    look: int
    n_seeds: int
    fraction: float
    estimate: float
    statistic_z: float
    efficacy_bound: float
    futility_bound: float
    nominal_level: float
    ci_low: float
    ci_high: float
    ci_level: float
    ci_method: str
    decision: str
    reason: str
    pvalue: float = math.nan
    median_unbiased: float = math.nan

    @property
    def stops(self) -> bool:
        return self.decision != "CONTINUE"


def _signed_z(toward: float, away: float) -> float:
    """The z-equivalent ``Φ⁻¹(1 − p)`` of the calibrated one-sided p-value ``p`` for ``δ``
    beyond the margin on the verifying side, from :class:`Evidence` tails ``(toward,
    away)``: the one-sided p-values of that side and of the other. Each is capped near ½ on
    the wrong side of the estimate, so the sign comes from the smaller."""
    if toward <= away:
        return float(-special.ndtri(min(max(toward, P_FLOOR), 0.5)))
    return float(special.ndtri(min(max(away, P_FLOOR), 0.5)))


@functools.lru_cache(maxsize=256)
def _symmetric(looks: tuple[int, ...], alpha: float, spending: str) -> GroupSequentialDesign:
    return group_sequential_design(np.asarray(looks, dtype=float) / looks[-1], alpha=alpha,
                                   sides=2, spending=spending)


def look_designs(options: SequentialOptions, drift: float | None
                 ) -> tuple[GroupSequentialDesign, GroupSequentialDesign | None]:
    """The symmetric design of the repeated intervals and, with futility, the one-sided design
    of the efficacy and futility bounds."""
    a = options.hypothesis_alpha
    rci = _symmetric(tuple(options.looks), a, options.spending)
    if options.futility == "none":
        return rci, None
    one = _one_sided(tuple(options.looks), a / 2.0, options.spending, options.futility,
                     options.beta, options.beta_spending, max(0.0, float(drift or 0.0)))
    return rci, one


@functools.lru_cache(maxsize=256)
def _one_sided(looks: tuple[int, ...], alpha: float, spending: str, futility: str,
               beta: float, beta_spending: str | None, drift: float) -> GroupSequentialDesign:
    # a plan's drift is fixed, so every look of every study with it asks for the same design
    return group_sequential_design(np.asarray(looks, dtype=float) / looks[-1], alpha=alpha,
                                   sides=1, spending=spending, futility=futility, beta=beta,
                                   beta_spending=beta_spending, drift=drift)


def analyse_look(hypotheses: Sequence[Hypothesis], outcomes: pd.DataFrame, look: int,
                 options: SequentialOptions, *, confidence_level: float = 0.95,
                 n_resamples: int = 10_000, rng_seed: int | None = 0,
                 clean_noise: float = 0.0) -> list[LookDecision]:
    """Each hypothesis of ``hypotheses`` at look ``look`` (1-based) on ``outcomes`` (the
    cells of the first ``options.looks[look − 1]`` seeds)."""
    from robuststats.outcomes import validate_outcomes
    from robuststats.stats._hypothesis_data import gather_evidence

    if not 1 <= look <= len(options.looks):
        raise InputError(f"`look` must be in 1..{len(options.looks)}, got {look!r}.")
    check_confidence_level(confidence_level)
    outcomes = validate_outcomes(outcomes)
    out = []
    for h in hypotheses:
        ev = gather_evidence(h, outcomes, n_resamples=n_resamples,
                             rng=np.random.default_rng(rng_seed), clean_noise=clean_noise,
                             confidence_level=confidence_level)
        out.append(decide_look(h, ev, look, options))
    return out


def decide_look(h: Hypothesis, ev: Evidence, look: int, options: SequentialOptions
                ) -> LookDecision:
    """The decision on ``h`` at look ``look`` from its evidence there (module doc)."""
    k, n_k, n_max = look - 1, options.looks[look - 1], options.looks[-1]
    drift = options.drift
    if options.futility != "none" and drift is None:
        assert options.effect is not None
        ci95 = ev.interval(0.95)
        se_k = (ci95.high - ci95.low) / (2.0 * special.ndtri(0.975))
        se_max = se_k * math.sqrt(n_k / n_max)
        gap = options.effect - h.margin if h.relation == "greater" else \
            h.margin - options.effect
        drift = gap / se_max if se_max > 0 else 0.0
    rci, one = look_designs(options, drift)
    c = float(rci.upper[k])
    level = 1.0 - 2.0 * float(special.ndtr(-c))
    ci = ev.interval(level)
    upper = float(one.upper[k]) if one is not None else c
    lower = float(one.lower[k]) if one is not None and look < len(options.looks) \
        else math.nan
    decision = _decision(h, ev, look, n_k, float(options.fractions[k]), upper, lower, level,
                         ci, last=look == len(options.looks))
    if decision.decision == "CONTINUE":  # the ordering ranks where a study stops
        return decision
    binding = one if one is not None and options.futility == "binding" else None
    futile = decision.decision == "FUTILE"
    p = _stagewise_decision_pvalue(h, ev, look, options.fractions, rci, binding,
                                   verifying_only=futile)
    mue = math.nan
    if h.relation != "equivalent" and not futile:
        # the binding design's region orders the verifying direction only; a result on the
        # other side is ordered downward on the symmetric region
        z = decision.statistic_z
        d = binding if binding is not None and z >= 0 else rci
        ratio = median_unbiased_ratio(options.fractions, d.upper, d.lower, look, z)
        mue = h.margin + (float(ev.estimate) - h.margin) * ratio
    return dataclasses.replace(decision, pvalue=p, median_unbiased=mue)


def _stagewise_decision_pvalue(h: Hypothesis, ev: Evidence, look: int, fractions,
                               rci: GroupSequentialDesign,
                               binding: GroupSequentialDesign | None, *,
                               verifying_only: bool = False) -> float:
    """The decision p-value of the one-look analysis (two-sided at the margin; for
    equivalence the smaller of the TOST and the falsifying p) with each one-sided p replaced
    by its stage-wise p-value. The verifying tail of a greater/less hypothesis runs on the
    binding design's region when the futility bound is binding, every other tail on the
    symmetric region of the repeated intervals. A futility stop has decided that the
    verifying side is not worth pursuing and nothing about the other side (which did not
    cross its bound): its p-value is the verifying tail's alone (``verifying_only``)."""
    def sw(p: float, design: GroupSequentialDesign | None = None) -> float:
        d = design if design is not None else rci
        return stagewise_pvalue(fractions, d.upper, d.lower, look, p)

    m = h.margin
    if h.relation in ("greater", "less"):
        toward, away = ev.tails(m) if h.relation == "greater" else ev.tails(m)[::-1]
        if verifying_only:
            return min(1.0, 2.0 * sw(toward, binding))
        return min(1.0, 2.0 * min(sw(toward, binding), sw(away)))
    verify = 2.0 * max(sw(ev.tails(-m)[0]), sw(ev.tails(m)[1]))
    falsify = 2.0 * min(sw(ev.tails(m)[0]), sw(ev.tails(-m)[1]))
    return min(1.0, verify, falsify)


def _decision(h, ev, look, n_k, fraction, upper, lower, level, ci, *, last):  # type: ignore[no-untyped-def]
    m = h.margin
    if h.relation == "greater":
        z_verify = _signed_z(*ev.tails(m))
    elif h.relation == "less":
        z_verify = _signed_z(*ev.tails(m)[::-1])
    else:
        z_verify = min(_signed_z(*ev.tails(-m)), _signed_z(*ev.tails(m)[::-1]))
    verdict, why = _decide(h, ci)
    method = f"repeated CI: {ev.method} at nominal level {level:.4g}"
    if h.metric == "accuracy":  # a difference of shares: never outside [-1, 1], as elsewhere
        ci, cut = clip_interval(ci, "accuracy_difference")
        if cut:  # the verdict is the full interval's (the same for margins in ±1)
            method += ", cut to [-1, 1]"
    if h.relation != "equivalent" and z_verify >= upper and verdict != "VERIFIED":
        verdict, why = "VERIFIED", f"z {z_verify:.3g} ≥ binding-design bound {upper:.3g}"
    if verdict == "VERIFIED" and h.relation != "equivalent" and z_verify < upper:
        verdict, why = "INCONCLUSIVE", f"z {z_verify:.3g} < efficacy bound {upper:.3g}"
    if verdict != "INCONCLUSIVE":
        decision = verdict
    elif not math.isnan(lower) and z_verify <= lower:
        decision, why = "FUTILE", f"z {z_verify:.3g} ≤ futility bound {lower:.3g}"
    elif last:
        decision = "INCONCLUSIVE"
    else:
        decision = "CONTINUE"
    return LookDecision(h.id, look, n_k, fraction, float(ev.estimate), z_verify, upper, lower,
                        float(special.ndtr(-upper)), float(ci.low), float(ci.high), level,
                        method, decision, why)
