"""The dose-response curves of drc (Ritz et al. 2015), in drc's parameterisation.

Every model is ``f(x) = c + (d − c) · g(u)`` with ``u = b · (log x − log e)``:

* log-logistic (``LL.*``): ``g = 1 / (1 + exp(u))^f`` (``f = 1`` except for ``LL.5``);
* Weibull type 1 (``W1.*``): ``g = exp(−exp(u))``;
* Weibull type 2 (``W2.*``): ``g = 1 − exp(−exp(u))``.

The suffix counts the free parameters; the others are fixed as in drc: ``LL.3``/``W1.3``/
``W2.3`` fix the lower limit ``c = 0``, ``LL.2``/``W1.2``/``W2.2`` also fix ``d = 1``.
At dose 0 (``log x = −∞``) ``g`` takes its limit (``0`` or ``1``, by the model and the sign
of ``b``); the response there is the *control* level.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special

__all__ = ["DOSE_MODELS", "MODELS", "DoseModel"]

#: ``u`` is clipped here: every ``g`` is saturated to double precision well before
_U_LIMIT = 200.0


@dataclass(frozen=True)
class DoseModel:
    """One named curve: its family, its parameters and the ones drc fixes by default."""

    name: str
    family: str  # "LL", "W1" or "W2"
    params: tuple[str, ...]
    fixed: dict[str, float] = field(default_factory=dict)
    description: str = ""

    # ------------------------------------------------------------------ the curve
    def _u(self, dose: np.ndarray, b: float, e: float) -> tuple[np.ndarray, np.ndarray]:
        """``u`` (clipped) and ``log x − log e`` (0 at dose 0, where ∂u vanishes)."""
        positive = dose > 0
        logx = np.log(np.where(positive, dose, 1.0)) - np.log(e)
        with np.errstate(invalid="ignore", over="ignore"):
            u = np.where(positive, b * logx, -np.sign(b) * np.inf)
        u = np.clip(np.nan_to_num(u, nan=0.0), -_U_LIMIT, _U_LIMIT)
        return u, np.where(positive, logx, 0.0)

    def g(self, u: np.ndarray, f: float = 1.0) -> np.ndarray:
        if self.family == "LL":
            return np.exp(-f * np.logaddexp(0.0, u))
        if self.family == "W1":
            return np.exp(-np.exp(u))
        return -np.expm1(-np.exp(u))

    def dg_du(self, u: np.ndarray, f: float = 1.0) -> np.ndarray:
        if self.family == "LL":
            return -f * self.g(u, f) * special.expit(u)
        if self.family == "W1":
            return -np.exp(u - np.exp(u))
        return np.exp(u - np.exp(u))

    def g_inverse(self, g: float, f: float = 1.0) -> float:
        """``u`` at which the curve's ``g`` equals ``g`` (0 < g < 1)."""
        if self.family == "LL":
            return float(np.log(np.expm1(-np.log(g) / f)))
        if self.family == "W1":
            return float(np.log(-np.log(g)))
        return float(np.log(-np.log1p(-g)))

    def control_g(self, b: float) -> float:
        """``g`` at dose 0: the limit of ``g(u)`` as ``u → −sign(b)·∞``."""
        at_minus = 0.0 if self.family == "W2" else 1.0  # g(−∞)
        return at_minus if b > 0 else 1.0 - at_minus

    def response(self, dose: np.ndarray, p: dict[str, float]) -> np.ndarray:
        u, _ = self._u(dose, p["b"], p["e"])
        return p["c"] + (p["d"] - p["c"]) * self.g(u, p.get("f", 1.0))

    def jacobian(self, dose: np.ndarray, p: dict[str, float], names: tuple[str, ...]
                 ) -> np.ndarray:
        """``(n, len(names))``: ∂f/∂θ for the parameters ``names``."""
        f = p.get("f", 1.0)
        u, logx = self._u(dose, p["b"], p["e"])
        g = self.g(u, f)
        dg = self.dg_du(u, f) * (p["d"] - p["c"])
        cols = {
            "b": dg * logx,
            "c": 1.0 - g,
            "d": g,
            "e": dg * (-p["b"] / p["e"]),
        }
        if "f" in names:
            cols["f"] = -(p["d"] - p["c"]) * g * np.logaddexp(0.0, u)
        return np.column_stack([cols[n] for n in names])


def _family(name: str, family: str, description: str) -> dict[str, DoseModel]:
    base = ("b", "c", "d", "e")
    return {
        f"{name}.4": DoseModel(f"{name}.4", family, base, {}, description),
        f"{name}.3": DoseModel(f"{name}.3", family, base, {"c": 0.0},
                               f"{description}, lower limit c fixed (default 0)"),
        f"{name}.2": DoseModel(f"{name}.2", family, base, {"c": 0.0, "d": 1.0},
                               f"{description}, limits fixed at c = 0 and d = 1"),
    }


#: model name (drc's) -> curve
MODELS: dict[str, DoseModel] = {
    **_family("LL", "LL", "log-logistic"),
    "LL.5": DoseModel("LL.5", "LL", ("b", "c", "d", "e", "f"), {},
                      "generalised log-logistic (asymmetry f)"),
    **_family("W1", "W1", "Weibull type 1"),
    **_family("W2", "W2", "Weibull type 2"),
}

#: the models by name, as :mod:`robuststats.stats` exports them
DOSE_MODELS = MODELS
