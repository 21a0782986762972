"""The reference distribution of the crossed t when the seed mean square has few df.

The crossed variance of a grand mean (:func:`robuststats.stats.crossed_variance`) has a *seed
part* estimated from ``MS_seed`` on ``k − 1`` degrees of freedom and a *rest* (items and
residual) estimated on ``n − 1`` and ``(k − 1)(n − 1)``. In mean-square units (a variance
of the mean times ``kn``), with ``θ = E MS_seed ≥ E MS_resid = f``:

    true variance   θ − f + R,   R = E MS_item (with an item term), else f
    estimate        V̂ = max(MS_seed, f̂) − f̂ + R̂,   MS_seed ~ θ·χ²_{k−1}/(k − 1)

(``f̂ = MS_resid``; ``R̂ = MS_item`` when it exceeds ``MS_resid``, else ``MS_resid``, and
then ``V̂ = max(MS_seed, f̂)``: the t on the k per-seed means, exact under normal seed
effects where ``MS_seed ≥ f̂``, conservative below). ``MS_seed`` is taken at no less than
``f̂`` because ``θ ≥ f``: seeds whose sums tie give ``MS_seed = 0`` by chance (an atom that
discrete outcomes put where normal theory has none), and ``V̂`` must not then fall below the
residual's share of the variance. The
plug-in test refers ``t = (L̄ − μ₀)/√(V̂/kn)`` to Student's t on Satterthwaite's (1946)
``ν̂ = (max(MS_seed, f̂) − f̂ + R̂)²/(max(MS_seed, f̂)²/(k − 1) + MS_item²/(n − 1) +
MS_resid²/((k − 1)(n − 1)))``, bounded below by ``k − 1``. With 2 or 3 seeds and an item
term that is liberal: ``MS_seed`` on 1–2 df is often small by chance, and then V̂ is too
small while ν̂ is large. With an item × condition component (normal theory, n = 1,000)
the plug-in rejected 7–12 % at a nominal 5 % with 2 seeds.

Calibration. Given ``f`` and ``R`` (estimated on hundreds of df and taken as known), the
plug-in test's rejection rate at nominal level ``a`` depends only on the unknown excess
``e = θ − f ≥ 0`` (the true variance is ``e + R``):

    S(a; e) = E_W[ 2Φ(−t_{ν̂(W), 1−a/2} · √(V̂(W)/(e + R))) ],   MS_seed = (f + e)·W,

an integral over ``W ~ χ²_{k−1}/(k − 1)`` (Gauss–Legendre on the quantile scale, 64 nodes). The
calibrated test runs the plug-in at the nominal level ``a*`` that solves
``sup_e S(a*; e) = α`` (the supremum over 0 and 33 log-spaced values of ``e/R`` from 10⁻⁴ to 10⁴), and its p-value
is ``sup_e S(p̂; e)`` for the plug-in p-value ``p̂`` (Loh 1987, "Calibrating confidence
coefficients", JASA 82:155–162, with the supremum over the nuisance parameter in place of
its estimate, as in Berger & Boos 1994, JASA 89:1012–1016, with the whole parameter space
as the confidence set). As ``e → ∞`` the statistic is exactly Student's t on ``k − 1`` df and
``S(a; e) → a``: the calibrated test is exact where the seed part dominates and is never
more liberal than the plug-in. Without an item term nothing is calibrated (the floored t on
the k per-seed means has ``S(a; e) ≤ a``, with equality as ``e → ∞``). One-sided tests use
the symmetry of the statistic: a one-sided p-value ``p`` has calibrated value
``sup_e S(2p; e)/2``.

What it costs. With few seeds the supremum is reached where the seed part and the rest
are of similar size, so the critical value grows: with 2 seeds it is close to the t on 1 df
whenever the rest is not negligible. Two seeds cannot tell a seed × condition variance of
0 from a large one; the calibrated test says so by its width instead of by a false claim.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy.optimize import brentq

__all__ = ["SeedReference", "t_quantile_table"]

# quadrature nodes over W (χ² quantile scale) and grid points of the excess e/R
_W_NODES = 64
_E_GRID = np.concatenate([[0.0], np.logspace(-4.0, 4.0, 33)])
_Q_NODES = 128
_DOF_MAX = 1e7


@functools.lru_cache(maxsize=16)
def _w_nodes(df: float) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.legendre.leggauss(_W_NODES)
    u = (x + 1.0) / 2.0
    return special.chdtri(df, u) / df, w / 2.0  # chdtri: the upper-tail quantile


@dataclass(frozen=True)
class SeedReference:
    """The crossed t's variance estimate, its df and its calibrated reference distribution.

    All mean squares in the same units; ``scale`` converts to the variance of the mean
    (``k·n`` for :func:`~robuststats.stats.crossed_variance`).

    Attributes
    ----------
    seed_ms : float
        Observed seed-level mean square (0 with one seed).
    seed_df : float
        Its degrees of freedom, ``k − 1`` (0: no seed term, no calibration).
    floor : float
        The value ``E MS_seed`` cannot fall below (``MS_resid``).
    rest : float
        The rest of the variance estimate, ``V̂ = seed_ms − floor + rest`` (``rest ≥ floor``).
    rest_var : float
        ``Σ (c_j·MS_j)²/ν_j`` over the mean squares of ``rest`` (Satterthwaite).
    scale : float
    """

    seed_ms: float
    seed_df: float
    floor: float
    rest: float
    rest_var: float
    scale: float

    # --- the plug-in ------------------------------------------------------------------

    def _plug(self, seed_ms: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        return _plug(np.asarray(seed_ms, dtype=float), self.seed_df, self.floor, self.rest,
                     self.rest_var)

    @property
    def variance(self) -> float:
        """Estimated variance of the mean."""
        return float(self._plug(self.seed_ms)[0]) / self.scale

    @property
    def dof(self) -> float:
        """Satterthwaite's ν of the plug-in (``inf`` past 10⁷)."""
        nu = float(self._plug(self.seed_ms)[1])
        return math.inf if nu >= _DOF_MAX else nu

    @property
    def calibrated(self) -> bool:
        """Whether the level is calibrated (several seeds and a rest to mix with)."""
        return self.seed_df > 0 and self.rest_var > 0

    # --- calibration ------------------------------------------------------------------

    def _size(self, nominal: float) -> float:
        """``sup_e S(nominal; e)``: the plug-in's largest two-sided rejection rate."""
        if not self.calibrated or nominal >= 1.0:
            return min(nominal, 1.0)
        return _size(self.seed_df, self.floor, self.rest, self.rest_var, float(nominal))

    def pvalue(self, t: float) -> float:
        """Calibrated two-sided p-value of the statistic ``t``."""
        raw = 2.0 * float(special.stdtr(self.dof, -abs(t)))
        return min(1.0, self._size(raw))

    def tail(self, t: float) -> float:
        """Calibrated one-sided p-value ``P(T ≥ t)`` (upper tail)."""
        raw = float(special.stdtr(self.dof, -t))
        if raw > 0.5:
            return 1.0 - self.tail(-t)
        return min(0.5, self._size(2.0 * raw) / 2.0)

    def nominal(self, alpha: float) -> float:
        """The plug-in's two-sided nominal level whose calibrated size is ``alpha``."""
        if not self.calibrated or self._size(alpha) <= alpha:
            return alpha
        return _nominal(self.seed_df, self.floor, self.rest, self.rest_var, float(alpha))

    def nominal_per_side(self, alpha: float, sides: int) -> float:
        """The plug-in's level per tail for a test at ``alpha`` with ``sides`` tails (a
        one-sided test at α is half of the two-sided test at 2α, by symmetry)."""
        return self.nominal(alpha * 2.0 / sides) * sides / 2.0

    def critical(self, level: float) -> float:
        """Multiplier ``q`` of the two-sided interval ``estimate ± q·se`` at ``level``."""
        a = self.nominal(1.0 - level)
        return float(special.stdtrit(self.dof, 1.0 - a / 2.0))

    def critical_one_sided(self, level: float) -> float:
        """Multiplier of the one-sided bound at ``level``."""
        return self.critical(2.0 * level - 1.0) if level > 0.5 else 0.0


def _plug(seed_ms: np.ndarray, df: float, floor: float, rest: float, rest_var: float
          ) -> tuple[np.ndarray, np.ndarray]:
    """Variance estimate ``max(seed_ms, floor) − floor + rest`` and the plug-in ν (see the
    module doc): the seed mean square is taken at no less than its floor, in both."""
    seed = np.maximum(seed_ms, floor)
    total = seed - floor + rest
    if df <= 0:  # one seed: the rest alone
        dof = np.full_like(total, rest**2 / rest_var if rest_var > 0 else _DOF_MAX)
        return total, np.clip(dof, 1.0, _DOF_MAX)
    if rest_var <= 0:  # no item term: the t on the k seed means, the floor aside
        return total, np.full_like(total, df)
    dof = total**2 / (seed**2 / df + rest_var)
    return total, np.clip(dof, df, _DOF_MAX)


def t_quantile_table(low: float, p: float, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Student's t quantiles ``stdtrit(ν, p)`` at ``nodes`` values of 1/ν in [0, 1/low].

    Returns ``(grid, table)``: the grid of 1/ν and the quantiles there, for interpolation
    in 1/ν over many ``ν ≥ low`` at once (``stdtrit`` costs about 1.4 µs a value). The
    quantile is smooth in 1/ν and bends most near 1/low (ν near its bound), so the nodes
    are ``(1/low)·sin(θ)`` for θ evenly spaced in [0, π/2], denser there; at 1/ν = 0 the
    table holds the normal quantile. :func:`_quantiles` interpolates its logarithm; the
    seed-random power (:mod:`robuststats.stats.power._seeds_formulas`) interpolates it
    linearly on a finer grid.
    """
    grid = (1.0 / low) * np.sin(np.linspace(0.0, np.pi / 2.0, nodes))
    with np.errstate(divide="ignore"):
        table = special.stdtrit(1.0 / grid, p)
    table[0] = special.ndtri(p)
    return grid, table


def _quantiles(dof: np.ndarray, low: float, p: float) -> np.ndarray:
    """``stdtrit(dof, p)`` for many ``dof ≥ low`` at once: log-quantiles interpolated in
    1/ν from :data:`_Q_NODES` exact values (:func:`t_quantile_table`): within 3e-5 relative
    of ``stdtrit`` at p = 0.975 and 7e-4 at p = 1 − 10⁻⁷ with ν ≥ 1
    (tests/stats/test_few_seeds.py); the calibration needs thousands."""
    grid, table = t_quantile_table(low, p, _Q_NODES)
    return np.exp(np.interp(1.0 / dof, grid, np.log(table)))


@functools.lru_cache(maxsize=4096)
def _size(df: float, floor: float, rest: float, rest_var: float, nominal: float) -> float:
    w, wts = _w_nodes(df)
    excess = rest * _E_GRID[:, None]  # (E, 1)
    total, dof = _plug((floor + excess) * w[None, :], df, floor, rest, rest_var)
    crit = _quantiles(dof, df, 1.0 - nominal / 2.0)
    reject = 2.0 * special.ndtr(-crit * np.sqrt(np.maximum(total, 0.0) / (excess + rest)))
    return float(np.max(reject @ wts))


@functools.lru_cache(maxsize=1024)
def _nominal(df: float, floor: float, rest: float, rest_var: float, alpha: float) -> float:
    def gap(log_a: float) -> float:
        return _size(df, floor, rest, rest_var, math.exp(log_a)) - alpha

    low = math.log(alpha) - 1.0
    while gap(low) > 0.0 and low > -700.0:
        low -= 4.0
    return math.exp(brentq(gap, low, math.log(alpha), xtol=1e-7))
