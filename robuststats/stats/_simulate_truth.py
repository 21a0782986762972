"""The simulator's exact variance components: the inputs a plan should get.

For the accuracy difference ``D_si = x_si − y_si`` of conditions A and B at one noise level
of :mod:`robuststats.stats._simulate` (one evaluation per item), the crossed model of the
seed-random t (docs/statistics.md §9) is the Hoeffding decomposition over seeds and items,

    D_si = δ + a_s + b_i + e_si,   a_s = E[D_si | s] − δ,   b_i = E[D_si | i] − δ,

with σ_seed² = Var a_s, σ_item² = Var b_i and σ_resid² = π_D − δ² − σ_seed² − σ_item²
(the three parts are uncorrelated, so the two-way ANOVA's expected mean squares hold for
the simulator's non-additive, 0/1 outcomes). Each is an expectation over the model's random
terms, computed here by quadrature: the densities of the terms are tabulated on one grid
and convolved by FFT (normal terms, and the heavy-tailed seed effects of ``seed_dist``),
the logistic-normal expectation over a cell's own terms by Gauss–Hermite. With
``μ_c`` the mean logit, ``E_c(t) = E[expit(μ_c + t + N(0, cell²))]`` and the shared
terms ``β`` (item) and ``u`` (seed skill), the per-condition seed terms ``z_c = v_cs − ℓρ_cs``
and item terms ``j_c = β_ci − ℓκ_ci``:

* the per-seed mean of condition c is ``h_c(u + z_c) = E_{β, j}[E_c(u + z_c + β + j_c)]``
  and ``σ_seed² = E[(h_A(u + z_A) − h_B(u + z_B))²] − δ²``, the two conditions sharing u;
* the per-item mean is ``k_c(β + j_c) = E_{u, z}[E_c(β + j_c + u + z_c)]`` and
  ``σ_item² = E[(k_A(β + j_A) − k_B(β + j_B))²] − δ²``, the two sharing β;
* ``π_D = p_A + p_B − 2E[g_A(β + u)·g_B(β + u)]`` with ``g_c(y) = E[E_c(y + z_c + j_c)]``.

A pilot estimates the same quantities with sampling error: the 400-seed × 3,000-item pilot
of ``benchmarks/sequential_calibration.py`` put σ_seed at 0.0353 and π_D at 0.3737 where
they are 0.0378 and 0.3691, and a plan 1.5–3 pp above the simulated power
(docs/statistics.md §11, "Calibration").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import signal

from robuststats._validation import check_number
from robuststats.errors import InputError
from robuststats.stats._simulate import (
    _density,
    _expit_normal,
    _grid,
    _levels,
    _sum_density,
    seed_model,
)

__all__ = ["SimulatorComponents", "true_components"]


@dataclass(frozen=True)
class SimulatorComponents:
    """The simulator's exact δ, π_D and variance components of ``x − y`` at one noise level.

    Attributes
    ----------
    eval_noise : float
        The noise level (0 is clean).
    effect : float
        δ = acc(A) − acc(B), as :func:`true_effects` gives it.
    discordance : float
        π_D, the probability that A and B differ on an item (same seed).
    var_seed, var_item, var_resid : float
        σ_seed², σ_item², σ_resid² of the module docstring.
    seed_sd, icc : float
        ``√σ_seed²`` and ``σ_item²/(σ_item² + σ_resid²)``: with ``discordance`` and
        ``effect``, the inputs of :func:`robuststats.stats.power_seeds` (whose split of
        ``π_D − δ²`` gives back the three components).
    """

    eval_noise: float
    effect: float
    discordance: float
    var_seed: float
    var_item: float
    var_resid: float

    @property
    def seed_sd(self) -> float:
        return float(np.sqrt(self.var_seed))

    @property
    def icc(self) -> float:
        return self.var_item / (self.var_item + self.var_resid)

    def plan_inputs(self) -> dict[str, float]:
        """``effect``, ``discordance``, ``seed_sd`` and ``icc``: keywords of power_seeds."""
        return {"effect": self.effect, "discordance": self.discordance,
                "seed_sd": self.seed_sd, "icc": self.icc}


def _smooth(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``t ↦ E[values(t + T)]`` for a symmetric term T with ``weights`` on the same grid."""
    return signal.fftconvolve(values, weights, mode="same")


def true_components(seed_effects: str = "moderate", *, eval_noise_level: float | None = None,
                    **parameters: object) -> SimulatorComponents:
    """The simulator's exact δ, π_D and σ_seed², σ_item², σ_resid² (see the module docstring).

    ``parameters`` are the model keywords of :func:`robuststats.stats.simulate_outcomes`
    (``seed_dist`` included); ``eval_noise_level`` is one of its noise levels (default the
    largest). One evaluation per item (``n_noise_seeds = 1``).
    """
    model = seed_model(seed_effects, **parameters)  # type: ignore[arg-type]
    levels = tuple(model.eval_noise)
    level = levels[-1] if eval_noise_level is None else check_number(
        eval_noise_level, "eval_noise_level", low=0.0)
    if level not in levels:
        raise InputError(f"`eval_noise_level` must be one of the model's levels {levels}, "
                         f"got {level!r}.")
    j = levels.index(level)
    s = float(_levels(model)[j])
    dist = model.seed_dist
    x = _grid()
    cell = np.sqrt(model.seed_item_sd**2 + (model.noise_item_sd**2 if j > 0 else 0.0))
    mu = (model.intercept + model.accuracy_effect
          - s * (model.noise_drop - model.robustness_effect),
          model.intercept - s * model.noise_drop)
    f_u = _density(dist, model.seed_skill_sd, x)
    f_z = _sum_density([(dist, model.seed_condition_sd), (dist, s * model.seed_robustness_sd)],
                       x)
    f_beta = _density("normal", model.item_sd, x)
    f_j = _sum_density([("normal", model.item_condition_sd),
                        ("normal", s * model.item_robustness_sd)], x)
    f_zj = _sum_density([(dist, model.seed_condition_sd), (dist, s * model.seed_robustness_sd),
                         ("normal", model.item_condition_sd),
                         ("normal", s * model.item_robustness_sd)], x)
    f_bj = _smooth(f_beta, f_j)
    f_uz = _smooth(f_u, f_z)
    f_bu = _smooth(f_beta, f_u)
    e = [_expit_normal(m + x, cell) for m in mu]  # E_c on the grid
    # accuracies: E_c averaged over every term
    g = [_smooth(ec, f_zj) for ec in e]  # g_c(y), y = β + u
    p = [float(f_bu @ gc) for gc in g]
    delta = p[0] - p[1]
    pi_d = p[0] + p[1] - 2.0 * float(f_bu @ (g[0] * g[1]))
    # seeds: h_c(t) = E_{β, j}[E_c(t + β + j_c)], then over z_c given u, then over u
    h = [_smooth(ec, f_bj) for ec in e]
    first = [_smooth(hc, f_z) for hc in h]
    second = [_smooth(hc**2, f_z) for hc in h]
    var_seed = float(f_u @ (second[0] - 2.0 * first[0] * first[1] + second[1])) - delta**2
    # items: k_c(t) = E_{u, z}[E_c(t + u + z_c)], then over j_c given β, then over β
    k = [_smooth(ec, f_uz) for ec in e]
    first = [_smooth(kc, f_j) for kc in k]
    second = [_smooth(kc**2, f_j) for kc in k]
    var_item = float(f_beta @ (second[0] - 2.0 * first[0] * first[1] + second[1])) - delta**2
    var_seed, var_item = max(var_seed, 0.0), max(var_item, 0.0)
    return SimulatorComponents(
        eval_noise=float(level), effect=delta, discordance=pi_d, var_seed=var_seed,
        var_item=var_item, var_resid=pi_d - delta**2 - var_seed - var_item)
