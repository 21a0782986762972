"""Variance of a candidate-minus-baseline contrast when the two share items but not seeds.

A candidate and a baseline are evaluated on the same ``n`` items, by ``k_c`` and ``k_b``
trained models (training seeds). When the seeds are different runs they cannot be paired
row by row, but the items still pair column by column. For a linear statistic with values
``L_g[s, i]`` per group ``g`` (a linearized retention or accuracy), the crossed model
``L_g[s, i] = μ_g + a_gs + b_gi + e_gsi`` (seeds random, items random, an item × group
component ``b_ci − b_bi``) gives, for the difference of the grand means ``T``,

    Var(T) = σ_a,c²/k_c + σ_a,b²/k_b + σ_d²/n + σ_e,c²/(k_c n) + σ_e,b²/(k_b n),

with ``σ_d² = Var(b_ci − b_bi)``. Each group's two-way ANOVA
(:func:`robuststats.stats.crossed_variance`) estimates its seed-level part whole,
``MS_seed,g/(k_g n)`` (E = σ_a,g²/k_g + σ_e,g²/(k_g n)), and its residual ``MS_resid,g``
(E = σ_e,g²). The sample variance ``S_d²`` of the per-item differences of column means has
E = σ_d² + σ_e,c²/k_c + σ_e,b²/k_b, so

    V = max(P_seed, F) + max(S_d² − MS_resid,c/k_c − MS_resid,b/k_b, 0)/n,
    P_seed = MS_seed,c/(k_c n) + MS_seed,b/(k_b n),   F = MS_resid,c/(k_c n) + MS_resid,b/(k_b n),

is unbiased before the truncations, which are those of
:func:`~robuststats.stats.crossed_variance`: the item part at 0, the seed part at its floor
``F`` (E P_seed ≥ F, since E MS_seed,g ≥ E MS_resid,g): tied seed sums on both sides give
``P_seed = 0`` by chance, and ``V`` must not be 0 while the outcomes vary (docs/statistics.md
§9, "Tied seed sums"). Its degrees of freedom are Satterthwaite's (1946) for the seed terms taken as one
(on their Welch–Satterthwaite df, each ``MS_seed`` at no less than its ``MS_resid``) plus
the item terms, bounded below by ``min(k_c, k_b) − 1``: the plug-in ν of the calibrated
reference (docs/statistics.md §9), so the reported df is the one the bound uses. Without
item components this is Welch's (1947) t on the per-seed means (checked against R's
``t.test``).

One seed on one side (a single candidate checkpoint against a baseline of several seeds):
that side's seed variance cannot be estimated from it. The candidate is then taken to vary
over seeds as the baseline does (the same recipe, another run), and the baseline's mean
squares stand for both: with ``h = 1/k_c + 1/k_b``,

    V = h·max(MS_seed,b, MS_resid,b)/n + max(S_d² − h·MS_resid,b, 0)/n   on ν ≥ k_b − 1,

which without item components is the t interval for a new observation of the baseline's
seed distribution (R ``predict(lm(y ~ 1), interval = "prediction")``).

One seed on both sides: no seed variance can be estimated at all. ``V = S_d²/n`` on
``n − 1`` df, the paired t over items: it answers "do these two trained models differ on
these items?", not "does the candidate's recipe differ from the baseline's?".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from robuststats.errors import InputError
from robuststats.stats._few_seeds import SeedReference
from robuststats.stats._seed_random import crossed_variance

__all__ = ["ContrastVariance", "unpaired_variance"]

#: how the seeds entered the variance (``ContrastVariance.design``)
DESIGNS = ("paired seeds", "independent seeds", "candidate seed borrowed",
           "baseline seed borrowed", "one model each")


@dataclass(frozen=True)
class ContrastVariance:
    """Variance of ``mean(L_c) − mean(L_b)`` with its components and degrees of freedom.

    Attributes
    ----------
    variance : float
        Estimated variance of the contrast.
    dof : float
        Satterthwaite degrees of freedom (``n − 1`` for one model each).
    seed_part : float
        The seed-level part of ``variance`` (both groups).
    item_part : float
        The item × group part, truncated at 0.
    var_seed : float
        Seed component σ_a² of one model (the mean of the two groups' when both have
        several seeds), ``max(MS_seed − MS_resid, 0)/n``.
    var_item : float
        Item × group component σ_d², truncated at 0.
    var_resid : float
        Seed × item residual σ_e² (mean over the groups with several seeds).
    design : str
        One of :data:`DESIGNS`.
    n_seeds_candidate, n_seeds_baseline, n_items : int
    """

    variance: float
    dof: float
    seed_part: float
    item_part: float
    var_seed: float
    var_item: float
    var_resid: float
    design: str
    n_seeds_candidate: int
    n_seeds_baseline: int
    n_items: int
    #: the calibrated reference distribution of the contrast's t (stats/_few_seeds.py)
    reference: SeedReference | None = field(default=None, repr=False, compare=False)


def paired_variance(lc: np.ndarray, lb: np.ndarray) -> ContrastVariance:
    """The crossed variance of ``L_c − L_b`` when row s of both is the same training seed.

    :func:`robuststats.stats.crossed_variance` of the per-seed, per-item differences (the
    seed-random t of docs/statistics.md §9).
    """
    k, n = lc.shape
    cv = crossed_variance(lc - lb)
    design = "paired seeds" if k > 1 else "one model each"
    seed = max(cv.ms_seed, cv.ms_resid) / (k * n) if k > 1 else 0.0  # floored, as V takes it
    return ContrastVariance(cv.variance, cv.dof, seed, cv.variance - seed,
                            cv.var_seed, cv.var_item, cv.var_resid, design, k, k, n,
                            cv.reference)


def unpaired_variance(lc: np.ndarray, lb: np.ndarray) -> ContrastVariance:
    """Variance of ``mean(lc) − mean(lb)``: items shared, seeds independent (module doc).

    ``lc``: ``(k_c, n)`` values of the candidate; ``lb``: ``(k_b, n)`` of the baseline,
    column i the same item in both.
    """
    lc, lb = np.asarray(lc, dtype=float), np.asarray(lb, dtype=float)
    if lc.ndim != 2 or lb.ndim != 2 or lc.shape[1] != lb.shape[1] or lc.shape[1] < 2:
        raise InputError("candidate and baseline values must have shapes (k_c, n) and "
                         f"(k_b, n) with n ≥ 2 shared items, got {lc.shape} and {lb.shape}.")
    kc, n = lc.shape
    kb = lb.shape[0]
    diff = lc.mean(axis=0) - lb.mean(axis=0)
    s_d = float(np.var(diff, ddof=1))
    # round-off: a mean square at 1e-12 of the values' mean square is 0 (as crossed_variance)
    eps = 1e-12 * float(np.mean(np.concatenate([lc.ravel(), lb.ravel()]) ** 2))
    s_d = 0.0 if s_d <= eps else s_d
    if kc == 1 and kb == 1:
        one = SeedReference(0.0, 0.0, 0.0, s_d / n, (s_d / n) ** 2 / (n - 1), 1.0)
        return ContrastVariance(s_d / n, float(n - 1), 0.0, s_d / n, 0.0, s_d, 0.0,
                                "one model each", 1, 1, n, one)
    cvc = crossed_variance(lc) if kc > 1 else None
    cvb = crossed_variance(lb) if kb > 1 else None
    # (coefficient, mean square, df, its MS_resid) of V's seed terms, whose sum is floored
    seed_terms: list[tuple[float, float, float, float]] = []
    resid_terms: list[tuple[float, float, float]] = []
    if cvc is not None and cvb is not None:
        design, low_df = "independent seeds", float(min(kc, kb) - 1)
        for cv, k in ((cvc, kc), (cvb, kb)):
            seed_terms.append((1.0 / (k * n), cv.ms_seed, k - 1.0, cv.ms_resid))
            resid_terms.append((-1.0 / (k * n), cv.ms_resid, (k - 1.0) * (n - 1.0)))
        var_seed = 0.5 * (cvc.var_seed + cvb.var_seed)
        var_resid = 0.5 * (cvc.var_resid + cvb.var_resid)
    else:
        # one side has one seed: the other side's mean squares stand for both (module doc)
        cv, k = (cvb, kb) if cvb is not None else (cvc, kc)
        design = "candidate seed borrowed" if cvb is not None else "baseline seed borrowed"
        low_df = float(k - 1)
        h = 1.0 / kc + 1.0 / kb
        seed_terms.append((h / n, cv.ms_seed, k - 1.0, cv.ms_resid))
        resid_terms.append((-h / n, cv.ms_resid, (k - 1.0) * (n - 1.0)))
        var_seed, var_resid = cv.var_seed, cv.var_resid
    seed_part = sum(c * ms for c, ms, _, _ in seed_terms)
    item_raw = s_d / n + sum(c * ms for c, ms, _ in resid_terms)
    keep_item = item_raw > 0.0
    item_part = item_raw if keep_item else 0.0
    var_item = max(s_d - sum(-c * n * ms for c, ms, _ in resid_terms), 0.0)
    # the calibrated reference (stats/_few_seeds.py): the seed terms as one on their
    # Welch–Satterthwaite df (each MS_seed at no less than its MS_resid, E MS_seed ≥
    # E MS_resid), the item terms as the rest; its plug-in ν is the contrast's df, the one
    # its quantiles use
    floor = sum(c * resid for c, _, _, resid in seed_terms)
    seed_floored = [(c * max(ms, resid), df) for c, ms, df, resid in seed_terms]
    seed_df = sum(v for v, _ in seed_floored) ** 2 / sum(v * v / df for v, df in seed_floored) \
        if any(v > 0 for v, _ in seed_floored) else low_df
    rest_var = (((s_d / n) ** 2 / (n - 1.0) + sum((c * ms) ** 2 / df for c, ms, df
                                                  in resid_terms)) if keep_item else 0.0)
    ref = SeedReference(seed_part, max(float(seed_df), low_df), floor, floor + item_part,
                        rest_var, 1.0)
    # the seed part at no less than its floor (E MS_seed ≥ E MS_resid in each group), as the
    # reference's plug-in takes it: tied seed sums on both sides never give V = 0
    seed_part = max(seed_part, floor)
    return ContrastVariance(ref.variance, ref.dof, seed_part, item_part,
                            var_seed, var_item, var_resid, design, kc, kb, n, ref)
