"""Lan–DeMets error-spending functions.

A spending function ``f(t; α)`` gives the share of the error rate ``α`` spent by
information fraction ``t ∈ [0, 1]``: non-decreasing, ``f(0) = 0``, ``f(1) = α``. Lan & DeMets
(1983), "Discrete sequential boundaries for clinical trials", Biometrika 70:659–663:

* O'Brien–Fleming-like (``obf``): ``f(t; α) = 2 − 2Φ(Φ⁻¹(1 − α/2)/√t)``; it spends almost
  nothing early and keeps the last boundary close to the fixed design's.
* Pocock-like (``pocock``): ``f(t; α) = α·log(1 + (e − 1)t)``; it spends evenly, so early
  looks stop more often and the last boundary is higher.

Hwang, Shih & DeCani (1990), "Group sequential designs using a family of type I error
probability spending functions", Stat Med 9:1439–1445 (``hsd(γ)``, e.g. ``"hsd(-2)"``):

    f(t; α) = α·(1 − e^{−γt})/(1 − e^{−γ})   (γ ≠ 0),      f(t; α) = α·t   (γ = 0)

one parameter from O'Brien–Fleming-like (γ = −4 is close to it) through linear spending
(γ = 0) to Pocock-like (γ = 1 is close to it); γ in [−10, 5], the range of rpact's
``typeOfDesign = "asHSD"`` (``gammaA``) and ``typeBetaSpending = "bsHSD"`` (``gammaB``).

``α`` here is the error of one side (one tail); a two-sided symmetric design spends
``α/2`` on each tail with the same function (the convention of rpact's
``getDesignGroupSequential(sided = 2)`` and of Jennison & Turnbull 2000, ch. 7). The same
functions spend the type II error ``β`` of a futility bound (Pampallona, Tsiatis & Kim
2001, Drug Inf J 35:1113–1121; Jennison & Turnbull 2000, ch. 7).
"""

from __future__ import annotations

import math
import re

import numpy as np
from scipy import special

from robuststats.errors import InputError

__all__ = ["HSD_GAMMA_RANGE", "SPENDING_FUNCTIONS", "check_spending", "spent"]

#: the families; ``hsd`` takes its parameter in the name, ``hsd(γ)``
SPENDING_FUNCTIONS = ("obf", "pocock", "hsd")
HSD_GAMMA_RANGE = (-10.0, 5.0)
_HSD = re.compile(r"^hsd\(\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*\)$")


def _hsd_gamma(name: str) -> float | None:
    m = _HSD.match(name.strip())
    return None if m is None else float(m.group(1))


def check_spending(value: object, name: str = "spending") -> str:
    """``value`` as a canonical spending name: ``obf``, ``pocock`` or ``hsd(γ)`` with γ in
    [−10, 5] (``"hsd(-2.0)"`` becomes ``"hsd(-2)"``); one-line error otherwise.

    >>> check_spending("hsd( -2.0 )")
    'hsd(-2)'
    """
    if isinstance(value, str):
        if value in ("obf", "pocock"):
            return value
        gamma = _hsd_gamma(value)
        low, high = HSD_GAMMA_RANGE
        if gamma is not None and low <= gamma <= high:
            return f"hsd({gamma:g})"
        if gamma is not None:
            raise InputError(f"`{name}`: the Hwang–Shih–DeCani γ must be in [{low:g}, "
                             f"{high:g}], got {value!r}.")
    raise InputError(f"`{name}` must be 'obf', 'pocock' or 'hsd(γ)' (e.g. 'hsd(-2)'), got "
                     f"{value!r}.")


def spent(spending: str, fractions: np.ndarray | list[float], alpha: float) -> np.ndarray:
    """Cumulative error spent ``f(t; α)`` at each information fraction (clipped to [0, 1]).

    >>> spent("pocock", [1.0], 0.025).round(6).tolist()
    [0.025]
    >>> spent("hsd(0)", [0.5], 0.05).round(6).tolist()
    [0.025]
    """
    name = check_spending(spending)
    t = np.clip(np.asarray(fractions, dtype=float), 0.0, 1.0)
    if name == "obf":
        with np.errstate(divide="ignore"):
            z = special.ndtri(1.0 - alpha / 2.0) / np.sqrt(t)
        return np.where(t > 0, 2.0 - 2.0 * special.ndtr(z), 0.0)
    if name == "pocock":
        return alpha * np.log1p((np.e - 1.0) * t)
    gamma = _hsd_gamma(name)
    assert gamma is not None
    if gamma == 0.0:
        return alpha * t
    return alpha * np.expm1(-gamma * t) / math.expm1(-gamma)
