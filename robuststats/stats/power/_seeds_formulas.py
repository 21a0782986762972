"""The seed-random t test's power for k training seeds × n items: the formulas.

The analysis of several training seeds runs :func:`robuststats.stats.seed_random_test`:
per-item differences ``D_si = x_si − y_si`` (seed s, item i) follow the crossed
random-effects model ``D_si = δ + a_s + b_i + e_si`` with variance components σ_seed²
(seeds shifting a and b differently), σ_item² (items on which a's advantage differs) and
σ_resid² (seed × item interaction and the 0/1 outcome itself), so that

    Var(d̄) = σ_seed²/k + σ_item²/n + σ_resid²/(kn).

The test estimates it from the two-way ANOVA mean squares, with expectations

    E MS_seed = n·σ_seed² + σ_resid²   (k − 1 df)
    E MS_item = k·σ_item² + σ_resid²   (n − 1 df)
    E MS_resid = σ_resid²              ((k − 1)(n − 1) df)

as ``V = [max(MS_seed, MS_resid) + max(MS_item − MS_resid, 0)]/(kn)`` on Satterthwaite's (1946) degrees of
freedom, bounded below by k − 1, and refers ``d̄/√V`` to Student's t at the nominal level
calibrated for few seeds (:mod:`robuststats.stats._few_seeds`; :func:`calibrated_alpha`
computes that level at the expected item and residual mean squares).

Two power computations of that test:

- ``"seed-random"`` (default): the power of the test exactly as it runs, under normal
  theory. ``d̄ ~ N(δ, Var(d̄))`` is independent of the mean squares, which are scaled χ²
  variables; the rejection probability given the mean squares,
  ``Φ((δ − t_ν·√V)/√Var) + Φ((−δ − t_ν·√V)/√Var)`` with the test's own ν and truncation,
  is averaged over their joint distribution by Gauss–Legendre quadrature on the χ²
  quantile scale (a product rule over the three mean squares).
- ``"noncentral-t"``: the closed-form approximation: Satterthwaite's ν at the expected
  mean squares (bounded below by k − 1, as the test does) and the noncentral t with
  noncentrality ``δ/√Var(d̄)``.

The noncentral t distribution is computed as an average over its χ denominator,
``P(T > t) = E[Φ(λ − t·√(χ²_ν/ν))]``, by the same quadrature: :func:`scipy.special.nctdtr`
returns NaN for noncentralities past about 12 with negative arguments, which a power
function meets all the time. Only :mod:`scipy.special` is imported, never
:mod:`scipy.stats`.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SEED_POWER_METHODS",
    "calibrated_alpha",
    "expected_dof",
    "noncentral_t_power",
    "seed_random_power",
]

#: power methods of the seed-random t test (see the module docstring)
SEED_POWER_METHODS = ("seed-random", "noncentral-t")

# Quadrature nodes per mean square (seed, item, residual) and for the χ of the noncentral
# t. The seed mean square (k − 1 df, few) carries the variability that matters; the item
# and residual ones have ≥ n − 1 df and enter through the kink max(MS_item − MS_resid, 0).
# Doubling every count moves the power by < 1e-4 (tests/stats/test_power_seeds.py).
_NODES = (48, 16, 8)
_NCT_NODES = 96
# Past this many df a scaled χ² is within √(2/df) < 0.0015 of its mean: one node suffices.
_DF_POINT = 1e6
_CRIT_NODES = 512


@functools.lru_cache(maxsize=8)
def _legendre(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on (0, 1) (cached: leggauss solves an eigenproblem)."""
    import numpy as np

    x, w = np.polynomial.legendre.leggauss(m)
    return (x + 1.0) / 2.0, w / 2.0


def _scaled_chi2(df: float, mean: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of ``mean · χ²_df / df`` (quantile-scale Gauss–Legendre)."""
    import numpy as np
    from scipy import special

    if df > _DF_POINT or mean == 0.0:
        return np.array([mean]), np.array([1.0])
    u, w = _legendre(m)
    return special.chdtri(df, u) / df * mean, w  # chdtri: the upper-tail quantile


def _critical(dof: np.ndarray | float, alpha: float, sides: int) -> np.ndarray:
    from scipy import special

    return special.stdtrit(dof, 1.0 - alpha / sides)


def _critical_many(dof: np.ndarray, low: float, alpha: float, sides: int) -> np.ndarray:
    """:func:`_critical` for many ``dof ≥ low`` at once, interpolated in 1/ν.

    ``stdtrit`` costs about 1.4 µs a value; the quantile is smooth in 1/ν on
    [0, 1/low], so a table of :data:`_CRIT_NODES` values interpolated linearly is within
    a relative 1e-5 of it (tests/stats/test_power_seeds.py). The few-seed calibration
    interpolates the logarithm of the same kind of table on fewer nodes
    (:func:`robuststats.stats._few_seeds._quantiles`).
    """
    import numpy as np

    grid, table = _critical_table(float(low), float(alpha), int(sides))
    return np.interp(1.0 / dof, grid, table)


@functools.lru_cache(maxsize=64)
def _critical_table(low: float, alpha: float, sides: int) -> tuple[np.ndarray, np.ndarray]:
    """The few-seed reference's table of t quantiles (:func:`t_quantile_table`) at the
    upper ``alpha/sides`` point, on :data:`_CRIT_NODES` nodes (cached per design)."""
    from robuststats.stats._few_seeds import t_quantile_table

    return t_quantile_table(low, 1.0 - alpha / sides, _CRIT_NODES)


def noncentral_t_power(ncp: float, dof: float, alpha: float, sides: int) -> float:
    """Power of a t test whose statistic is noncentral t (``dof``, ``ncp``).

    ``P(T > t_c) + [two-sided] P(T < −t_c)`` with ``t_c = t_{1−α/sides}(dof)``: the power
    of R ``pwr::pwr.t.test`` (``dof = n − 1``, ``ncp = d·√n`` for one sample).
    """
    import numpy as np
    from scipy import special

    crit = float(_critical(dof, alpha, sides))
    s, w = _scaled_chi2(dof, 1.0, _NCT_NODES)
    root = np.sqrt(s)
    p = special.ndtr(ncp - crit * root)
    if sides == 2:
        p = p + special.ndtr(-ncp - crit * root)
    return float(np.sum(w * p))


def _expected_ms(k: int, n: int, var_seed: float, var_item: float,
                 var_resid: float) -> tuple[float, float, float]:
    return n * var_seed + var_resid, k * var_item + var_resid, var_resid


def expected_dof(k: int, n: int, var_seed: float, var_item: float, var_resid: float) -> float:
    """Satterthwaite's ν at the expected mean squares, as the test forms it (≥ k − 1)."""
    ms_s, ms_i, ms_e = _expected_ms(k, n, var_seed, var_item, var_resid)
    df_s, df_i, df_e = k - 1.0, n - 1.0, (k - 1.0) * (n - 1.0)
    if ms_i > ms_e:
        total = ms_s + ms_i - ms_e
        denom = ms_s**2 / df_s + ms_i**2 / df_i + ms_e**2 / df_e
    else:
        total, denom = ms_s, ms_s**2 / df_s
    dof = total**2 / denom if denom > 0 else math.inf
    return max(dof, df_s)


def calibrated_alpha(k: float, n: int, var_seed: float, var_item: float, var_resid: float,
                     alpha: float, sides: int, *, seed_df: float | None = None,
                     resid_df: float | None = None) -> float:
    """The plug-in's nominal level (per ``sides``) that the calibrated test runs at.

    The calibration of :mod:`robuststats.stats._few_seeds` at the expected item and residual
    mean squares (they rest on hundreds of df): the test as shipped rejects where the
    plug-in t at this level does. ``seed_df`` and ``resid_df`` default to the crossed
    design's ``k − 1`` and ``(k − 1)(n − 1)``; the gate's planner passes its own (an
    effective ``k`` and Welch–Satterthwaite df).
    """
    from robuststats.stats._few_seeds import SeedReference

    _, ms_i, ms_e = _expected_ms(k, n, var_seed, var_item, var_resid)
    df_s = k - 1.0 if seed_df is None else seed_df
    df_i, df_e = n - 1.0, ((k - 1.0) * (n - 1.0) if resid_df is None else resid_df)
    if ms_i > ms_e:
        rest, rest_var = ms_i, ms_i**2 / df_i + ms_e**2 / df_e
    else:
        rest, rest_var = ms_e, 0.0
    ref = SeedReference(0.0, df_s, ms_e, rest, rest_var, float(k * n))
    return ref.nominal_per_side(alpha, sides)


def seed_random_power(
    k: int, n: int, effect: float, var_seed: float, var_item: float, var_resid: float,
    alpha: float, sides: int, method: str = "seed-random",
) -> float:
    """Power of the seed-random t test with ``k ≥ 2`` seeds and ``n ≥ 2`` items.

    ``var_*`` are the variance components of the per-item difference; ``effect`` is |δ|.
    See the module docstring for the two methods.
    """
    import numpy as np
    from scipy import special

    var = var_seed / k + var_item / n + var_resid / (k * n)
    if not var > 0.0:
        return 1.0
    sd = math.sqrt(var)
    alpha = calibrated_alpha(k, n, var_seed, var_item, var_resid, alpha, sides)
    if method == "noncentral-t":
        return noncentral_t_power(effect / sd, expected_dof(k, n, var_seed, var_item,
                                                            var_resid), alpha, sides)
    df_s, df_i, df_e = k - 1.0, n - 1.0, (k - 1.0) * (n - 1.0)
    ms_s, ms_i, ms_e = _expected_ms(k, n, var_seed, var_item, var_resid)
    s, ws = _scaled_chi2(df_s, ms_s, _NODES[0])
    i, wi = _scaled_chi2(df_i, ms_i, _NODES[1])
    e, we = _scaled_chi2(df_e, ms_e, _NODES[2])
    s_, i_, e_ = s[:, None, None], i[None, :, None], e[None, None, :]
    weight = ws[:, None, None] * wi[None, :, None] * we[None, None, :]
    keep = i_ > e_  # the test keeps the item term only when MS_item > MS_resid
    # V and ν as the test forms them: MS_seed taken at no less than MS_resid
    s_floor = np.maximum(s_, e_)
    total = s_floor + np.where(keep, i_ - e_, 0.0)
    num = total
    denom = s_floor**2 / df_s + np.where(keep, i_**2 / df_i + e_**2 / df_e, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = np.where(denom > 0, num**2 / denom, np.inf)
    dof = np.maximum(dof, df_s)
    half = _critical_many(dof, df_s, alpha, sides) * np.sqrt(total / (k * n))
    p = special.ndtr((effect - half) / sd)
    if sides == 2:
        p = p + special.ndtr((-effect - half) / sd)
    return float(min(1.0, np.sum(weight * p)))
