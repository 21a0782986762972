"""Planning a sequential study: power and expected seeds of looks over training seeds.

The design is the one a study with ``sequential:`` runs (:mod:`._looks`): Lan–DeMets
bounds ``b_k`` at the seed fractions ``n_k/K`` (symmetric two-sided at ``α``, or one-sided
at ``α/sides`` with a futility bound ``a_k``). Its operating characteristics use three
pieces, each checked by simulation in ``docs/statistics.md``:

* the correlation of the looks' statistics from the information ``I_k = 1/se_k²`` of the
  seed-random design, ``se_k² = σ²_seed/n_k + σ²_item/N + σ²_res/(n_k N)``
  (:func:`robuststats.stats.power_seeds` gives ``se_k``): ``Corr(Z_j, Z_k) = √(I_j/I_k)``;
* the drift ``θ√I_k = δ/se_k``;
* few degrees of freedom: at look ``k`` the calibrated seed-random t rejects at nominal
  one-sided level ``Φ̄(b_k)`` with the power ``p_k`` that
  :func:`~robuststats.stats.power_seeds` computes for that fixed test (its variance
  estimate and calibrated critical value included), and is futile with the t's
  probability of a p-value above ``Φ̄(a_k)``. Those are the looks' marginal
  probabilities. Under the effect their *joint* law is not the normal one: each look's t
  divides by its own estimate of the seed variance, on few df, and the variance estimates
  of nested seeds are only partly shared, so the looks' statistics are less correlated
  than ``√(I_j/I_k)`` (in the realistic simulator of docs/statistics.md §11 with looks at
  3, 6, 8, 11 seeds, 0.63 against 0.72 between the first two looks). The normal
  recursion with each look's bound moved to give its marginal made Pocock-like and
  futility plans 1.5–3 pp pessimistic (there: 79.7 % against 81.4 % simulated with the
  simulated marginals). The joint law is taken instead from simulated nested t's
  (:func:`nested_t_paths`): per seed the contrast ``δ + √a·e_s`` (``a = σ²_seed +
  σ²_res/N``, ``e_s`` standard normal) and a shared item part ``√(σ²_item/N)·g``; look
  ``k`` has ``T_k = (δ + √a·ē_k + √(σ²_item/N)·g)/√(a·s²_k/n_k + σ²_item/N)`` with ``ē_k``,
  ``s²_k`` the mean and sample variance of the first ``n_k`` seeds' ``e``. Each look's
  bounds are the quantiles of ``T_k`` that give it exactly the marginal ``p_k`` (and the
  futility probability) of :func:`~robuststats.stats.power_seeds`, so only the dependence
  (the copula) comes from the simulation: 200,000 paths from a fixed seed (Monte Carlo SE
  of the power at most 0.0011, the same plan on every call). With the simulated marginals
  of that run the nested t's give 81.3 %. Under the null the normal design is used (``α``
  exactly; the calibrated t is at or below it; two-sided plans count both tails, the
  falsifying one included). A futility bound spends ``β`` under the drift
  ``z_{1−α/sides} + Φ⁻¹(p_K)`` at which a normal test at the last look has the
  seed-random t's power ``p_K`` there.

The expected number of seeds is ``Σ_k n_k·P(stop at look k)``. The fixed design of equal
power is the fewest seeds whose single seed-random t test reaches the sequential design's
power (:func:`~robuststats.stats.power_seeds` solving for ``n_seeds``).

Sizing (:func:`size_sequential`). A user plans for a target power ``1 − β``: the fixed
design takes the fewest seeds ``n_fix`` reaching it; the sequential design with ``L`` looks
takes the smallest maximum ``K`` whose looks (:func:`spaced_looks`: from the first look to
``K`` in equal steps, rounded) reach it by the computation above. ``L = "every"`` looks after
every seed from the first look (default 2, the first count the seed-random t analyses) to
``K``: seeds arrive one at a time and an analysis costs seconds, so every seed is a look.
The spending is by the seed fraction ``n_k/K`` as for any list of looks; each look's few
df enter only through its marginal probabilities and the nested t's (above), never through
the bounds, which are the normal design's at nominal level ``Φ̄(b_k)``. ``K/n_fix`` is the
seed-count analogue of the inflation factor of rpact's ``getDesignCharacteristics``
(Jennison & Turnbull 2000, §2.7 and ch. 7); the fixed design reported beside it is the one
sized to the same target, ``n_fix``, so the saving ``1 − E[seeds | effect]/n_fix`` compares
the two plans a user chooses between.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from robuststats._validation import check_int, check_number
from robuststats.errors import InputError
from robuststats.stats.sequential._looks import SequentialOptions, look_designs
from robuststats.stats.sequential._recursion import crossing, crossing_at, next_density

__all__ = ["N_PATHS", "SequentialPowerResult", "every_look", "nested_t_paths",
           "power_sequential", "size_sequential", "spaced_looks"]


@dataclass(frozen=True)
class SequentialPowerResult:
    """Operating characteristics of a sequential design over seeds, and the fixed design.

    Attributes
    ----------
    looks : tuple of int
        Seeds per condition at each look.
    efficacy_bound, futility_bound : numpy.ndarray
        z bounds of the design (futility NaN without one).
    power : float
        Probability of deciding for the planned effect (crossing an efficacy bound).
    type1_error : float
        Probability of a wrong decision when ``δ = 0`` (normal design, futility obeyed):
        crossing the efficacy bound, plus for a two-sided plan the falsifying tail (the
        study's FALSIFIED when ``z ≤ −c_k``, the symmetric bound; with a futility bound it
        is checked before the futility stop, so both tails count).
    stop_null, stop_effect : numpy.ndarray
        Probability of stopping at each look under ``δ = 0`` and the planned effect.
    expected_seeds_null, expected_seeds_effect : float
    fixed_seeds : int
        Seeds of the fixed design (one analysis) with at least ``power``.
    fixed_power : float
        Its power.
    cost_per_seed : float or None
        Cost of one seed of both conditions (e.g. GPU-hours), when given.
    target_power : float or None
        The power the design was sized to (:func:`size_sequential`); the fixed design is
        then the one sized to it.
    drift : float or None
        With a futility bound: the drift ``η`` its β is spent under (the z at the last look
        of a normal test with the seed-random t's power there); a study's ``sequential.drift``
        set to it uses these futility bounds, fixed before any data.
    """

    looks: tuple[int, ...]
    n_items: int
    effect: float
    alpha: float
    alternative: str
    spending: str
    futility: str
    efficacy_bound: np.ndarray
    futility_bound: np.ndarray
    power: float
    type1_error: float
    stop_null: np.ndarray
    stop_effect: np.ndarray
    expected_seeds_null: float
    expected_seeds_effect: float
    fixed_seeds: int
    fixed_power: float
    cost_per_seed: float | None = None
    target_power: float | None = None
    drift: float | None = None

    @property
    def saving(self) -> float:
        """Share of the fixed design's seeds saved on average under the planned effect."""
        return 1.0 - self.expected_seeds_effect / self.fixed_seeds

    def cost(self, seeds: float) -> float | None:
        return None if self.cost_per_seed is None else seeds * self.cost_per_seed


def power_sequential(effect: float, looks, n_items: int, *, discordance: float | None = None,
                     seed_sd: float = 0.0, icc: float = 0.0, baseline: float | None = None,
                     correlation: float | None = None, alpha: float = 0.05,
                     alternative: str = "two-sided", spending: str = "obf",
                     futility: str = "none", beta: float = 0.2,
                     cost_per_seed: float | None = None) -> SequentialPowerResult:
    """Power and expected seeds of a group-sequential seed-random design (module doc).

    ``looks``: seeds per condition at each look (≥ 2, increasing); the other design
    arguments are those of :func:`robuststats.stats.power_seeds`.
    """
    from robuststats.stats import power_seeds

    try:
        ks = tuple(check_int(k, "looks", low=2) for k in looks)
    except TypeError:
        raise InputError(f"`looks` must be a sequence of seed counts, got {looks!r}.") \
            from None
    if len(ks) < 2 or any(b <= a for a, b in itertools.pairwise(ks)):
        raise InputError(f"`looks` must be at least 2 increasing seed counts, got "
                         f"{list(ks)}.")
    if cost_per_seed is not None:
        check_number(cost_per_seed, "cost_per_seed", low=0.0)
    sides = 2 if alternative == "two-sided" else 1
    design = dict(discordance=discordance, seed_sd=seed_sd, icc=icc, baseline=baseline,
                  correlation=correlation)
    fixed = [power_seeds(effect, n_items, k, None, alpha=alpha, alternative=alternative,
                         **design) for k in ks]
    options = SequentialOptions(ks, alpha=alpha * 2.0 / sides, spending=spending,
                                futility=futility, beta=beta, effect=None)
    # β is spent under the drift at which a normal test at the last look has the power of
    # the seed-random t there (its few df cost power that the normal drift would not show)
    p_last = power_seeds(effect, n_items, ks[-1], None, alpha=alpha / sides,
                         alternative="greater", **design).achieved_power
    eta_eff = float(special.ndtri(1.0 - alpha / sides) + special.ndtri(min(p_last, 1 - 1e-16)))
    rci, one = look_designs(options, max(eta_eff, 0.0))
    chosen = one if one is not None else rci
    upper = chosen.upper
    lower = one.lower if one is not None else (rci.lower if sides == 2 else
                                               np.full(len(ks), -np.inf))
    # the null: the normal design itself
    null = crossing(np.asarray(chosen.fractions), upper, lower, 0.0)
    falsify = 0.0
    if sides == 2:
        falsify = float(null.lower.sum()) if futility == "none" else _below(
            np.asarray(chosen.fractions), upper, lower, -rci.upper)

    def _reach(i: int, bound: float) -> float:
        # the seed-random t's probability at look i of a one-sided p-value at most Φ̄(bound)
        if not math.isfinite(bound):
            return 0.0 if bound > 0 else 1.0
        return power_seeds(effect, n_items, ks[i], None, alpha=float(special.ndtr(-bound)),
                           alternative="greater", **design).achieved_power

    p_up = np.array([_reach(i, b) for i, b in enumerate(upper)])
    p_fut = np.array([_reach(i, a) if futility != "none" and i < len(ks) - 1 else np.nan
                      for i, a in enumerate(lower)])
    paths = nested_t_paths(fixed[-1], ks, n_items, float(effect))
    power, stop_alt = _first_crossings(paths, p_up, p_fut)
    stop_null = _stops(null)
    k_arr = np.asarray(ks, dtype=float)
    try:
        fixed_k = power_seeds(effect, n_items, None, power, alpha=alpha,
                              alternative=alternative, **design).n_seeds
    except InputError:
        fixed_k = ks[-1]
    fixed_power = power_seeds(effect, n_items, fixed_k, None, alpha=alpha,
                              alternative=alternative, **design).achieved_power
    lower_out = lower if futility != "none" else np.full(len(ks), np.nan)
    return SequentialPowerResult(
        ks, int(n_items), float(effect), float(alpha), alternative, spending, futility,
        upper, np.where(np.isfinite(lower_out), lower_out, np.nan), power,
        float(null.upper.sum() + falsify),
        stop_null, stop_alt, float(stop_null @ k_arr), float(stop_alt @ k_arr), int(fixed_k),
        float(fixed_power), cost_per_seed,
        drift=None if futility == "none" else max(eta_eff, 0.0))


#: simulated nested t paths behind a plan's joint law, and their fixed seed
N_PATHS = 200_000
_PATH_SEED = 20261128


def nested_t_paths(fixed, looks: tuple[int, ...], n_items: int, effect: float
                   ) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Simulated look statistics ``T_k`` of nested seeds, shape ``(N_PATHS, K)`` (module
    doc): the dependence of the few-df t's at the looks. ``fixed``: a
    :class:`~robuststats.stats.power.SeedPowerResult` of the design (its variance
    components)."""
    a = max(float(fixed.var_seed) + float(fixed.var_resid) / n_items, 0.0)
    item = max(float(fixed.var_item) / n_items, 0.0)
    rng = np.random.default_rng(_PATH_SEED)
    e = rng.standard_normal((N_PATHS, looks[-1]))
    g = rng.standard_normal(N_PATHS)
    sums, squares = np.cumsum(e, axis=1), np.cumsum(e**2, axis=1)
    out = np.empty((N_PATHS, len(looks)))
    for k, n in enumerate(looks):
        mean = sums[:, n - 1] / n
        s2 = (squares[:, n - 1] - n * mean**2) / (n - 1)
        scale = np.sqrt(a * s2 / n + item)
        out[:, k] = (effect + math.sqrt(a) * mean + math.sqrt(item) * g) / np.where(
            scale > 0, scale, np.inf)
    return out


def _first_crossings(paths: np.ndarray, p_up: np.ndarray, p_fut: np.ndarray
                     ) -> tuple[float, np.ndarray]:
    """Power and stopping probabilities: at look ``k`` a path crosses the efficacy bound
    when ``T_k`` is in the top ``p_up[k]`` of its marginal, and is futile when ``T_k`` is
    below the top ``p_fut[k]`` (NaN: no futility bound); the last look takes the rest."""
    n, k_max = paths.shape
    alive = np.ones(n, dtype=bool)
    power, stop = 0.0, np.zeros(k_max)
    for k in range(k_max):
        col = paths[:, k]
        up = alive & _top(col, p_up[k])
        futile = alive & ~up & ~_top(col, p_fut[k]) if not np.isnan(p_fut[k]) else \
            np.zeros(n, dtype=bool)
        power += up.mean()
        stop[k] = (up | futile).mean()
        alive &= ~(up | futile)
    stop[-1] = max(0.0, 1.0 - stop[:-1].sum())
    return float(power), stop


def _top(col: np.ndarray, share: float) -> np.ndarray:
    """The paths in the top ``share`` of ``col``'s distribution."""
    if share <= 0.0:
        return np.zeros(len(col), dtype=bool)
    if share >= 1.0:
        return np.ones(len(col), dtype=bool)
    return col >= np.quantile(col, 1.0 - share)


def _below(fractions: np.ndarray, upper: np.ndarray, lower: np.ndarray,
           falsify: np.ndarray) -> float:
    """``P_0`` of ``Z_k ≤ falsify_k`` at some look on the paths still inside the region
    ``(lower_j, upper_j)`` before it: the falsifying tail of a two-sided plan whose region is
    cut by a futility bound (the study decides FALSIFIED before it looks at futility)."""
    total, grid, t_prev = 0.0, None, 0.0
    for k, t in enumerate(fractions):
        total += crossing_at(grid, t_prev, float(t), 0.0, float(falsify[k]), False)
        grid = next_density(grid, t_prev, float(t), 0.0, float(lower[k]), float(upper[k]))
        t_prev = float(t)
        if grid is None:
            break
    return total


def _stops(c) -> np.ndarray:  # type: ignore[no-untyped-def]
    stop = c.stop.copy()
    stop[-1] = max(0.0, 1.0 - stop[:-1].sum())
    return stop


def spaced_looks(n_looks: int, max_seeds: int, first: int | None = None) -> tuple[int, ...]:
    """``n_looks`` looks ending at ``max_seeds`` in equal steps from ``first`` (default: the
    first of ``n_looks`` equal steps from 0), each rounded half up; an InputError when two
    looks coincide or the first has fewer than 2 seeds.

    >>> spaced_looks(3, 12), spaced_looks(4, 10), spaced_looks(3, 12, first=5)
    ((4, 8, 12), (3, 5, 8, 10), (5, 9, 12))
    """
    n_looks = check_int(n_looks, "n_looks", low=2)
    max_seeds = check_int(max_seeds, "max_seeds", low=2)
    start = max_seeds / n_looks if first is None else check_int(first, "first_look", low=2)
    steps = [start + (max_seeds - start) * j / (n_looks - 1) for j in range(n_looks)]
    looks = tuple(math.floor(x + 0.5 + 1e-9) for x in steps)  # half up, float-safe
    if looks[0] < 2 or any(b <= a for a, b in itertools.pairwise(looks)):
        raise InputError(f"{n_looks} looks up to {max_seeds} seeds"
                         f"{'' if first is None else f' from {first}'} do not give "
                         f"increasing seed counts of at least 2: {list(looks)}.")
    return looks


def every_look(max_seeds: int, first: int | None = None) -> tuple[int, ...]:
    """Looks after every seed from ``first`` (default 2) to ``max_seeds``.

    >>> every_look(6), every_look(6, first=4)
    ((2, 3, 4, 5, 6), (4, 5, 6))
    """
    start = 2 if first is None else check_int(first, "first_look", low=2)
    max_seeds = check_int(max_seeds, "max_seeds", low=start + 1)
    return tuple(range(start, max_seeds + 1))


def size_sequential(effect: float, n_items: int, power: float = 0.8, *,
                    n_looks: int | str = 3, first_look: int | None = None,
                    max_seeds: int | None = None,
                    **design) -> SequentialPowerResult:  # type: ignore[no-untyped-def]
    """The sequential design with ``n_looks`` looks (:func:`spaced_looks`; ``"every"``: a
    look after every seed, :func:`every_look`) and the smallest maximum number of seeds
    whose power reaches ``power`` (module doc, sizing).

    ``design``: the other arguments of :func:`power_sequential` (``discordance``,
    ``seed_sd``, ``icc``, ``alpha``, ``alternative``, ``spending``, ``futility``, ...).
    The result's fixed design is the one sized to ``power``. ``max_seeds``: the largest
    maximum tried (default ``3·n_fix + 10``; the inflation factor of the usual spending
    functions is under 1.3 with normal statistics).

    >>> r = size_sequential(0.057, 300, 0.9, n_looks=4, spending="hsd(-1)",
    ...                     discordance=0.37, seed_sd=0.035, icc=0.016)
    >>> r.looks, r.fixed_seeds, round(r.power, 3)
    ((3, 6, 9, 12), 11, 0.914)
    """
    from robuststats.stats import power_seeds

    target = check_number(power, "power", low=0.0, high=1.0, low_open=True, high_open=True)
    every = n_looks == "every"
    if not every:
        n_looks = check_int(n_looks, "n_looks", low=2)
    if first_look is not None:
        first_look = check_int(first_look, "first_look", low=2)
    fixed_keys = ("discordance", "seed_sd", "icc", "baseline", "correlation", "alpha",
                  "alternative")
    fixed_args = {k: design[k] for k in fixed_keys if k in design}
    fixed = power_seeds(effect, n_items, None, target, **fixed_args)
    if max_seeds is None:
        max_seeds = 3 * fixed.n_seeds + 10
    if every:
        lowest = max(fixed.n_seeds - 2, (first_look or 2) + 1)
    else:
        lowest = max(fixed.n_seeds - 2, n_looks + 1, 2 * n_looks if first_look is None else
                     first_look + n_looks - 1)
    for k_max in range(lowest, max_seeds + 1):
        try:
            looks = every_look(k_max, first_look) if every else \
                spaced_looks(n_looks, k_max, first_look)
        except InputError:
            continue
        r = power_sequential(effect, looks, n_items, **design)
        if r.power >= target:
            return dataclasses.replace(r, fixed_seeds=fixed.n_seeds,
                                       fixed_power=fixed.achieved_power, target_power=target)
    raise InputError(f"no sequential design of {n_looks} looks up to {max_seeds} seeds "
                     f"reaches power {target:g} (the fixed design needs {fixed.n_seeds}).")
