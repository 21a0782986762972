"""A simulator of the design users run: k training seeds × n items × conditions A and B.

Outcomes follow a crossed logistic model. For condition c, training seed s, item i,
inference-noise level ℓ (``ℓ = 0`` clean) and noise seed r::

    logit P(correct) = μ + γ_c + β_i + β_ci + u_s + v_cs + w_csi
                       − (ℓ/ℓ_ref)·(λ + λ_c + ρ_cs + κ_ci) + [ℓ > 0]·ε_csℓri

with

* ``β_i ~ N(0, item_sd²)``: item difficulty, shared by every model;
* ``β_ci ~ N(0, item_condition_sd²)``: the item × condition interaction, shared by every
  seed of condition c: items that one procedure gets right more often than the other
  (default 0);
* ``κ_ci ~ N(0, item_robustness_sd²)``: item-specific noise sensitivity of condition c
  (default 0);
* ``u_s ~ N(0, seed_skill_sd²)``: seed skill, shared by both conditions trained with seed s
  (same initialisation and data order);
* ``v_cs ~ N(0, seed_condition_sd²)``: the seed × condition interaction. It shifts A and B
  differently in every seed while the procedures are equal on average; a test that holds
  the trained models fixed mistakes it for a difference of procedures;
* ``ρ_cs ~ N(0, seed_robustness_sd²)``: seed-specific robustness (how much the model of
  seed s loses under noise);
* with ``seed_dist="t3"`` or ``"laplace"`` the three seed effects ``u_s``, ``v_cs`` and
  ``ρ_cs`` are drawn from Student's t on 3 df or the Laplace distribution instead, scaled
  to the same SD (``t_3·sd/√3``, ``Laplace(0, sd/√2)``; excess kurtosis ∞ and 3):
  heavy-tailed seeds, an occasional training run far from the others, at the same SDs;
* ``w_csi ~ N(0, seed_item_sd²)``: the seed × item interaction of one trained model,
  shared by its clean and noisy evaluations;
* ``ε ~ N(0, noise_item_sd²)``: one noisy re-evaluation of an item;
* ``γ_A = accuracy_effect``, ``γ_B = 0``; ``λ_A = −robustness_effect`` (a positive value
  makes A lose less under noise), ``λ_B = 0``; ``λ = noise_drop`` at ``ℓ = ℓ_ref``
  (``ℓ_ref`` is the largest noise level).

Presets of the seed components (``seed_effects``) are named by the standard deviation over
training seeds of one condition's per-seed retention at ``ℓ_ref`` (with the other defaults
and infinitely many items): ``"none"`` ≈ 0, ``"small"`` ≈ 0.02, ``"moderate"`` ≈ 0.04,
``"large"`` ≈ 0.075 (:func:`seed_retention_sd` computes it). Every component can be set
explicitly; an explicit value overrides the preset.

The procedure-level truths (:func:`true_effects`) are expectations over the populations of
seeds and items. With normal seed effects every random term is normal on the logit scale,
so each expected accuracy is ``E[expit(N(m, τ²))]``, computed by 96-point Gauss–Hermite
quadrature (error far below 1e-10 here); with heavy-tailed ones the same quadrature is
averaged over the density of the sum of the seed terms, computed on a grid
(:func:`_seed_sum_density`). Retention of a procedure is the ratio of its expected noisy and
clean accuracies, the quantity ``mean(noisy)/mean(clean)`` over a (k, n) table estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import pandas as pd
from scipy import special

from robuststats._validation import check_choice, check_int, check_number, check_rng
from robuststats.errors import InputError

__all__ = [
    "SEED_DISTRIBUTIONS",
    "SEED_EFFECT_PRESETS",
    "SeedModel",
    "seed_model",
    "seed_retention_sd",
    "simulate_matrices",
    "simulate_outcomes",
    "true_effects",
]


@dataclass(frozen=True)
class SeedModel:
    """Parameters of the crossed logistic model (logit scale; see the module docstring)."""

    intercept: float = 0.5
    item_sd: float = 1.5
    accuracy_effect: float = 0.0
    robustness_effect: float = 0.0
    noise_drop: float = 1.0
    eval_noise: tuple[float, ...] = (0.0, 0.05)
    seed_skill_sd: float = 0.0
    seed_condition_sd: float = 0.0
    seed_robustness_sd: float = 0.0
    seed_item_sd: float = 0.0
    noise_item_sd: float = 0.5
    item_condition_sd: float = 0.0
    item_robustness_sd: float = 0.0
    seed_dist: str = "normal"


#: distributions of the seed effects u, v, ρ (each scaled to its SD)
SEED_DISTRIBUTIONS = ("normal", "t3", "laplace")

#: seed components of each preset; per-seed retention SD ≈ 0, 0.02, 0.04, 0.075 at the
#: defaults (tests/stats/test_seed_random.py checks this with :func:`seed_retention_sd`)
SEED_EFFECT_PRESETS: dict[str, dict[str, float]] = {
    "none": dict(seed_skill_sd=0.0, seed_condition_sd=0.0, seed_robustness_sd=0.0,
                 seed_item_sd=0.0),
    "small": dict(seed_skill_sd=0.1, seed_condition_sd=0.05, seed_robustness_sd=0.063,
                  seed_item_sd=0.3),
    "moderate": dict(seed_skill_sd=0.2, seed_condition_sd=0.1, seed_robustness_sd=0.129,
                     seed_item_sd=0.5),
    "large": dict(seed_skill_sd=0.3, seed_condition_sd=0.2, seed_robustness_sd=0.256,
                  seed_item_sd=0.7),
}

_SD_NAMES = ("item_sd", "seed_skill_sd", "seed_condition_sd", "seed_robustness_sd",
             "seed_item_sd", "noise_item_sd", "item_condition_sd", "item_robustness_sd")


def seed_model(seed_effects: str = "moderate", **overrides: float) -> SeedModel:
    """The :class:`SeedModel` of a preset, with any field overridden (``None`` = keep)."""
    check_choice(seed_effects, "seed_effects", tuple(SEED_EFFECT_PRESETS))
    names = {f.name for f in fields(SeedModel)}
    values: dict[str, object] = dict(SEED_EFFECT_PRESETS[seed_effects])
    for key, value in overrides.items():
        if key not in names:
            check_choice(key, "parameter", sorted(names))
        if value is None:
            continue
        if key == "seed_dist":
            values[key] = check_choice(value, "seed_dist", SEED_DISTRIBUTIONS)
        elif key == "eval_noise":
            levels = tuple(check_number(v, "eval_noise", low=0.0) for v in value)
            if len(levels) < 2 or levels[0] != 0.0 or len(set(levels)) != len(levels):
                raise InputError("`eval_noise` must start with 0 (clean) and list at least one "
                                 f"distinct noisy level, got {tuple(value)!r}.")
            values[key] = levels
        else:
            values[key] = check_number(value, key, low=0.0 if key in _SD_NAMES else None)
    return replace(SeedModel(), **values)


def _levels(model: SeedModel) -> np.ndarray:
    lv = np.asarray(model.eval_noise, dtype=float)
    return lv / lv.max()


def _seed_draw(dist: str, sd: float, size: int | tuple[int, ...],
               rng: np.random.Generator) -> np.ndarray:
    """Seed effects with mean 0 and SD ``sd`` from ``dist`` (one of :data:`SEED_DISTRIBUTIONS`);
    ``"normal"`` is the same call, so the default streams are unchanged."""
    if dist == "t3":  # Var t_3 = 3
        return rng.standard_t(3.0, size) * (sd / np.sqrt(3.0))
    if dist == "laplace":  # Var Laplace(0, b) = 2b²
        return rng.laplace(0.0, sd / np.sqrt(2.0), size)
    return rng.normal(0.0, sd, size)


def _draw_effects(model: SeedModel, k: int, n: int, rng: np.random.Generator
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Clean logits ``(2, k, n)`` and the drop at the largest level ``(2, k, n)``."""
    beta = rng.normal(0.0, model.item_sd, n)
    u = _seed_draw(model.seed_dist, model.seed_skill_sd, k, rng)
    v = _seed_draw(model.seed_dist, model.seed_condition_sd, (2, k), rng)
    rho = _seed_draw(model.seed_dist, model.seed_robustness_sd, (2, k), rng)
    w = rng.normal(0.0, model.seed_item_sd, (2, k, n))
    gamma = np.array([model.accuracy_effect, 0.0])
    lam = model.noise_drop - np.array([model.robustness_effect, 0.0])
    base = (model.intercept + gamma[:, None, None] + beta[None, None, :] + u[None, :, None]
            + v[:, :, None] + w)
    slope = np.broadcast_to((lam[:, None] + rho)[:, :, None], (2, k, n))
    # item × condition terms, drawn only when present (the default streams stay unchanged)
    if model.item_condition_sd > 0:
        base = base + rng.normal(0.0, model.item_condition_sd, (2, 1, n))
    if model.item_robustness_sd > 0:
        slope = slope + rng.normal(0.0, model.item_robustness_sd, (2, 1, n))
    return base, slope


def simulate_matrices(model: SeedModel, n_seeds: int, n_items: int, rng: np.random.Generator,
                      *, n_noise_seeds: int = 1) -> np.ndarray:
    """One simulated study as an array ``(2, n_levels, n_seeds, n_items)`` of outcomes.

    Axis 0 is the condition (A, B), axis 1 the noise level in ``model.eval_noise`` order;
    values are 0/1 with one noise seed, otherwise the mean over ``n_noise_seeds`` noisy
    re-evaluations (clean evaluations are deterministic: one evaluation repeated).
    """
    k, n = n_seeds, n_items
    scale = _levels(model)  # (L,)
    base, slope = _draw_effects(model, k, n, rng)
    drop = slope[:, None] * scale[None, :, None, None]  # (2, L, k, n)
    eta = base[:, None] - drop  # (2, L, k, n)
    out = np.empty_like(eta)
    out[:, 0] = rng.random(eta[:, 0].shape) < special.expit(eta[:, 0])
    m = n_noise_seeds
    shape = eta[:, 1:].shape  # (2, L − 1, k, n)
    noisy = eta[:, 1:, :, None] + rng.normal(0.0, model.noise_item_sd, (*shape[:3], m, n))
    draws = rng.random(noisy.shape) < special.expit(noisy)
    out[:, 1:] = draws.mean(axis=3)
    return out


def simulate_outcomes(
    n_seeds: int = 5,
    n_items: int = 300,
    *,
    seed_effects: str = "moderate",
    n_noise_seeds: int = 1,
    eval_noise: tuple[float, ...] | None = None,
    intercept: float | None = None,
    item_sd: float | None = None,
    accuracy_effect: float | None = None,
    robustness_effect: float | None = None,
    noise_drop: float | None = None,
    seed_skill_sd: float | None = None,
    seed_condition_sd: float | None = None,
    seed_robustness_sd: float | None = None,
    seed_item_sd: float | None = None,
    noise_item_sd: float | None = None,
    item_condition_sd: float | None = None,
    item_robustness_sd: float | None = None,
    seed_dist: str | None = None,
    rng: np.random.Generator | int | None = None,
) -> pd.DataFrame:
    """Simulate the outcomes table of a two-condition, k-seed robustness study.

    Parameters
    ----------
    n_seeds, n_items : int
        Training seeds per condition and items (the same items everywhere).
    seed_effects : {"none", "small", "moderate", "large"}
        Preset of the seed components (per-seed retention SD ≈ 0, 0.02, 0.04, 0.075).
    n_noise_seeds : int
        Noisy re-evaluations of every model at every noisy level (clean: one evaluation).
    eval_noise : tuple of float, default (0.0, 0.05)
        Noise levels; the first must be 0 (clean). The drop scales linearly with the level
        and is ``noise_drop`` at the largest one.
    intercept : float, default 0.5
        Mean clean logit of condition B (≈ 0.57 expected clean accuracy with the defaults).
    item_sd : float, default 1.5
        SD of item difficulty.
    accuracy_effect : float, default 0
        Logit shift of A over B (clean and noisy).
    robustness_effect : float, default 0
        How much less A loses under noise than B (logit, at the largest level).
    noise_drop : float, default 1.0
        Mean logit drop of B at the largest noise level.
    seed_skill_sd, seed_condition_sd, seed_robustness_sd, seed_item_sd : float
        Seed components; default from ``seed_effects`` (:data:`SEED_EFFECT_PRESETS`).
    noise_item_sd : float, default 0.5
        SD of one noisy re-evaluation of an item (logit).
    item_condition_sd, item_robustness_sd : float, default 0
        Item × condition components: items one procedure gets right more often, and
        items one procedure loses more of under noise.
    seed_dist : {"normal", "t3", "laplace"}, default "normal"
        Distribution of the seed effects (skill, seed × condition, robustness), each scaled
        to its SD: Student's t on 3 df and Laplace are heavy-tailed seeds.
    rng : numpy.random.Generator, int or None
        The only source of randomness.

    Returns
    -------
    pandas.DataFrame
        Columns ``condition`` ("A", "B"), ``seed``, ``eval_noise``, ``noise_seed``,
        ``item_id``, ``correct`` (0/1); clean rows have ``noise_seed`` 0.
    """
    k = check_int(n_seeds, "n_seeds", low=1)
    n = check_int(n_items, "n_items", low=1)
    m = check_int(n_noise_seeds, "n_noise_seeds", low=1)
    gen = check_rng(rng)
    model = seed_model(seed_effects, eval_noise=eval_noise, intercept=intercept,
                       item_sd=item_sd, accuracy_effect=accuracy_effect,
                       robustness_effect=robustness_effect, noise_drop=noise_drop,
                       seed_skill_sd=seed_skill_sd, seed_condition_sd=seed_condition_sd,
                       seed_robustness_sd=seed_robustness_sd, seed_item_sd=seed_item_sd,
                       noise_item_sd=noise_item_sd, item_condition_sd=item_condition_sd,
                       item_robustness_sd=item_robustness_sd, seed_dist=seed_dist)
    rows = _simulate_rows(model, k, n, m, gen)
    return rows


def _simulate_rows(model: SeedModel, k: int, n: int, m: int,
                   rng: np.random.Generator) -> pd.DataFrame:
    """Like :func:`simulate_matrices`, but every noisy evaluation kept as its own row."""
    scale = _levels(model)
    base, slope = _draw_effects(model, k, n, rng)
    width = len(str(n - 1))
    items = np.array([f"item{i:0{width}d}" for i in range(n)])
    frames = []
    for c, cond in enumerate(("A", "B")):
        for j, level in enumerate(model.eval_noise):
            reps = 1 if j == 0 else m
            eta = base[c] - slope[c] * scale[j]  # (k, n)
            for r in range(reps):
                e = eta if j == 0 else eta + rng.normal(0.0, model.noise_item_sd, (k, n))
                correct = (rng.random((k, n)) < special.expit(e)).astype(np.int64)
                frames.append(pd.DataFrame({
                    "condition": cond,
                    "seed": np.repeat(np.arange(k), n),
                    "eval_noise": float(level),
                    "noise_seed": r,
                    "item_id": np.tile(items, k),
                    "correct": correct.ravel(),
                }))
    return pd.concat(frames, ignore_index=True)


# --- procedure-level truths -------------------------------------------------------------

_GH_X, _GH_W = np.polynomial.hermite.hermgauss(96)


def _expit_normal(mean: np.ndarray | float, sd: float) -> np.ndarray:
    """``E[expit(N(mean, sd²))]`` by Gauss–Hermite quadrature (vectorised over mean)."""
    mean = np.asarray(mean, dtype=float)
    x = mean[..., None] + np.sqrt(2.0) * sd * _GH_X
    return special.expit(x) @ _GH_W / np.sqrt(np.pi)


#: the grid of every density: ``STEP`` over ``±HALF_WIDTH`` logit units
STEP = 0.005
HALF_WIDTH = 25.0


def _grid() -> np.ndarray:
    m = round(HALF_WIDTH / STEP)
    return np.arange(-m, m + 1) * STEP


def _density(dist: str, sd: float, x: np.ndarray) -> np.ndarray:
    """Probability weights on ``x`` of one mean-0 term with SD ``sd`` (a point mass at 0
    when ``sd`` is 0)."""
    if sd <= 0.0:
        f = np.zeros_like(x)
        f[x.size // 2] = 1.0
        return f
    if dist == "normal":
        f = np.exp(-0.5 * (x / sd) ** 2)
    elif dist == "t3":  # t_3 scaled to SD sd: the density ∝ (1 + z²/3)⁻², z = x√3/sd
        f = (1.0 + (x * np.sqrt(3.0) / sd) ** 2 / 3.0) ** -2
    else:  # laplace, b = sd/√2
        f = np.exp(-np.abs(x) * np.sqrt(2.0) / sd)
    return f / f.sum()


def _sum_density(terms: list[tuple[str, float]], x: np.ndarray) -> np.ndarray:
    """Weights on ``x`` of a sum of independent terms ``(dist, sd)``."""
    from scipy import signal  # only for heavy-tailed truths: not on the simulator's import

    out = _density(*terms[0], x)
    for dist, sd in terms[1:]:
        if sd > 0.0:
            out = signal.fftconvolve(out, _density(dist, sd, x), mode="same")
    out = np.clip(out, 0.0, None)
    return out / out.sum()


def _seed_sum_density(dist: str, sds: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Grid points and probability weights of the sum of independent seed effects with SDs
    ``sds`` drawn from ``dist`` (tabulated and convolved by FFT on :func:`_grid`, ±25 logit
    units: a t_3 term of SD 0.3 leaves a mass of about 1e-7 beyond, and an accuracy in
    [0, 1] moves by less than that)."""
    x = _grid()
    return x, _sum_density([(dist, sd) for sd in sds], x)


def true_effects(seed_effects: str = "moderate", **parameters: object) -> pd.DataFrame:
    """Procedure-level truths of the simulator: expectations over seeds and items.

    ``parameters`` are the model keywords of :func:`simulate_outcomes`. Returns one row per
    noise level with ``eval_noise``, ``accuracy_a``, ``accuracy_b``, ``estimate``
    (``accuracy_a − accuracy_b``), ``retention_a``, ``retention_b`` and
    ``retention_difference`` (``retention_a − retention_b``; ratios of expected accuracies;
    1 and 0 on the clean row).
    """
    model = seed_model(seed_effects, **parameters)  # type: ignore[arg-type]
    scale = _levels(model)
    rows = []
    acc = np.empty((2, scale.size))
    for c in range(2):
        gamma = model.accuracy_effect if c == 0 else 0.0
        lam = model.noise_drop - (model.robustness_effect if c == 0 else 0.0)
        for j, s in enumerate(scale):
            seed_sds = (model.seed_skill_sd, model.seed_condition_sd,
                        s * model.seed_robustness_sd)
            rest = (model.item_sd**2 + model.seed_item_sd**2 + model.item_condition_sd**2
                    + (s * model.item_robustness_sd) ** 2
                    + (model.noise_item_sd**2 if j > 0 else 0.0))
            mean = model.intercept + gamma - s * lam
            if model.seed_dist == "normal":
                sd = np.sqrt(rest + sum(v**2 for v in seed_sds))
                acc[c, j] = float(_expit_normal(mean, sd))
            else:
                x, w = _seed_sum_density(model.seed_dist, seed_sds)
                acc[c, j] = float(w @ _expit_normal(mean + x, np.sqrt(rest)))
    for j, level in enumerate(model.eval_noise):
        ra, rb = acc[0, j] / acc[0, 0], acc[1, j] / acc[1, 0]
        rows.append(dict(eval_noise=float(level), accuracy_a=acc[0, j], accuracy_b=acc[1, j],
                         estimate=acc[0, j] - acc[1, j], retention_a=ra, retention_b=rb,
                         retention_difference=ra - rb))
    return pd.DataFrame(rows)


def seed_retention_sd(seed_effects: str = "moderate", *, n_draws: int = 20_000,
                      rng: np.random.Generator | int | None = 0,
                      **parameters: object) -> float:
    """SD over training seeds of condition B's per-seed retention at the largest level.

    Per-seed retention with infinitely many items, ``E_i[p_noisy] / E_i[p_clean]`` given
    the seed's effects (u, v, ρ), by quadrature over items and ``n_draws`` seed draws.
    """
    model = seed_model(seed_effects, **parameters)  # type: ignore[arg-type]
    gen = check_rng(rng)
    draws = check_int(n_draws, "n_draws", low=2)
    shift = (_seed_draw(model.seed_dist, model.seed_skill_sd, draws, gen)
             + _seed_draw(model.seed_dist, model.seed_condition_sd, draws, gen))
    rho = _seed_draw(model.seed_dist, model.seed_robustness_sd, draws, gen)
    within = model.item_sd**2 + model.seed_item_sd**2 + model.item_condition_sd**2
    clean = _expit_normal(model.intercept + shift, np.sqrt(within))
    noisy = _expit_normal(model.intercept + shift - model.noise_drop - rho,
                          np.sqrt(within + model.noise_item_sd**2
                                  + model.item_robustness_sd**2))
    return float(np.std(noisy / clean, ddof=1))
