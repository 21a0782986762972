"""A fitted dose-response curve and what it answers: predictions, effective doses, thresholds.

:class:`DoseResponseFit` is what :func:`~robuststats.stats.fit_dose_response`
(:mod:`._response`) returns: drc's parameters ``b, c, d, e[, f]`` (Ritz et al. 2015,
"Dose-Response Analysis Using R", PLoS ONE 10(12): e0146021) with their covariance from
the observed information. Predictions and effective doses (drc's ``ED``) get delta-method
intervals: the gradient of the dose in the free parameters (central differences) with that
covariance, and Student's t on the residual degrees of freedom for least squares or the
normal distribution for binomial fits, as drc does.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import special, stats

from robuststats._validation import (
    as_float_array,
    check_choice,
    check_confidence_level,
    check_number,
)
from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning
from robuststats.stats.dose._models import MODELS, DoseModel

__all__ = ["DoseResponseFit", "EffectiveDose", "dose_at", "threshold_target"]

_INTERVALS = ("delta", "none")
_ED_TYPES = ("relative", "absolute")


@dataclass(frozen=True)
class EffectiveDose:
    """An effective dose (drc's ``ED``) or a critical threshold, with its interval.

    Attributes
    ----------
    quantity : str
        ``"ED"`` (drc's effective dose) or ``"threshold"`` (accuracy down by ``level``
        of the control level).
    level : float
        ``p`` of ``ED(p)`` in percent, the response level of an absolute ED, or the
        relative drop of a threshold.
    type : str
        ``"relative"`` or ``"absolute"`` (``"drop"`` for a threshold).
    estimate : float
        The dose; ``inf`` when the fitted curve never reaches the level.
    standard_error : float
        Delta-method standard error (NaN when ``estimate`` is infinite).
    confidence_interval : ConfidenceInterval
    confidence_level : float
    method : str
        How the interval was computed.
    """

    quantity: str
    level: float
    type: str
    estimate: float
    standard_error: float
    confidence_interval: ConfidenceInterval
    confidence_level: float
    method: str


@dataclass(frozen=True)
class DoseResponseFit:
    """A fitted dose-response curve. Parameter names are drc's: ``b, c, d, e[, f]``.

    Attributes
    ----------
    model : str
        drc's name of the curve (``"LL.4"``, ``"W1.4"``, ...).
    type : str
        ``"continuous"`` (least squares) or ``"binomial"`` (maximum likelihood).
    parameters : dict[str, float]
        Every parameter of the curve, fixed ones included.
    standard_errors : dict[str, float]
        Standard errors from the observed information (0 for fixed parameters).
    fixed : tuple[str, ...]
        The parameters held fixed.
    vcov : numpy.ndarray
        Covariance of the free parameters, in the order of ``free``.
    free : tuple[str, ...]
    loglik : float
    df : int
        Parameters counted by the log-likelihood (free ones, plus σ² for least squares).
    aic : float
    df_residual : int
        Observations minus free parameters.
    residual_variance : float | None
        ``RSS / df_residual`` for least squares; ``None`` for binomial fits.
    n_obs : int
    converged : bool
    dose, response, weights : numpy.ndarray
        The data the curve was fitted to.
    """

    model: str
    type: str
    parameters: dict[str, float]
    standard_errors: dict[str, float]
    fixed: tuple[str, ...]
    vcov: np.ndarray = field(repr=False)
    free: tuple[str, ...]
    loglik: float
    df: int
    aic: float
    df_residual: int
    residual_variance: float | None
    n_obs: int
    converged: bool
    dose: np.ndarray = field(repr=False, compare=False)
    response: np.ndarray = field(repr=False, compare=False)
    weights: np.ndarray = field(repr=False, compare=False)

    # ------------------------------------------------------------------ helpers
    @property
    def curve(self) -> DoseModel:
        return MODELS[self.model]

    @property
    def control_response(self) -> float:
        """The response at dose 0 (the clean accuracy of a noise sweep)."""
        g0 = self.curve.control_g(self.parameters["b"])
        p = self.parameters
        return p["c"] + (p["d"] - p["c"]) * g0

    def _quantile(self, confidence_level: float) -> float:
        q = 0.5 + confidence_level / 2.0
        if self.type == "binomial" or self.df_residual <= 0:
            return float(special.ndtri(q))
        return float(stats.t.ppf(q, self.df_residual))

    def to_frame(self) -> pd.DataFrame:
        """Parameter table: ``parameter, estimate, standard_error, fixed`` (drc's summary)."""
        return pd.DataFrame({
            "parameter": list(self.parameters),
            "estimate": list(self.parameters.values()),
            "standard_error": [self.standard_errors[k] for k in self.parameters],
            "fixed": [k in self.fixed for k in self.parameters],
        })

    # ------------------------------------------------------------------ prediction
    def predict(self, dose: object, *, interval: str = "none",
                confidence_level: float = 0.95) -> np.ndarray | pd.DataFrame:
        """Fitted response at ``dose`` (an array); with ``interval="confidence"`` a table
        ``dose, estimate, standard_error, ci_low, ci_high`` (delta method, as drc's
        ``predict(..., interval = "confidence")``)."""
        check_choice(interval, "interval", ("none", "confidence"))
        x = as_float_array(dose, "dose", ndim=(0, 1), low=0.0)
        flat = np.atleast_1d(x)
        fit = self.curve.response(flat, self.parameters)
        if interval == "none":
            return fit if x.ndim else float(fit[0])
        level = check_confidence_level(confidence_level)
        jac = self.curve.jacobian(flat, self.parameters, self.free)
        se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", jac, self.vcov, jac), 0.0))
        q = self._quantile(level)
        return pd.DataFrame({"dose": flat, "estimate": fit, "standard_error": se,
                             "ci_low": fit - q * se, "ci_high": fit + q * se})

    # ------------------------------------------------------------------ ED
    def _dose_at(self, theta: np.ndarray, target: Any) -> float:
        return dose_at(self.curve, {**self.parameters, **dict(zip(self.free, theta))},
                       target)

    def _effective(self, target: Any, *, quantity: str, level: float, kind: str,
                   interval: str, confidence_level: float) -> EffectiveDose:
        theta = np.array([self.parameters[k] for k in self.free])
        est = self._dose_at(theta, target)
        if not math.isfinite(est):
            warnings.warn(
                f"the fitted {self.model} curve never reaches the requested level "
                f"({quantity} {level:g}, {kind}); returning an infinite dose and no interval.",
                DegenerateDataWarning, stacklevel=3)
            nan = ConfidenceInterval(math.nan, math.nan)
            return EffectiveDose(quantity, level, kind, math.inf, math.nan, nan,
                                 confidence_level, "not reached")
        grad = np.empty(theta.size)
        for j in range(theta.size):
            h = 1e-6 * max(abs(theta[j]), 1e-3)
            up, down = theta.copy(), theta.copy()
            up[j] += h
            down[j] -= h
            grad[j] = (self._dose_at(up, target) - self._dose_at(down, target)) / (2 * h)
        se = float(math.sqrt(max(grad @ self.vcov @ grad, 0.0)))
        if interval == "none":
            ci = ConfidenceInterval(math.nan, math.nan)
            method = "none"
        else:
            q = self._quantile(confidence_level)
            ci = ConfidenceInterval(est - q * se, est + q * se)
            method = "delta (t)" if self.type == "continuous" else "delta (normal)"
        return EffectiveDose(quantity, level, kind, est, se, ci, confidence_level, method)

    def effective_dose(self, p: float, *, type: str = "relative", interval: str = "delta",
                       confidence_level: float = 0.95) -> EffectiveDose:
        """drc's ``ED(fit, p, type=, interval=)``.

        ``type="relative"``: ``p`` in percent (0, 100), the dose at which the response has
        moved ``p`` % of the way from the control level (dose 0) towards the other limit:
        10 % of ``d − c`` for ED10, *not* a 10 % drop of the control response (see
        :meth:`critical_threshold`). ``type="absolute"``: ``p`` is a response level.
        """
        check_choice(type, "type", _ED_TYPES)
        check_choice(interval, "interval", _INTERVALS)
        level = check_confidence_level(confidence_level)
        if type == "relative":
            p = check_number(p, "p", low=0.0, high=100.0, low_open=True, high_open=True)
            frac = p / 100.0

            def target(q: dict[str, float]) -> float:
                g0 = self.curve.control_g(q["b"])
                return g0 + (1.0 - 2.0 * g0) * frac
        else:
            p = check_number(p, "p")

            def target(q: dict[str, float]) -> float:
                span = q["d"] - q["c"]
                return (p - q["c"]) / span if span != 0 else math.nan
        return self._effective(target, quantity="ED", level=p, kind=type, interval=interval,
                               confidence_level=level)

    def critical_threshold(self, drop: float = 0.10, *, interval: str = "delta",
                           confidence_level: float = 0.95) -> EffectiveDose:
        """The dose at which the response falls by ``drop`` (a fraction) of the control
        response: the level ``(1 − drop) · f(0)``, e.g. 90 % of the clean accuracy.

        drc's relative ED10 is a different quantity: 10 % of ``d − c``, which equals a
        10 % drop only when the lower limit ``c`` is 0.
        """
        drop = check_number(drop, "drop", low=0.0, high=1.0, low_open=True, high_open=True)
        check_choice(interval, "interval", _INTERVALS)
        level = check_confidence_level(confidence_level)

        return self._effective(threshold_target(self.curve, drop), quantity="threshold", level=drop, kind="drop",
                               interval=interval, confidence_level=level)


def dose_at(curve: DoseModel, params: Mapping[str, float], target: Any) -> float:
    """Dose at which ``curve`` with ``params`` reaches the ``g`` value ``target(params)``
    (``inf`` when that value is outside (0, 1): the curve never gets there)."""
    g = target(params)
    if not (0.0 < g < 1.0) or params["e"] <= 0 or params["b"] == 0:
        return math.inf
    u = curve.g_inverse(g, params.get("f", 1.0))
    with np.errstate(over="ignore"):
        return float(params["e"] * np.exp(u / params["b"]))


def threshold_target(curve: DoseModel, drop: float) -> Any:
    """``g`` value of the response ``(1 − drop) · f(0)``, as a function of the parameters."""
    def target(q: Mapping[str, float]) -> float:
        g0 = curve.control_g(q["b"])
        control = q["c"] + (q["d"] - q["c"]) * g0
        span = q["d"] - q["c"]
        return ((1.0 - drop) * control - q["c"]) / span if span != 0 else math.nan

    return target
