"""The optimiser behind :func:`~robuststats.stats.fit_dose_response`.

Least squares go to MINPACK's Levenberg-Marquardt (``scipy.optimize.least_squares``) with
the analytic Jacobian. Binomial likelihoods go to the bounded trust-region solver on the
signed deviance residuals (their sum of squares is twice the negative log-likelihood up to
a constant), with the limits ``c`` and ``d`` kept in [0, 1]. ``e`` is optimised on the log
scale (it must stay positive); results are reported on drc's scale. Several starts (drc's
self-starter and perturbations of it) are tried and the best optimum kept. Standard errors
use the Hessian of the objective: central differences of its analytic gradient.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from robuststats.stats.dose._models import DoseModel

__all__ = ["Problem", "solve"]

#: probabilities are kept in [ε, 1 − ε] in the binomial likelihood (drc's zeroTol)
_EPS = 1e-12


class Problem:
    """Objective, gradient and starting values of one fit (natural parameters)."""

    def __init__(self, curve: DoseModel, x, y, w, kind: str, fixed: dict[str, float],
                 free: tuple[str, ...]) -> None:
        self.curve, self.x, self.y, self.w, self.kind = curve, x, y, w, kind
        self.fixed, self.free = fixed, free

    def params(self, theta: np.ndarray) -> dict[str, float]:
        p = {"f": 1.0, **self.fixed, **dict(zip(self.free, map(float, theta)))}
        return p

    def objective(self, theta: np.ndarray) -> float:
        """RSS (continuous) or the negative log-likelihood without constants (binomial)."""
        p = self.params(theta)
        if p["e"] <= 0:
            return math.inf
        mu = self.curve.response(self.x, p)
        if self.kind == "continuous":
            return float(np.sum(self.w * (self.y - mu) ** 2))
        prob = np.clip(mu, _EPS, 1 - _EPS)
        n = self.w
        return float(-np.sum(n * (self.y * np.log(prob) + (1 - self.y) * np.log1p(-prob))))

    def gradient(self, theta: np.ndarray) -> np.ndarray:
        p = self.params(theta)
        mu = self.curve.response(self.x, p)
        jac = self.curve.jacobian(self.x, p, self.free)
        if self.kind == "continuous":
            return -2.0 * jac.T @ (self.w * (self.y - mu))
        prob = np.clip(mu, _EPS, 1 - _EPS)
        inside = (mu > _EPS) & (mu < 1 - _EPS)  # clipped probabilities do not move
        score = np.where(inside, self.w * (self.y - prob) / (prob * (1 - prob)), 0.0)
        return -jac.T @ score

    def hessian(self, theta: np.ndarray) -> np.ndarray:
        """Central differences of the analytic gradient, symmetrised."""
        k = theta.size
        hess = np.empty((k, k))
        for j in range(k):
            h = 1e-5 * max(abs(theta[j]), 1e-2)
            up, down = theta.copy(), theta.copy()
            up[j] += h
            down[j] -= h
            hess[:, j] = (self.gradient(up) - self.gradient(down)) / (2 * h)
        return (hess + hess.T) / 2

    # ------------------------------------------------------------------ starts
    def starts(self) -> list[np.ndarray]:
        """drc-style self-starter: limits from the data, ``b`` and ``e`` from the
        linearised curve; plus a few perturbations."""
        x, y = self.x, self.y
        lo, hi = float(np.min(y)), float(np.max(y))
        span = max(hi - lo, 1e-3 * max(abs(hi), 1.0))
        c0 = self.fixed.get("c", lo - 0.01 * span)
        d0 = self.fixed.get("d", hi + 0.01 * span)
        if self.kind == "binomial":
            c0 = self.fixed.get("c", max(lo - 0.01 * span, 0.0))
            d0 = self.fixed.get("d", min(hi + 0.01 * span, 1.0))
        pos = x > 0
        starts = []
        # c starts as the lower limit and d as the upper one, as drc's self-starters do:
        # W1.4 with c and d swapped is W2.4, so the swapped start would change the model
        for cc, dd in ((c0, d0),):
            if dd == cc:
                dd = cc + 1.0
            g = np.clip((y[pos] - cc) / (dd - cc), 0.02, 0.98)
            u = np.array([self.curve.g_inverse(v) for v in g])
            lx = np.log(x[pos])
            if np.ptp(lx) > 0 and np.ptp(u) > 0:
                slope, intercept = np.polyfit(lx, u, 1)
            else:
                slope, intercept = 1.0, -float(np.median(lx))
            if not np.isfinite(slope) or abs(slope) < 1e-3:
                slope = 1.0
            b0 = float(slope)
            e0 = float(np.exp(np.clip(-intercept / slope, -700, 700)))
            if not np.isfinite(e0) or e0 <= 0:
                e0 = float(np.median(x[pos]))
            base = {"b": b0, "c": cc, "d": dd, "e": e0, "f": 1.0}
            for bs, es in ((1, 1), (0.5, 1), (2, 1), (1, 0.5), (1, 2)):
                trial = {**base, "b": b0 * bs, "e": e0 * es}
                starts.append(np.array([trial[k] for k in self.free]))
        return starts


def _to_internal(theta: np.ndarray, free: tuple[str, ...]) -> np.ndarray:
    out = theta.astype(float).copy()
    if "e" in free:
        out[free.index("e")] = math.log(out[free.index("e")])
    return out


def _to_natural(z: np.ndarray, free: tuple[str, ...]) -> np.ndarray:
    out = z.astype(float).copy()
    if "e" in free:
        out[free.index("e")] = math.exp(min(out[free.index("e")], 700.0))
    return out


def solve(prob: Problem, start: np.ndarray, *, tol: float = 1e-14
          ) -> tuple[np.ndarray, float, bool]:
    """Minimise from ``start`` (natural parameters); ``e`` is optimised on the log scale.

    Least squares go to Levenberg-Marquardt on ``√w (y − f)``; binomial likelihoods to the
    bounded trust-region solver (``c``, ``d`` in [0, 1]) on the signed deviance residuals, whose sum of squares is twice the
    negative log-likelihood up to a constant (so the optimum is the maximum-likelihood
    estimate). ``tol``: MINPACK's ``xtol``, ``ftol`` and ``gtol``. Returns
    ``(theta, objective, converged)``.
    """
    free = prob.free
    ei = free.index("e") if "e" in free else None

    def natural_jacobian(theta: np.ndarray) -> np.ndarray:
        j = prob.curve.jacobian(prob.x, prob.params(theta), free)
        if ei is not None:
            j[:, ei] *= theta[ei]  # ∂/∂log e = e ∂/∂e
        return j

    if prob.kind == "continuous":
        sw = np.sqrt(prob.w)

        def resid(z):
            p = prob.params(_to_natural(z, free))
            return sw * (prob.y - prob.curve.response(prob.x, p))

        def jac(z):
            return -sw[:, None] * natural_jacobian(_to_natural(z, free))
    else:
        n, y = prob.w, prob.y

        def parts(z):
            theta = _to_natural(z, free)
            mu = prob.curve.response(prob.x, prob.params(theta))
            pr = np.clip(mu, _EPS, 1 - _EPS)
            with np.errstate(divide="ignore", invalid="ignore"):
                dev = 2 * n * (special.xlogy(y, y / pr) + special.xlogy(1 - y, (1 - y) / (1 - pr)))
            r = np.sign(y - pr) * np.sqrt(np.maximum(dev, 0.0))
            return theta, mu, pr, r

        def resid(z):
            return parts(z)[3]

        def jac(z):
            theta, mu, pr, r = parts(z)
            score = n * (y - pr) / (pr * (1 - pr))  # ∂(r²/2)/∂p, negated
            pearson = np.sqrt(n / (pr * (1 - pr)))
            with np.errstate(divide="ignore", invalid="ignore"):
                scale = np.where(np.abs(r) > 1e-8, score / r, pearson)  # dr/dp, negated
            inside = (mu > _EPS) & (mu < 1 - _EPS)  # clipped probabilities do not move
            return -(np.where(inside, scale, 0.0))[:, None] * natural_jacobian(theta)

    z0 = _to_internal(start, free)
    limits = [j for j, k in enumerate(free) if k in ("c", "d")]

    def run(**options: object) -> tuple[np.ndarray, float, bool]:
        try:
            res = optimize.least_squares(resid, z0, jac=jac, **options)
        except (ValueError, FloatingPointError, np.linalg.LinAlgError):
            return start, math.inf, False
        theta = _to_natural(res.x, free)
        value = prob.objective(theta)
        ok = bool(res.success) and bool(np.all(np.isfinite(theta))) and math.isfinite(value)
        return theta, value, ok

    if not (prob.kind == "binomial" and limits):
        return run(method="lm", xtol=tol, ftol=tol, gtol=tol, max_nfev=300)
    # limits of a probability stay in [0, 1]: without the bounds a slowly falling curve
    # is fitted by c → −∞, e → ∞ and the optimiser never stops
    low = np.array([0.0 if k in ("c", "d") else -np.inf for k in free])
    high = np.array([1.0 if k in ("c", "d") else np.inf for k in free])
    z0 = np.clip(z0, low, high)
    return run(method="trf", bounds=(low, high), x_scale="jac", xtol=max(tol, 1e-12),
               ftol=max(tol, 1e-12), gtol=max(tol, 1e-12), max_nfev=300)
