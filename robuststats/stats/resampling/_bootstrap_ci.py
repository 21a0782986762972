"""Bootstrap interval construction from a bootstrap distribution, at any level.

A :class:`BootstrapFit` keeps what is needed to build an interval at any confidence level
and to invert it into one-sided tail levels (the smallest one-sided α at which the interval
bound passes a given value), which the hypothesis verdicts use for p-values.

* percentile: quantiles of θ* (Efron & Tibshirani 1993, ch. 13).
* BCa: bias-corrected and accelerated (Efron 1987, JASA 82:171; Efron & Tibshirani 1993,
  eqs. 14.9–14.15). Bias ``z0 = Φ⁻¹(#{θ* < θ̂}/B + ½ #{θ* = θ̂}/B)`` (ties split, which
  matters for discrete accuracies); acceleration from jackknife influence values over
  items and, with several seeds, over seeds:
  ``a = (ΣU_i³/n³ + ΣV_s³/k³) / (6 (ΣU_i²/n² + ΣV_s²/k²)^{3/2})``.
* log-ratio: normal interval on the log scale, ``exp(log θ̂ ± z · sd(log θ*))``.
* studentized: bootstrap-t on the log scale (Efron & Tibshirani 1993, ch. 12.5), with the
  delta-method standard error recomputed in every resample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from robuststats.stats._common import ConfidenceInterval

__all__ = ["BootstrapFit"]


def _quantile(values: np.ndarray, probs: np.ndarray) -> np.ndarray:
    return np.quantile(values, np.clip(probs, 0.0, 1.0), method="linear")


def _cdf_mid(values: np.ndarray, x: float) -> float:
    """Mid-rank empirical CDF: P(θ* < x) + ½ P(θ* = x)."""
    b = values.size
    return float((np.count_nonzero(values < x) + 0.5 * np.count_nonzero(values == x)) / b)


@dataclass(frozen=True)
class BootstrapFit:
    """Bootstrap distribution plus what an interval method needs.

    ``log_scale`` means ``boot``/``estimate`` are on the log scale and bounds are
    exponentiated. ``t_boot`` and ``se_hat`` are used only by the studentized method.
    """

    estimate: float
    boot: np.ndarray
    method: str
    acceleration: float = 0.0
    log_scale: bool = False
    t_boot: np.ndarray | None = None
    se_hat: float = 0.0

    @property
    def standard_error(self) -> float:
        return float(np.std(self.boot, ddof=1)) if self.boot.size > 1 else 0.0

    def _z0(self) -> float:
        b = self.boot.size
        p = np.clip(_cdf_mid(self.boot, self.estimate), 0.5 / b, 1.0 - 0.5 / b)
        return float(special.ndtri(p))

    def _bounds(self, alphas: np.ndarray) -> np.ndarray:
        """Lower bounds at one-sided levels ``alphas`` (upper bounds: pass 1 − α)."""
        if self.method == "percentile":
            out = _quantile(self.boot, alphas)
        elif self.method == "bca":
            z0 = self._z0()
            za = special.ndtri(alphas)
            num = z0 + za
            denom = 1.0 - self.acceleration * num
            with np.errstate(divide="ignore", invalid="ignore"):
                adj = special.ndtr(z0 + num / denom)
            # at extreme levels (za = ±inf, or a(z0 + za) ≥ 1) the BCa map leaves its
            # monotone range; the bound is then the extreme resample on its own side
            off = ~np.isfinite(adj) | (denom <= 0.0)
            adj = np.where(off, np.where(alphas < 0.5, 0.0, 1.0), adj)
            out = _quantile(self.boot, adj)
        elif self.method == "log-ratio":
            out = self.estimate + special.ndtri(alphas) * self.standard_error
        elif self.method == "studentized":
            out = self.estimate - _quantile(self.t_boot, 1.0 - alphas) * self.se_hat
        else:  # pragma: no cover - validated by callers
            raise ValueError(self.method)
        return np.asarray(out, dtype=float)

    def interval(self, confidence_level: float) -> ConfidenceInterval:
        alpha = (1.0 - confidence_level) / 2.0
        lo, hi = self._bounds(np.array([alpha, 1.0 - alpha]))
        if self.log_scale:
            lo, hi = np.exp(lo), np.exp(hi)
        return ConfidenceInterval(float(lo), float(hi))

    def tails(self, value: float) -> tuple[float, float]:
        """``(α_low, α_high)``: the lower one-sided bound exceeds ``value`` iff α > α_low;
        the upper bound falls below ``value`` iff α > α_high."""
        if self.log_scale:
            if value <= 0.0:
                return 0.0, 1.0
            value = float(np.log(value))
        if self.method == "percentile":
            f = _cdf_mid(self.boot, value)
            return f, 1.0 - f
        if self.method == "bca":
            b = self.boot.size
            f = np.clip(_cdf_mid(self.boot, value), 0.5 / b, 1.0 - 0.5 / b)
            z0 = self._z0()
            w = float(special.ndtri(f)) - z0
            denom = 1.0 + self.acceleration * w
            # invert ndtr(z0 + (z0+z)/(1 − a(z0+z))) = f for z
            za = w / denom - z0 if denom > 0 else (np.inf if w > 0 else -np.inf)
            low = float(special.ndtr(za))
            return low, 1.0 - low
        if self.method == "log-ratio":
            se = self.standard_error
            if se == 0.0:
                return (0.0, 1.0) if value < self.estimate else (1.0, 0.0)
            low = float(special.ndtr((value - self.estimate) / se))
            return low, 1.0 - low
        if self.method == "studentized":
            if self.se_hat == 0.0:
                return (0.0, 1.0) if value < self.estimate else (1.0, 0.0)
            t_m = (self.estimate - value) / self.se_hat
            low = float(np.count_nonzero(self.t_boot >= t_m) / self.t_boot.size)
            return low, 1.0 - low
        raise ValueError(self.method)  # pragma: no cover


def acceleration(u_items: np.ndarray, u_seeds: np.ndarray) -> float:
    """BCa acceleration from item and seed jackknife influence values (see module doc)."""
    n = max(u_items.size, 1)
    k = max(u_seeds.size, 1)
    num = np.sum(u_items**3) / n**3 + np.sum(u_seeds**3) / k**3
    den = np.sum(u_items**2) / n**2 + np.sum(u_seeds**2) / k**2
    if not np.isfinite(num) or not np.isfinite(den) or den <= 0.0:
        return 0.0
    return float(num / (6.0 * den**1.5))
