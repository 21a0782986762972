"""Dose-response fits in drc's vocabulary: ``fit_dose_response`` and model selection.

Models (:mod:`._models`) are drc's ``LL.2``–``LL.5``, ``W1.2``–``W1.4`` and
``W2.2``–``W2.4``, with the parameters ``b, c, d, e[, f]`` of Ritz et al. (2015),
"Dose-Response Analysis Using R", PLoS ONE 10(12): e0146021. Responses are

* ``type="continuous"``: least squares, ``Σ w (y − f(x))²`` (drc's default);
  ``weights`` multiply the squared residuals, as in ``nls``/``lm`` (drc ≥ 3.1 takes
  weights on the standard-deviation scale instead: pass ``1/sd²`` here);
* ``type="binomial"``: maximum likelihood for ``response`` = proportion correct out of
  ``weights`` = trials (drc's ``type = "binomial"`` with ``weights = total``). The limits
  ``c`` and ``d`` are probabilities and are kept in [0, 1] (drc leaves them free; a slowly
  falling curve then runs off to ``c → −∞``, ``e → ∞``).

Standard errors come from the observed information at the estimate: the inverse Hessian
of the negative log-likelihood (binomial), and ``σ̂² (½ ∂²RSS/∂θ²)⁻¹`` with
``σ̂² = RSS/(n − p)`` (least squares), exactly drc's ``vcov``. The log-likelihood is drc's:
the normal one with ``σ̂² = RSS/n`` and ``p + 1`` parameters (plus ``½ Σ log w`` with
weights, as R's ``logLik.nls``), and the binomial one with its binomial coefficients and
``p`` parameters. AIC = −2 logLik + 2 df. The fitted curve, its predictions, effective
doses and thresholds (with intervals on Student's t or the normal, as drc's) are in
:mod:`._curve`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import special

from robuststats._validation import (
    as_float_array,
    check_choice,
    check_number,
)
from robuststats.errors import InputError
from robuststats.stats._common import DegenerateDataWarning
from robuststats.stats.dose._curve import DoseResponseFit
from robuststats.stats.dose._fitting import Problem, solve
from robuststats.stats.dose._models import MODELS

__all__ = [
    "DOSE_RESPONSE_MODELS",
    "fit_dose_response",
    "select_dose_response",
]

#: model names accepted by :func:`fit_dose_response`
DOSE_RESPONSE_MODELS: tuple[str, ...] = tuple(MODELS)
_TYPES = ("continuous", "binomial")


# ---------------------------------------------------------------------- fitting
def _fit_iv(dose, response, model, weights, type, fixed):
    curve = MODELS[check_choice(model, "model", DOSE_RESPONSE_MODELS)]
    check_choice(type, "type", _TYPES)
    x = as_float_array(dose, "dose", ndim=1, low=0.0)
    y = as_float_array(response, "response", ndim=1)
    if y.shape != x.shape:
        raise InputError(f"`response` must have the shape of `dose` {x.shape}, got {y.shape}.")
    if type == "binomial" and (np.any(y < 0) or np.any(y > 1)):
        raise InputError("`response` must hold proportions in [0, 1] for type='binomial'.")
    if weights is None:
        w = np.ones_like(x)
    else:
        w = as_float_array(weights, "weights", ndim=1)
        if w.shape != x.shape:
            raise InputError(f"`weights` must have the shape of `dose` {x.shape}, "
                             f"got {w.shape}.")
        if np.any(w <= 0):
            raise InputError("`weights` must be positive numbers.")
    fixed_all = dict(curve.fixed)
    if fixed is not None:
        if not isinstance(fixed, Mapping):
            raise InputError(f"`fixed` must be a mapping of parameter names to values, got "
                             f"{fixed.__class__.__name__}.")
        for key, value in fixed.items():
            check_choice(key, "fixed", curve.params)
            fixed_all[key] = check_number(value, f"fixed[{key!r}]")
    if fixed_all.get("e", 1.0) <= 0:
        raise InputError(f"`fixed['e']` must be a number > 0, got {fixed_all['e']!r}.")
    free = tuple(k for k in curve.params if k not in fixed_all)
    if not free:
        raise InputError(f"`fixed` fixes every parameter of {curve.name}; leave one free.")
    if np.unique(x[x > 0]).size < 2:
        raise InputError("`dose` must hold at least two distinct positive doses.")
    extra = 1 if type == "continuous" else 0
    if x.size < len(free) + extra:
        raise InputError(f"{curve.name} with {len(free)} free parameters needs at least "
                         f"{len(free) + extra} observations, got {x.size}.")
    return curve, x, y, w, fixed_all, free


def fit_dose_response(
    dose: object, response: object, *, model: str = "LL.4", weights: object = None,
    type: str = "continuous", fixed: Mapping[str, float] | None = None,
    start: Mapping[str, float] | None = None,
) -> DoseResponseFit:
    """Fit a drc dose-response curve (drc's ``drm(response ~ dose, fct = model())``).

    Parameters
    ----------
    dose : array_like, shape (n_obs,)
        Doses ≥ 0 (0 is the control). At least two distinct positive doses.
    response : array_like, shape (n_obs,)
        Responses; proportions in [0, 1] for ``type="binomial"``.
    model : str
        One of :data:`DOSE_RESPONSE_MODELS` (``"LL.4"``, ``"LL.3"``, ``"LL.5"``,
        ``"W1.4"``, ``"W2.4"``, ...).
    weights : array_like, shape (n_obs,), optional
        Least squares: case weights multiplying the squared residuals. Binomial: the
        number of trials behind each proportion (default 1: Bernoulli responses).
    type : {"continuous", "binomial"}
    fixed : mapping, optional
        Parameters held at a value, drc's ``fixed =``: ``{"c": 0.25}`` with ``"LL.3"``
        fixes the lower limit at a chance accuracy of 25 % (``LL.3`` fixes ``c = 0``
        by default, ``LL.2`` also ``d = 1``).
    start : mapping, optional
        Starting values of free parameters; the self-starter is tried as well.

    Returns
    -------
    DoseResponseFit
    """
    curve, x, y, w, fixed_all, free = _fit_iv(dose, response, model, weights, type, fixed)
    prob = Problem(curve, x, y, w, type, fixed_all, free)
    starts = prob.starts()
    if start is not None:
        if not isinstance(start, Mapping):
            raise InputError(f"`start` must be a mapping of parameter names to values, got "
                             f"{start.__class__.__name__}.")
        for key in start:
            check_choice(key, "start", free)
        first = dict(zip(free, starts[0]))
        first.update({k: check_number(v, f"start[{k!r}]") for k, v in start.items()})
        starts.insert(0, np.array([first[k] for k in free]))
    best = (None, math.inf, False)
    with np.errstate(all="ignore"):
        for s in starts:
            theta, value, ok = solve(prob, s)
            if math.isfinite(value) and (best[0] is None
                                         or value < best[1] - 1e-12 * abs(best[1])):
                best = (theta, value, ok)
    theta, value, converged = best
    if theta is None:
        raise InputError(f"{curve.name} could not be fitted to these data from any start "
                         "(the objective is not finite); check `dose` and `response`.")
    return _finish(prob, theta, value, converged)


def _finish(prob: Problem, theta: np.ndarray, value: float, converged: bool
            ) -> DoseResponseFit:
    curve, x, y, w, free = prob.curve, prob.x, prob.y, prob.w, prob.free
    n, k = x.size, len(free)
    hess = prob.hessian(theta)
    df_res = n - k
    if prob.kind == "continuous":
        rss = value
        sigma2 = rss / df_res if df_res > 0 else math.nan
        info = hess / (2.0 * sigma2) if sigma2 > 0 else hess * math.inf
        loglik = -n / 2 * (math.log(2 * math.pi) + 1 - math.log(n)
                           - float(np.sum(np.log(w))) / n + math.log(max(rss, 1e-300)))
        df = k + 1
        resvar: float | None = sigma2
    else:
        successes = y * w
        const = float(np.sum(special.gammaln(w + 1) - special.gammaln(successes + 1)
                             - special.gammaln(w - successes + 1)))
        loglik = const - value
        info = hess
        df = k
        resvar = None
    with np.errstate(all="ignore"):
        try:
            vcov = np.linalg.inv(info)
        except np.linalg.LinAlgError:
            vcov = np.full((k, k), np.nan)
    if not np.all(np.isfinite(vcov)) or np.any(np.diag(vcov) < 0):
        warnings.warn(f"the observed information of the {curve.name} fit is singular: "
                      "standard errors are NaN (a parameter is not identified by these "
                      "data; fix one with `fixed` or choose a smaller model).",
                      DegenerateDataWarning, stacklevel=3)
        vcov = np.full((k, k), np.nan)
    se = np.sqrt(np.diag(vcov))
    params = {name: float(prob.fixed.get(name, math.nan)) for name in curve.params}
    params.update({name: float(v) for name, v in zip(free, theta)})
    ses = {name: 0.0 for name in curve.params}
    ses.update({name: float(s) for name, s in zip(free, se)})
    return DoseResponseFit(
        model=curve.name, type=prob.kind, parameters=params, standard_errors=ses,
        fixed=tuple(k for k in curve.params if k not in free), vcov=vcov, free=free,
        loglik=float(loglik), df=df, aic=float(-2 * loglik + 2 * df), df_residual=df_res,
        residual_variance=resvar, n_obs=n, converged=converged, dose=x, response=y,
        weights=w)


def select_dose_response(
    dose: object, response: object, *,
    models: Sequence[str] = ("LL.4", "LL.3", "LL.5", "W1.4", "W2.4"),
    weights: object = None, type: str = "continuous",
    fixed: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """drc's ``mselect``: fit each model and rank them by AIC (smallest first).

    Columns ``model, loglik, aic, residual_variance, n_parameters, converged``
    (``residual_variance`` empty for binomial fits). ``fixed`` applies to every model
    that has the parameter free. A model that cannot be fitted gets a row with NaN and
    ``converged`` False, at the bottom.
    """
    if isinstance(models, str) or not isinstance(models, Sequence) or not models:
        raise InputError(f"`models` must be a non-empty list of model names, got {models!r}.")
    rows = []
    for name in models:
        check_choice(name, "models", DOSE_RESPONSE_MODELS)
        own = {k: v for k, v in (fixed or {}).items() if k in MODELS[name].params}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DegenerateDataWarning)
                fit = fit_dose_response(dose, response, model=name, weights=weights,
                                        type=type, fixed=own or None)
        except InputError as exc:
            if "could not be fitted" not in str(exc):
                raise
            rows.append({"model": name, "loglik": math.nan, "aic": math.nan,
                         "residual_variance": math.nan, "n_parameters": math.nan,
                         "converged": False})
            continue
        rows.append({"model": name, "loglik": fit.loglik, "aic": fit.aic,
                     "residual_variance": fit.residual_variance, "n_parameters": len(fit.free),
                     "converged": fit.converged})
    table = pd.DataFrame(rows)
    return table.sort_values("aic", na_position="last", kind="stable").reset_index(drop=True)
