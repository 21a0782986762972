"""The gate's test at one noise level: is the candidate non-inferior to the baseline?

The quantity is a metric θ of each side on the same items: retention ``θ = Z̄/C̄`` (noisy
over clean accuracy, the default) or the noisy accuracy ``θ = Z̄``. The margin
``m = max_degradation`` is read one of two ways:

* ``margin_type="relative"`` (default): H0 ``θ_c/θ_b ≤ 1 − m`` against H1 ``θ_c/θ_b > 1 − m``:
  the candidate keeps more than ``1 − m`` of the baseline's retention (``m = 0.15``: at most
  15 % worse). The test runs on the log scale, ``log θ_c − log θ_b > log(1 − m)``; the
  reported contrast is ``θ_c/θ_b − 1``.
* ``margin_type="absolute"``: H0 ``θ_c − θ_b ≤ −m``: at most ``m`` retention (or accuracy)
  points worse.

Both are tested with one one-sided t at level α: the gate passes when the one-sided
``1 − α`` lower bound of the contrast lies above ``−m`` (equivalently, p < α for H0 at the
margin), the non-inferiority test of ICH E9 (1998, §3.3.2) and Wellek (2010, ch. 2). The
estimate is linearized by the delta method (influence values per seed and item,
``(z − θc)/C̄`` for a retention on the ratio scale and ``z/Z̄ − c/C̄`` on the log scale, as
:func:`robuststats.stats.seed_random_retention_test` and
:func:`~robuststats.stats.seed_random_retention` use), and its variance is the crossed
(seeds random, items random) variance: :func:`robuststats.stats.crossed_variance` of the
differences when the seeds pair, :func:`._variance.unpaired_variance` when they do not.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import optimize, special

from robuststats._validation import check_choice, check_number, check_probability
from robuststats.errors import InputError
from robuststats.gate._questions import QUESTIONS, decide, nulls, power_note
from robuststats.stats import (
    ContrastVariance,
    DegenerateDataWarning,
    noncentral_t_power,
    paired_variance,
    unpaired_variance,
)

__all__ = ["MARGIN_TYPES", "METRICS", "PAIRINGS", "GateTest", "gate_test",
           "smallest_detectable"]

METRICS = ("retention", "accuracy")
MARGIN_TYPES = ("relative", "absolute")
PAIRINGS = ("paired", "independent")
#: power of the gate's "smallest detectable degradation"
DETECT_POWER = 0.8


@dataclass(frozen=True)
class GateTest:
    """The non-inferiority test of one noise level (first minus second: candidate − baseline).

    Attributes
    ----------
    eval_noise : float
        The noise level of the noisy evaluations.
    metric, margin_type : str
        What is compared, and how ``max_degradation`` is read (module docstring).
    max_degradation : float
        The margin m: the gate tolerates a degradation up to m.
    candidate, baseline : float
        The metric of each side (retention or noisy accuracy).
    estimate : float
        ``candidate/baseline − 1`` (relative) or ``candidate − baseline`` (absolute).
    lower_bound : float
        One-sided ``1 − alpha`` lower confidence bound of ``estimate``.
    upper_bound : float
        One-sided ``1 − alpha`` upper bound (equivalence only; NaN otherwise).
    passed : bool
        The question's decision rule (:mod:`._questions`): non-inferiority
        ``lower_bound > −max_degradation``.
    statistic, dof, pvalue : float
        t statistic of H0 "degraded by the margin or more", its degrees of freedom and the
        one-sided p-value; ``passed`` exactly when ``pvalue < alpha``.
    standard_error : float
        Of the contrast on the test's scale (log ratio for relative).
    alpha : float
    design : str
        How the seeds entered the variance (:data:`._variance.DESIGNS`).
    method : str
    n_seeds_candidate, n_seeds_baseline, n_items : int
    detectable_degradation : float
        Smallest margin (on the margin's scale) at which a candidate exactly as good as the
        baseline passes with 80 % power at this size and variance; ``max_degradation``
        below it means the gate is underpowered.
    power_at_margin : float
        Probability that a candidate exactly as good as the baseline passes.
    var_seed, var_item, var_resid : float
        Variance components of the linearized metric (test scale).
    reason : str
        The comparison that decided.
    question : str
        ``non-inferiority``, ``superiority`` or ``equivalence`` (:mod:`._questions`);
        ``max_degradation`` holds its margin d.
    """

    eval_noise: float
    metric: str
    margin_type: str
    max_degradation: float
    candidate: float
    baseline: float
    estimate: float
    lower_bound: float
    upper_bound: float
    passed: bool
    statistic: float
    dof: float
    pvalue: float
    standard_error: float
    alpha: float
    design: str
    method: str
    n_seeds_candidate: int
    n_seeds_baseline: int
    n_items: int
    detectable_degradation: float
    power_at_margin: float
    var_seed: float
    var_item: float
    var_resid: float
    reason: str
    question: str = "non-inferiority"

    @property
    def underpowered(self) -> bool:
        """An equally good candidate passes with less than 80 % probability."""
        return self.power_at_margin < DETECT_POWER

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "underpowered": self.underpowered}


def _metric(clean: np.ndarray | None, noisy: np.ndarray, metric: str,
            relative: bool) -> tuple[float, np.ndarray]:
    """θ and its influence values (log scale when ``relative``): the planning's own."""
    from robuststats.stats import gate_influence

    return gate_influence(clean, noisy, metric, relative)


def smallest_detectable(se: float, dof: float, alpha: float,
                        power: float = DETECT_POWER) -> float:
    """Distance ``D`` (test scale) at which a one-sided t test at ``alpha`` has ``power``:
    the noncentrality λ with ``P(T_ν(λ) > t_{1−α,ν}) = power``, times ``se``."""
    if not se > 0.0:
        return 0.0
    z = float(special.ndtri(1.0 - alpha) + special.ndtri(power))
    f = lambda ncp: noncentral_t_power(ncp, dof, alpha, 1) - power  # noqa: E731
    high = max(2.0 * z, 1.0)
    while f(high) < 0.0:
        high *= 2.0
    return float(optimize.brentq(f, 0.0, high, xtol=1e-10)) * se


def _check(metric: str, margin_type: str, max_degradation: float, alpha: float,
           pairing: str, question: str = "non-inferiority"
           ) -> tuple[str, str, float, float, str]:
    metric = check_choice(metric, "metric", METRICS)
    margin_type = check_choice(margin_type, "margin_type", MARGIN_TYPES)
    question = check_choice(question, "question", QUESTIONS)
    # a relative degradation or equivalence margin below 1 (the ratio 1 − m stays > 0);
    # an equivalence margin must be > 0 (nothing is within 0)
    high = 1.0 if margin_type == "relative" and question != "superiority" else None
    m = check_number(max_degradation, "max_degradation", low=0.0, high=high, high_open=True,
                     low_open=question == "equivalence")
    return (metric, margin_type, m, check_probability(alpha, "alpha"),
            check_choice(pairing, "pairing", PAIRINGS))


def gate_test(clean_c: Any, noisy_c: Any, clean_b: Any, noisy_b: Any, *,
              max_degradation: float, metric: str = "retention",
              margin_type: str = "relative", alpha: float = 0.05,
              pairing: str = "independent", eval_noise: float = math.nan,
              question: str = "non-inferiority") -> GateTest:
    """Non-inferiority (or superiority by, or equivalence within, a margin) of the candidate
    (``*_c``) against the baseline (``*_b``).

    Parameters
    ----------
    clean_c, noisy_c : array_like, shape (k_c, n_items)
        The candidate's clean and noisy outcomes (0/1, or means over noise seeds), column i
        the same item everywhere. ``clean_*`` may be None for ``metric="accuracy"``.
    clean_b, noisy_b : array_like, shape (k_b, n_items)
        The baseline's.
    max_degradation : float
        The margin m (module docstring): in [0, 1) for relative, ≥ 0 for absolute.
    metric : {"retention", "accuracy"}
    margin_type : {"relative", "absolute"}
    alpha : float
        Level of the one-sided test (the lower bound is at ``1 − alpha``).
    pairing : {"independent", "paired"}
        ``"paired"``: row s of both sides is the same training seed (requires k_c = k_b);
        ``"independent"``: the seeds are different runs (:func:`._variance.unpaired_variance`).
    eval_noise : float
        Recorded in the result.
    question : {"non-inferiority", "superiority", "equivalence"}
        What ``max_degradation`` (the margin d) bounds (:mod:`._questions`).

    Returns
    -------
    GateTest
    """
    metric, margin_type, m, alpha, pairing = _check(metric, margin_type, max_degradation,
                                                    alpha, pairing, question)
    relative = margin_type == "relative"
    zc, zb = np.atleast_2d(np.asarray(noisy_c, float)), np.atleast_2d(np.asarray(noisy_b, float))
    cc = None if clean_c is None else np.atleast_2d(np.asarray(clean_c, float))
    cb = None if clean_b is None else np.atleast_2d(np.asarray(clean_b, float))
    clean = _retention_clean(cc, cb, metric)
    shapes = {a.shape for a in (zc, cc) if a is not None}, {a.shape for a in (zb, cb)
                                                           if a is not None}
    if len(shapes[0]) != 1 or len(shapes[1]) != 1 or zc.shape[1] != zb.shape[1]:
        raise InputError(f"candidate and baseline outcomes must share the items: got shapes "
                         f"{sorted(shapes[0])} and {sorted(shapes[1])}.")
    kc, n = zc.shape
    kb = zb.shape[0]
    if n < 2:
        raise InputError(f"the gate needs at least 2 shared items, got {n}.")
    if pairing == "paired" and kc != kb:
        raise InputError(f"`pairing` 'paired' needs as many candidate as baseline seeds, got "
                         f"{kc} and {kb}.")
    common = dict(eval_noise=float(eval_noise), metric=metric, margin_type=margin_type,
                  max_degradation=m, alpha=alpha, n_seeds_candidate=kc, n_seeds_baseline=kb,
                  n_items=n, question=question)
    if clean is not None and float(clean[1].mean()) == 0.0:
        raise InputError("the baseline's clean accuracy is 0: its retention is undefined.")
    if clean is not None and (why := _not_estimable(clean[1], alpha)) is not None:
        raise InputError(f"the baseline's retention at eval_noise {eval_noise:g} is not "
                         f"estimable: {why}; no gate can be decided against it.")
    theta_b_raw = float(zb.mean()) / (float(clean[1].mean()) if clean is not None else 1.0)
    if relative and theta_b_raw == 0.0:
        raise InputError(f"the baseline's {metric} at eval_noise {eval_noise:g} is 0: a "
                         "relative margin is undefined; use `margin_type` 'absolute'.")
    lost = _lost(clean, zc, theta_b_raw, relative, common)
    if lost is not None:
        return lost
    theta_c, lc = _metric(cc, zc, metric, relative)
    theta_b, lb = _metric(cb, zb, metric, relative)
    cv: ContrastVariance = (paired_variance(lc, lb) if pairing == "paired" or kc == kb == 1
                            else unpaired_variance(lc, lb))
    if kc == kb == 1 and metric == "accuracy" and not relative and _binary(zc, zb):
        return _tango_test(zc, zb, cv, m, question, common)
    est = math.log(theta_c / theta_b) if relative else theta_c - theta_b
    low_null, high_null = nulls(question, m, relative)
    se, dof = math.sqrt(cv.variance), cv.dof
    ref = cv.reference
    method = f"one-sided t, crossed variance ({cv.design}), calibrated Satterthwaite df"
    if question == "equivalence":
        method = "two " + method.replace("one-sided t", "one-sided t tests (TOST)")
    if not se > 0.0:
        # no spread at all: a score-type bound for n items without discordance (as the
        # seed-random t's fallback), on the test's scale
        warnings.warn(f"candidate and baseline show no spread at eval_noise {eval_noise:g}; "
                      "using a score-type bound for n items.", DegenerateDataWarning,
                      stacklevel=2)
        z = float(special.ndtri(1.0 - alpha))
        h0 = z * z / (n + z * z)
        scales = [zc.mean(), zb.mean()] + ([clean[0].mean(), clean[1].mean()]
                                           if clean is not None else [])
        se = h0 * math.sqrt(sum(1.0 / max(s, 1e-12) ** 2 for s in scales)) / z
        dof, method, ref = math.inf, "score-type bound (no spread)", None
    d = decide(est, se, dof, ref, alpha, low_null, high_null)
    shown = (lambda v: math.expm1(v)) if relative else (lambda v: v)
    # planning numbers at the level the calibrated test runs the plug-in at (one-sided)
    run_at = ref.nominal_per_side(alpha, 1) if ref is not None else alpha
    detect, power_at = power_note(question, abs(low_null), se, dof, run_at,
                                  lambda p: smallest_detectable(se, dof, run_at, p))
    detect_shown = -math.expm1(-detect) if relative and math.isfinite(detect) else detect
    return GateTest(candidate=theta_c, baseline=theta_b, estimate=shown(est),
                    lower_bound=shown(d.lower), upper_bound=shown(d.upper), passed=d.passed,
                    statistic=d.statistic, dof=float(dof), pvalue=d.pvalue,
                    standard_error=se, design=cv.design, method=method,
                    detectable_degradation=detect_shown, power_at_margin=float(power_at),
                    var_seed=cv.var_seed, var_item=cv.var_item, var_resid=cv.var_resid,
                    reason=_reason(question, shown(d.lower), shown(d.upper), d.passed, m,
                                   metric, relative, ""), **common)


def _reason(question: str, low: float, high: float, passed: bool, m: float, metric: str,
            relative: bool, how: str) -> str:
    """The comparison that decided, in words."""
    word = "retention" if metric == "retention" else "accuracy"
    what = f"{'relative' if relative else 'absolute'} {word} margin{how}"
    if question == "superiority":
        return f"lower bound {low:+.4f} {'>' if passed else '≤'} +{m:g} ({what})"
    if question == "non-inferiority":
        return f"lower bound {low:+.4f} {'>' if passed else '≤'} −{m:g} ({what})"
    top = m / (1 - m) if relative else m  # the ratio 1/(1 − m), minus 1
    inside = "inside" if passed else "not inside"
    return (f"bounds [{low:+.4f}, {high:+.4f}] {inside} (−{m:g}, +{top:.4g}) ({what}, "
            "TOST)")


def _retention_clean(cc: np.ndarray | None, cb: np.ndarray | None,
                     metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Both sides' clean outcomes ``(candidate, baseline)`` when the metric is retention,
    None for noisy accuracy (which does not read them)."""
    if metric != "retention":
        return None
    if cc is None or cb is None:
        raise InputError("`metric` 'retention' needs the clean outcomes of both sides.")
    return cc, cb


def _binary(*mats: np.ndarray) -> bool:
    return all(bool(np.all((a == 0) | (a == 1))) for a in mats)


def _tango_test(zc: np.ndarray, zb: np.ndarray, cv: ContrastVariance, m: float,
                question: str, common: dict[str, Any]) -> GateTest:
    """One model each, 0/1 noisy outcomes, an absolute accuracy margin: Tango's (1998) score
    test of H0 ``p_c − p_b ≤ −m`` (superiority: ``≤ +m``; equivalence: both one-sided
    tests) and its one-sided interval, as :func:`robuststats.stats.seed_random_test` uses
    for one seed. The paired t over items claims more than a few discordant pairs carry:
    near an accuracy of 0 it passed 12 % of candidates on the margin (n = 100, m = 0.05;
    Tango 3.7 %, docs/gate.md)."""
    from robuststats.stats import seed_random_test

    alpha = common["alpha"]
    low_null, high_null = nulls(question, m, False)
    level = dict(confidence_level=1.0 - alpha)
    r = seed_random_test(zc, zb, alternative="greater", margin=low_null, **level)
    low, high, decider = float(r.confidence_interval.low), math.nan, r
    passed = bool(r.pvalue < alpha)
    if high_null is not None:
        up = seed_random_test(zc, zb, alternative="less", margin=high_null, **level)
        high = float(up.confidence_interval.high)
        passed = passed and bool(up.pvalue < alpha)
        decider = r if r.pvalue >= up.pvalue else up
    n = zc.shape[1]
    z = float(special.ndtri(1.0 - alpha))
    # the power note needs a spread: with no discordant pair, Tango's bound z²/(n + z²)
    se = r.standard_error if r.standard_error > 0 else z / (n + z * z)
    detect, power_at = power_note(question, abs(low_null), se, math.inf, alpha,
                                  lambda p: smallest_detectable(se, math.inf, alpha, p))
    tests = "two Tango score tests (TOST)" if high_null is not None else "Tango score test"
    return GateTest(candidate=float(zc.mean()), baseline=float(zb.mean()),
                    estimate=float(r.estimate), lower_bound=low, upper_bound=high,
                    passed=passed, statistic=float(decider.statistic), dof=math.inf,
                    pvalue=float(decider.pvalue), standard_error=float(r.standard_error),
                    design=cv.design, method=f"{tests} (one model each, 0/1 outcomes)",
                    detectable_degradation=detect, power_at_margin=power_at,
                    var_seed=cv.var_seed, var_item=cv.var_item, var_resid=cv.var_resid,
                    reason=_reason(question, low, high, passed, m, "accuracy", False,
                                   f", {tests}"), **common)


def _not_estimable(clean: np.ndarray, alpha: float) -> str | None:
    """Why a side's retention has no bounded one-sided ``1 − alpha`` bound (Fieller's
    ``g ≥ 1`` at the two-sided level ``1 − 2 alpha``,
    :func:`robuststats.stats.retention_estimability`), or None when it has one."""
    from robuststats.stats import retention_estimability

    judged = retention_estimability(clean, confidence_level=max(1.0 - 2.0 * alpha, 0.5))
    return None if judged.estimable else judged.reason


def _lost(clean: tuple[np.ndarray, np.ndarray] | None, zc: np.ndarray, theta_b: float,
          relative: bool, common: dict[str, Any]) -> GateTest | None:
    """A candidate without a correct clean answer or whose retention is not estimable
    (``clean``: both sides' clean outcomes, for a retention), or (relative) without a
    correct noisy one, fails outright: its metric is undefined, unbounded or its log-ratio
    is −∞."""
    if clean is not None and float(clean[0].mean()) == 0.0:
        why, theta = "the candidate's clean accuracy is 0: its retention is undefined", math.nan
    elif clean is not None and (reason := _not_estimable(clean[0],
                                                         common["alpha"])) is not None:
        why, theta = f"the candidate's retention is not estimable: {reason}", math.nan
    elif relative and float(zc.mean()) == 0.0:
        why, theta = "the candidate answers no item correctly under noise", 0.0
    else:
        return None
    est = -1.0 if relative else theta - theta_b
    return GateTest(candidate=theta, baseline=theta_b, estimate=est, lower_bound=est,
                    upper_bound=math.nan, passed=False, statistic=-math.inf, dof=math.nan, pvalue=1.0,
                    standard_error=math.nan, design="-", method="no test: " + why,
                    detectable_degradation=math.nan, power_at_margin=math.nan,
                    var_seed=math.nan, var_item=math.nan, var_resid=math.nan,
                    reason=why, **common)
