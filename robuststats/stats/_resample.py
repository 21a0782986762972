"""Vectorized resampling engine behind the bootstrap functions.

Outcomes form a crossed design: the same items are evaluated under every training seed.
The two-way ("pigeonhole") bootstrap of Owen (2007), Ann. Appl. Stat. 1:386–411, resamples
the rows (seeds) and the columns (items) independently and keeps the sub-matrix; the mean
of that sub-matrix is ``s' X w / (k n)`` with ``s`` and ``w`` the resampling *counts* of
seeds and items. Davison & Hinkley (1997, §3.8) describe the nested two-stage analogue.

Counts come from integer index draws (``rng.integers``) turned into count vectors by one
``np.bincount`` per block; every statistic is a function of a few resampled means, so no
Python loop runs over resamples.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["crossed_variance_ratio", "jackknife_influence", "resampled_means"]

#: resamples per block: bounds the (block, n_items) count matrix to a few tens of MB
_BLOCK = 1024


def _counts(rng: np.random.Generator, size: int, n: int) -> np.ndarray:
    """(size, n) matrix of bootstrap counts: each row a multinomial(n, 1/n) draw."""
    idx = rng.integers(0, n, size=(size, n))
    idx += (np.arange(size) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=size * n).reshape(size, n).astype(np.float64)


def resampled_means(
    matrices: Sequence[np.ndarray], n_resamples: int, rng: np.random.Generator,
    *, extra_item_products: bool = False,
) -> dict[str, np.ndarray]:
    """Bootstrap means of each ``(k, n)`` matrix under the seeds × items scheme.

    Returns ``{"means": (B, m)}``; with ``extra_item_products`` (one seed only) also
    ``"cross"`` (B, m, m, 1, 1): item-weighted sums of products ``Σ_i w_i X_a[i] X_b[i]``,
    which the studentized interval needs.

    One seed: the item draws index the outcome vectors directly (a gather of a vector that
    fits in cache beats building counts). Several seeds: item counts from ``np.bincount``
    and one matrix product for every (matrix, seed) row at once.
    """
    k, n = matrices[0].shape
    m = len(matrices)
    if extra_item_products and k != 1:
        raise ValueError("extra_item_products needs a single seed")
    stacked = np.stack(matrices)  # (m, k, n)
    flat = stacked.reshape(m * k, n)
    means = np.empty((n_resamples, m))
    cross_all = np.empty((n_resamples, m, m, 1, 1)) if extra_item_products else None
    pairs = [(a, b) for a in range(m) for b in range(a, m)]
    for start in range(0, n_resamples, _BLOCK):
        size = min(_BLOCK, n_resamples - start)
        block = slice(start, start + size)
        if k == 1:
            idx = rng.integers(0, n, size=(size, n))
            for j in range(m):
                means[block, j] = flat[j][idx].sum(axis=1) / n
            if extra_item_products:
                for a, b in pairs:
                    sums = (flat[a] * flat[b])[idx].sum(axis=1)
                    cross_all[block, a, b, 0, 0] = sums
                    cross_all[block, b, a, 0, 0] = sums
            continue
        w = _counts(rng, size, n)  # (size, n)
        s = _counts(rng, size, k)
        row_sums = (w @ flat.T).reshape(size, m, k)  # Σ_i w_i X[s, i]
        means[block] = np.einsum("bmk,bk->bm", row_sums, s) / (k * n)
    out = {"means": means}
    if extra_item_products:
        out["cross"] = cross_all
    return out


def jackknife_influence(matrices: Sequence[np.ndarray], statistic) -> tuple[np.ndarray, np.ndarray]:
    """Jackknife influence values of ``statistic(means)`` over items and over seeds.

    ``statistic`` maps an array ``(..., m)`` of means to ``(...)``. Returns ``(U_items,
    U_seeds)`` with ``U_j = (N − 1)(θ̄_(·) − θ_(j))`` (Efron & Tibshirani 1993, eq. 14.15);
    ``U_seeds`` is empty for a single seed.
    """
    stacked = np.stack(matrices)  # (m, k, n)
    _, k, n = stacked.shape
    totals = stacked.sum(axis=(1, 2))  # (m,)
    u_items = np.zeros(0)
    if n > 1:
        col = stacked.sum(axis=1).T  # (n, m)
        loo = (totals[None, :] - col) / (k * (n - 1))
        theta = statistic(loo)
        u_items = (n - 1) * (np.nanmean(theta) - theta)
    u_seeds = np.zeros(0)
    if k > 1:
        row = stacked.sum(axis=2).T  # (k, m)
        loo = (totals[None, :] - row) / ((k - 1) * n)
        theta = statistic(loo)
        u_seeds = (k - 1) * (np.nanmean(theta) - theta)
    return u_items, u_seeds


def crossed_variance_ratio(linear: np.ndarray) -> float:
    """``sqrt(V / Var*)`` for a linearized statistic ``linear`` of shape ``(k, n)``, k > 1.

    ``Var*`` is the exact two-way (pigeonhole) bootstrap variance of the grand mean of
    ``linear``: with multinomial seed counts S and item counts W,
    ``E[S_s S_t] = 1 + δ_st − 1/k`` and likewise for W, so
    ``Var* = [(1−1/k)(1−1/n)T² + (1−1/n)Σ_s R_s² + (1−1/k)Σ_i C_i² + ΣL²]/(kn)² − (T/kn)²``
    (T total, R row sums, C column sums). ``V`` is the method-of-moments estimate of the
    variance of the grand mean under the crossed random-effects model
    ``L_si = μ + a_s + b_i + e_si``: ``σ̂_a²/k + σ̂_b²/n + σ̂_e²/(kn)`` from the two-way ANOVA
    mean squares, components truncated at 0. The pigeonhole bootstrap counts σ_e² about
    three times (once through seeds, once through items, once through their product), so
    the ratio is below 1 when the seed × item residual dominates.
    """
    k, n = linear.shape
    total = linear.sum()
    rows = linear.sum(axis=1)
    cols = linear.sum(axis=0)
    kn = float(k * n)
    e2 = ((1 - 1 / k) * (1 - 1 / n) * total**2 + (1 - 1 / n) * np.sum(rows**2)
          + (1 - 1 / k) * np.sum(cols**2) + np.sum(linear**2)) / kn**2
    var_star = e2 - (total / kn) ** 2
    grand = total / kn
    row_means = rows / n
    col_means = cols / k
    ms_rows = n * np.sum((row_means - grand) ** 2) / (k - 1)
    ms_cols = k * np.sum((col_means - grand) ** 2) / (n - 1) if n > 1 else 0.0
    resid = linear - row_means[:, None] - col_means[None, :] + grand
    ms_e = np.sum(resid**2) / ((k - 1) * (n - 1)) if n > 1 else 0.0
    s2_a = max((ms_rows - ms_e) / n, 0.0)
    s2_b = max((ms_cols - ms_e) / k, 0.0)
    target = s2_a / k + s2_b / n + ms_e / kn
    if var_star <= 0.0 or target <= 0.0:
        return 1.0
    return float(np.sqrt(target / var_star))
