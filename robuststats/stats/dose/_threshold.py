"""The critical threshold of a noise sweep, with a delta-method or a bootstrap interval.

The critical threshold for a drop ``X`` is the noise scale at which the fitted accuracy
falls to ``(1 − X) · f(0)``: ``X`` of the clean accuracy ``f(0)`` is lost (10 % by
default). For a curve ``f = c + (d − c) g(u)`` it is an absolute effective dose at the level
``(1 − X) f(0)``; drc's *relative* ED10 is the dose where 10 % of ``d − c`` is lost, which
is the same only when ``c = 0``. The threshold is infinite when the fitted curve levels off
above ``(1 − X) f(0)``.

Outcomes are ``(n_doses, n_seeds, n_items)``: the same items and training seeds at every
dose (an item's outcome may be a mean over noise seeds). The curve is fitted by binomial
maximum likelihood to the accuracy at each dose, weighted by its ``n_seeds · n_items``
evaluations.

Intervals:

* ``"seed-random"`` (default): the threshold's questions are about the procedure, over
  training seeds and items, so its interval is built like the seed-random t of the paired
  comparisons (docs/statistics.md §9). The log threshold is linearized in the accuracies of
  the doses, ``∂ log T/∂A_d`` by central differences of refits (step ``2·10⁻³``,
  warm-started), which turns the outcomes into one value per seed and item,
  ``L_si = Σ_d (∂ log T/∂A_d) y_dsi``. Its crossed variance (seed, item and residual mean
  squares) and Satterthwaite's degrees of freedom give ``log T ± t_ν · se``, exponentiated.
  With one seed it is the paired delta method over items on ``n − 1`` df. It needs no
  resampling, and unlike ``"delta"`` it counts that the same items and seeds recur at every
  dose.
* ``"delta"``: drc's delta method on the binomial fit. It treats every evaluation as an
  independent Bernoulli draw, so it ignores that the same items (and seeds) recur at every
  dose: it answers "for these models and items", and is too narrow for the population.
* ``"bootstrap"`` (default): the two-way bootstrap of the package (:mod:`..resampling._resample`):
  seeds and items are resampled jointly at every dose (paired), the accuracies are
  recomputed, the curve is refitted (warm-started at the estimate) and the threshold
  recomputed; the interval is the percentile interval of the refitted thresholds. With
  several seeds each dose's resampled deviations are rescaled so its variance matches the
  crossed random-effects estimate (:func:`..resampling._resample.crossed_variance_ratio`), as the
  package's other bootstrap intervals do. Resamples whose curve never reaches the level
  count as ``inf`` (an upper bound of ``inf`` says the data cannot rule that out); fits
  that fail are dropped with a warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from robuststats._validation import (
    as_float_array,
    check_choice,
    check_confidence_level,
    check_n_resamples,
    check_number,
    check_rng,
)
from robuststats.errors import InputError
from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning, tidy_row
from robuststats.stats.dose._curve import DoseResponseFit, dose_at, threshold_target
from robuststats.stats.dose._fitting import Problem, solve
from robuststats.stats.dose._response import fit_dose_response
from robuststats.stats.resampling import crossed_variance_ratio, resampled_totals

__all__ = ["AUTO_MODELS", "ThresholdResult", "critical_threshold"]

_INTERVALS = ("seed-random", "bootstrap", "delta")
#: accuracy step of the finite differences that linearize the threshold (seed-random)
_STEP = 2e-3
#: the four-parameter curves ``model="auto"`` chooses among, by AIC (drc's ``mselect``)
AUTO_MODELS = ("LL.4", "W1.4", "W2.4")


@dataclass(frozen=True)
class ThresholdResult:
    """Result of :func:`critical_threshold`.

    Attributes
    ----------
    drop : float
        The relative accuracy loss that defines the threshold (0.10: 10 % of clean).
    estimate : float
        The noise scale at which the fitted accuracy is ``(1 − drop) · clean_accuracy``
        (``inf`` when the fitted curve never falls that far).
    confidence_interval : ConfidenceInterval
    confidence_level : float
    method : str
        The interval method (``ci_method`` in tables).
    clean_accuracy : float
        The fitted accuracy at scale 0 (the control level ``f(0)``).
    model : str
        The dose-response model (drc's name).
    n_doses, n_seeds, n_items : int
    n_resamples : int
        Bootstrap resamples (0 for the delta method).
    n_not_reached : int
        Resamples whose refitted curve never reached the level (counted as ``inf``).
    n_failed : int
        Resamples whose refit failed (dropped).
    fit : DoseResponseFit
    bootstrap_distribution : numpy.ndarray
        The refitted thresholds (``inf`` where not reached).
    bootstrap_parameters : numpy.ndarray
        ``(n_resamples − n_failed, len(fit.free))``: the refitted free parameters, for
        bands around the curve (:meth:`band`).
    """

    drop: float
    estimate: float
    confidence_interval: ConfidenceInterval
    confidence_level: float
    method: str
    clean_accuracy: float
    model: str
    n_doses: int
    n_seeds: int
    n_items: int
    n_resamples: int
    n_not_reached: int
    n_failed: int
    fit: DoseResponseFit = field(repr=False, compare=False)
    bootstrap_distribution: np.ndarray = field(repr=False, compare=False)
    bootstrap_parameters: np.ndarray = field(repr=False, compare=False,
                                             default_factory=lambda: np.empty((0, 0)))

    def band(self, dose: object) -> pd.DataFrame:
        """The fitted curve at ``dose`` with a pointwise interval: percentiles of the
        refitted curves (bootstrap), or the delta method of the fit (``"delta"``).

        Columns ``dose, estimate, ci_low, ci_high``.
        """
        x = as_float_array(dose, "dose", ndim=1, low=0.0)
        if self.bootstrap_parameters.shape[0] < 2:
            table = self.fit.predict(x, interval="confidence",
                                     confidence_level=self.confidence_level)
            return table[["dose", "estimate", "ci_low", "ci_high"]]
        curve, base = self.fit.curve, dict(self.fit.parameters)
        curves = np.array([curve.response(x, {**base, **dict(zip(self.fit.free, row))})
                           for row in self.bootstrap_parameters])
        alpha = 1.0 - self.confidence_level
        low, high = np.quantile(curves, [alpha / 2, 1 - alpha / 2], axis=0)
        return pd.DataFrame({"dose": x, "estimate": self.fit.predict(x), "ci_low": low,
                             "ci_high": high})

    def to_frame(self) -> pd.DataFrame:
        """One-row table: ``drop, estimate, ci_low, ci_high, ci_level, ci_method, ...``."""
        return pd.DataFrame([tidy_row(self, rename={"method": "ci_method"},
                                      drop=("fit", "bootstrap_distribution",
                                            "bootstrap_parameters"))])


def _seed_random(fit: DoseResponseFit, arr: np.ndarray, drop: float, estimate: float,
                 level: float) -> tuple[ConfidenceInterval, str]:
    """The seed-random interval of the module docstring, and its method label."""

    from robuststats.stats._seed_random import crossed_variance

    n_doses, k = arr.shape[:2]
    label = "seed-random t (log scale, " + ("items" if k == 1 else "seeds x items") + ")"
    if not (math.isfinite(estimate) and estimate > 0):
        return ConfidenceInterval(math.nan, math.nan), label
    acc = arr.mean(axis=(1, 2))
    curve = fit.curve
    target = threshold_target(curve, drop)
    fixed = {name: fit.parameters[name] for name in fit.fixed}
    start = np.array([fit.parameters[name] for name in fit.free])

    def log_threshold(y: np.ndarray) -> float:
        prob = Problem(curve, fit.dose, y, fit.weights, "binomial", fixed, fit.free)
        with np.errstate(all="ignore"):
            theta, value, ok = solve(prob, start, tol=1e-12)
        t = dose_at(curve, prob.params(theta), target) if ok and math.isfinite(value) \
            else math.nan
        return math.log(t) if 0 < t < math.inf else math.nan

    grad = np.zeros(n_doses)
    for d in range(n_doses):
        up, down = acc.copy(), acc.copy()
        up[d] = min(acc[d] + _STEP, 1.0)
        down[d] = max(acc[d] - _STEP, 0.0)
        if up[d] > down[d]:
            grad[d] = (log_threshold(up) - log_threshold(down)) / (up[d] - down[d])
    if not np.all(np.isfinite(grad)):
        return ConfidenceInterval(math.nan, math.nan), label
    linear = np.tensordot(grad, arr, axes=(0, 0))  # (k, n): Σ_d ∂logT/∂A_d · y_dsi
    cv = crossed_variance(linear)
    se = math.sqrt(max(cv.variance, 0.0))
    q = cv.reference.critical(level)  # calibrated for few seeds (._few_seeds)
    centre = math.log(estimate)
    return ConfidenceInterval(math.exp(centre - q * se), math.exp(centre + q * se)), label


def _select(x: np.ndarray, acc: np.ndarray, totals: np.ndarray,
            fixed: Mapping[str, float] | None) -> str:
    """The model of :data:`AUTO_MODELS` with the smallest AIC on the binomial fit."""
    from robuststats.stats.dose._response import select_dose_response

    table = select_dose_response(x, acc, models=AUTO_MODELS, weights=totals, type="binomial",
                                 fixed=fixed)
    usable = table[table["converged"].astype(bool) & np.isfinite(table["aic"])]
    if usable.empty:
        raise InputError(f"model='auto': none of {list(AUTO_MODELS)} could be fitted to the "
                         "accuracies; name a model.")
    return str(usable["model"].iloc[0])


def _outcomes(dose: object, outcomes: object) -> tuple[np.ndarray, np.ndarray]:
    x = as_float_array(dose, "dose", ndim=1, low=0.0)
    arr = as_float_array(outcomes, "outcomes", ndim=(2, 3),
                         shapes=("(n_doses, n_items)", "(n_doses, n_seeds, n_items)"),
                         what="an array of outcomes in [0, 1]", low=0.0, high=1.0)
    if arr.ndim == 2:
        arr = arr[:, None, :]
    if arr.shape[0] != x.size:
        raise InputError(f"`outcomes` must have one row per dose ({x.size}), got shape "
                         f"{arr.shape}.")
    if arr.shape[2] < 2:
        raise InputError(f"`outcomes` must hold at least 2 items per dose, got {arr.shape[2]}.")
    return x, arr


def critical_threshold(
    dose: object, outcomes: object, *, drop: float = 0.10, model: str = "auto",
    fixed: Mapping[str, float] | None = None, interval: str = "seed-random",
    confidence_level: float = 0.95, n_resamples: int = 1000,
    rng: np.random.Generator | int | None = None,
) -> ThresholdResult:
    """The noise scale at which accuracy falls by ``drop`` of the clean accuracy.

    Parameters
    ----------
    dose : array_like, shape (n_doses,)
        Noise scales (0 = clean; include it: the clean accuracy anchors the curve).
    outcomes : array_like, shape (n_doses, n_items) or (n_doses, n_seeds, n_items)
        Item outcomes in [0, 1], aligned over doses (same seeds, same items).
    drop : float
        Relative loss in (0, 1) that defines the threshold (0.10 = 10 % of clean).
    model : str
        A drc model name (:data:`~robuststats.stats.DOSE_RESPONSE_MODELS`), or ``"auto"``:
        the smallest AIC among :data:`AUTO_MODELS` (log-logistic and both Weibull shapes),
        fitted to the observed accuracies. The bootstrap then refits the chosen model, so
        the interval does not carry the uncertainty of the choice. The threshold is read
        off a fitted curve, so a curve of the wrong shape biases it: in a simulated
        population whose accuracy falls like W1.4, LL.4 put the threshold 26 % too high
        (docs/statistics.md §10, "Calibration").
    fixed : mapping, optional
        Fixed parameters, e.g. ``{"c": 0.25}`` with ``model="LL.3"`` for a floor at chance.
    interval : {"seed-random", "bootstrap", "delta"}
        See the module docstring: ``"seed-random"`` (default) is calibrated over seeds and
        items; ``"bootstrap"`` under-covers with few seeds and seed effects; ``"delta"``
        ignores the clustering by items and seeds.
    confidence_level, n_resamples, rng
        As in the package's bootstrap functions.

    Returns
    -------
    ThresholdResult
    """
    x, arr = _outcomes(dose, outcomes)
    drop = check_number(drop, "drop", low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice(interval, "interval", _INTERVALS)
    level = check_confidence_level(confidence_level)
    b = check_n_resamples(n_resamples) if interval == "bootstrap" else 0
    gen = check_rng(rng) if interval == "bootstrap" else None
    n_doses, k, n = arr.shape
    acc = arr.mean(axis=(1, 2))
    totals = np.full(n_doses, float(k * n))
    if model == "auto":
        model = _select(x, acc, totals, fixed)
    fit = fit_dose_response(x, acc, model=model, weights=totals, type="binomial", fixed=fixed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        delta = fit.critical_threshold(drop, interval="delta", confidence_level=level)
    if not math.isfinite(delta.estimate):
        warnings.warn(f"the fitted {fit.model} curve never falls to {1 - drop:.0%} of its "
                      f"clean accuracy {fit.control_response:.3g}: the threshold is "
                      "infinite.", DegenerateDataWarning, stacklevel=2)
    common = dict(drop=drop, estimate=delta.estimate, confidence_level=level,
                  clean_accuracy=fit.control_response, model=fit.model, n_doses=n_doses,
                  n_seeds=k, n_items=n, fit=fit)
    if interval == "seed-random":
        ci, method = _seed_random(fit, arr, drop, delta.estimate, level)
        return ThresholdResult(confidence_interval=ci, method=method, n_resamples=0,
                               n_not_reached=0, n_failed=0,
                               bootstrap_distribution=np.empty(0), **common)
    if interval == "delta":
        return ThresholdResult(confidence_interval=delta.confidence_interval,
                               method=f"{delta.method}, items independent", n_resamples=0,
                               n_not_reached=0, n_failed=0,
                               bootstrap_distribution=np.empty(0), **common)
    boot, params, failed = _bootstrap(fit, arr, drop, b, gen)
    not_reached = int(np.sum(np.isinf(boot)))
    if failed:
        warnings.warn(f"{failed} of {b} bootstrap refits of {fit.model} failed and were "
                      "dropped.", DegenerateDataWarning, stacklevel=2)
    if boot.size < 2:
        ci = ConfidenceInterval(math.nan, math.nan)
    else:
        alpha = 1.0 - level
        low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2], method="linear")
        ci = ConfidenceInterval(float(low), float(high))
    scheme = "items" if k == 1 else "seeds x items"
    return ThresholdResult(confidence_interval=ci, method=f"bootstrap percentile ({scheme})",
                           n_resamples=b, n_not_reached=not_reached, n_failed=failed,
                           bootstrap_distribution=boot, bootstrap_parameters=params,
                           **common)


def _bootstrap(fit: DoseResponseFit, arr: np.ndarray, drop: float, n_resamples: int,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """Refitted thresholds and parameters of ``n_resamples`` two-way resamples, and the
    number of failed refits."""
    n_doses, k, n = arr.shape
    acc = arr.mean(axis=(1, 2))
    star = resampled_totals(arr, n_resamples, rng) / (k * n)  # (B, n_doses)
    if k > 1:
        ratio = np.array([crossed_variance_ratio(arr[j]) for j in range(n_doses)])
        star = np.clip(acc + (star - acc) * ratio, 0.0, 1.0)
    curve = fit.curve
    target = threshold_target(curve, drop)
    fixed = {name: fit.parameters[name] for name in fit.fixed}
    start = np.array([fit.parameters[name] for name in fit.free])
    out = np.empty(n_resamples)
    params = np.empty((n_resamples, start.size))
    failed = np.zeros(n_resamples, dtype=bool)
    with np.errstate(all="ignore"):
        for i in range(n_resamples):
            prob = Problem(curve, fit.dose, star[i], fit.weights, "binomial", fixed, fit.free)
            theta, value, ok = solve(prob, start, tol=1e-8)
            if not (ok and math.isfinite(value)):
                failed[i] = True
                continue
            out[i] = dose_at(curve, prob.params(theta), target)
            params[i] = theta
    return out[~failed], params[~failed], int(failed.sum())
