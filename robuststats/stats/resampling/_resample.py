"""Vectorized resampling engine behind the bootstrap functions.

Outcomes form a crossed design: the same items are evaluated under every training seed.
The two-way ("pigeonhole") bootstrap of Owen (2007), Ann. Appl. Stat. 1:386–411, resamples
the rows (seeds) and the columns (items) independently and keeps the sub-matrix; the total
of that sub-matrix is ``s' X w`` with ``s`` and ``w`` the resampling *counts* of seeds and
items. Davison & Hinkley (1997, §3.8) describe the nested two-stage analogue.

Every statistic is a function of a few resampled totals, so the engine returns totals and
no Python loop runs over resamples. Outcomes of 0/1 or proportions ``i/L`` are scaled to
integers (:func:`lattice_scale`), and the totals are then exact integers: statistics built
from them compare exactly (ties in BCa), whatever the order of summation.

How the totals are drawn (each way has exactly the distribution of drawing ``n_items``
items with replacement, jointly for every input and seed):

* Items with the same pattern (their column of outcomes over every input and seed) are
  interchangeable. The number of draws landing on each common pattern (at least
  ``_PATTERN_MIN`` items) and on the remaining items, pooled, is one multinomial draw per
  resample, ``Multinomial(n, (f_1, …, f_P, n_rest) / n)``; the draws that land on the pool
  are then drawn uniformly among its items. One seed of 0/1 outcomes has at most 2, 4 or 16
  patterns, so its cost does not grow with the number of items.
* Item indices (``rng.integers``, uint16) are gathered from tables in which the integer
  outcomes of several inputs share one ``uint64``, each in a bit field wide enough that the
  sum over ``n`` draws cannot carry into the next: one gather and one sum per table.
* With several seeds the seed counts are drawn first. Resamples with the same seed-count
  vector share the weighted outcomes ``Σ_s S_s X_si`` (there are ``C(2k − 1, k)`` vectors,
  126 for 5 seeds), which have few patterns again; with many distinct vectors every seed's
  row is a field of its own and the seed counts are applied to the per-seed sums.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

__all__ = [
    "crossed_variance_ratio",
    "jackknife_influence",
    "lattice_scale",
    "resampled_means",
    "resampled_totals",
]

#: largest common denominator L of outcome proportions i/L treated as a lattice
_MAX_SCALE = 4096
#: an item pattern gets its own multinomial cell when it has at least this many items: a
#: cell (one binomial draw, about 0.2 µs) costs about as much as this many item draws and
#: gathers (measured with numpy 2 on one core)
_PATTERN_MIN = 32
#: item draws per gather block: a (block, n_items) uint64 gather of about 2 MB
_BLOCK_DRAWS = 1 << 18
#: resamples sharing a seed-count vector share a table when each table serves this many
_GROUP_MIN = 16


def lattice_scale(values: np.ndarray) -> int | None:
    """Smallest integer ``L`` such that every value times ``L`` is an integer.

    ``1`` for 0/1 outcomes; ``L`` for proportions ``i/L`` (the mean over ``L`` repeated
    noisy evaluations); ``None`` when no ``L ≤ 4096`` puts every value on the grid.
    """
    flat = np.asarray(values, dtype=float).ravel()
    if np.all((flat == 0.0) | (flat == 1.0)):
        return 1
    levels = np.unique(flat)
    if levels.size > _MAX_SCALE + 1:
        return None
    scale = 1
    for level in levels:
        scale = math.lcm(scale, Fraction(float(level)).limit_denominator(_MAX_SCALE).denominator)
        if scale > _MAX_SCALE:
            return None
    scaled = levels * scale
    if np.max(np.abs(scaled - np.rint(scaled))) > 1e-9 * scale:
        return None
    return scale


def _counts(rng: np.random.Generator, size: int, n: int) -> np.ndarray:
    """(size, n) matrix of bootstrap counts: each row a multinomial(n, 1/n) draw."""
    idx = rng.integers(0, n, size=(size, n))
    idx += (np.arange(size) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=size * n).reshape(size, n).astype(np.float64)


def _is_counting(rows: np.ndarray) -> bool:
    """Nonnegative integers whose sum over the items fits a uint64 field."""
    return bool(np.all(rows >= 0) and np.all(rows == np.rint(rows))
                and rows.shape[1] * float(rows.max(initial=0.0)) < 2.0**63)


def _packed_tables(rows: np.ndarray, counting: bool, draws: int
                   ) -> list[tuple[np.ndarray, list[tuple[int, int, int]]]]:
    """Tables to gather: ``(table, [(row, shift, mask), ...])``.

    Integer rows share uint64 tables, each row in a bit field wide enough for its sum over
    ``draws`` draws; other rows get a float64 table each (``shift`` and ``mask`` unused).
    """
    f, n = rows.shape
    if not counting:
        return [(np.ascontiguousarray(rows[j], dtype=np.float64), [(j, 0, 0)]) for j in range(f)]
    bits = [max(1, (draws * int(rows[j].max(initial=0))).bit_length()) for j in range(f)]
    tables, fields, used = [], [], 0
    for j in range(f):
        if used + bits[j] > 64:
            tables.append(fields)
            fields, used = [], 0
        fields.append((j, used, (1 << bits[j]) - 1))
        used += bits[j]
    tables.append(fields)
    out = []
    for fields in tables:
        table = np.zeros(n, dtype=np.uint64)
        for j, shift, _ in fields:
            table |= rows[j].astype(np.uint64) << np.uint64(shift)
        out.append((table, fields))
    return out


def _unpack(sums: np.ndarray, table: np.ndarray, fields, out: np.ndarray) -> None:
    """Add the gathered ``sums`` of one table into their rows of ``out``."""
    if table.dtype == np.float64:
        out[:, fields[0][0]] += sums
        return
    for j, shift, mask in fields:
        out[:, j] += (sums >> np.uint64(shift)) & np.uint64(mask)


def _index_dtype(n: int) -> type:
    return np.uint16 if n <= np.iinfo(np.uint16).max else np.int64


def _item_sums(rows: np.ndarray, size: int, rng: np.random.Generator, counting: bool
               ) -> np.ndarray:
    """``(size, f)``: sums of each row of ``rows (f, n)`` over ``n`` item draws with
    replacement, one resample per output row."""
    f, n = rows.shape
    out = np.zeros((size, f))
    tables = _packed_tables(rows, counting, n)
    block = max(1, _BLOCK_DRAWS // n)
    gathered = {table.dtype: np.empty((min(block, size), n), dtype=table.dtype)
                for table, _ in tables}
    for start in range(0, size, block):
        stop = min(size, start + block)
        idx = rng.integers(0, n, size=(stop - start, n), dtype=_index_dtype(n))
        for table, fields in tables:
            buf = gathered[table.dtype][:stop - start]
            # into a preallocated buffer, without bounds checks: several times faster
            np.take(table, idx, mode="clip", out=buf)
            _unpack(buf.sum(axis=1), table, fields, out[start:stop])
    return out


def _item_patterns(rows: np.ndarray, counting: bool
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct columns of ``rows (f, n)``: ``(patterns (P, f), frequencies (P,),
    pattern of each item (n,))``."""
    f, n = rows.shape
    if counting:
        base = int(rows.max(initial=0)) + 1
        if base ** f < 2**62:
            powers = base ** np.arange(f, dtype=np.int64)
            codes = powers @ rows.astype(np.int64)
            if base ** f <= 4 * n + 64:  # few possible codes: count them directly
                freq = np.bincount(codes, minlength=base ** f)
                present = np.flatnonzero(freq)
                position = np.zeros(freq.size, dtype=np.int64)
                position[present] = np.arange(present.size)
                patterns = (present[:, None] // powers) % base
                return patterns.astype(np.float64), freq[present], position[codes]
            _, first, inverse, freq = np.unique(codes, return_index=True,
                                                return_inverse=True, return_counts=True)
            return rows[:, first].T.astype(np.float64), freq, inverse
    patterns, inverse, freq = np.unique(rows.T, axis=0, return_inverse=True,
                                        return_counts=True)
    return patterns.astype(np.float64), freq, inverse.ravel()


def _mixed_sums(rows: np.ndarray, size: int, rng: np.random.Generator, counting: bool,
                patterns: np.ndarray, freq: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """``(size, f)`` sums over ``n`` item draws, split by where each draw lands.

    The counts of the common patterns and of the rest ("rare" items, pooled) are one
    multinomial draw per resample; the draws landing on rare items are then drawn
    uniformly among them. Together this is the multinomial over items.
    """
    f, n = rows.shape
    common = np.flatnonzero(freq >= _PATTERN_MIN)
    rare = np.flatnonzero(freq[inverse] < _PATTERN_MIN)
    probs = np.append(freq[common], rare.size) / n
    tables = _packed_tables(rows[:, rare], counting, n) if rare.size else []
    out = np.empty((size, f))
    block = max(1, _BLOCK_DRAWS // max(common.size + 1, rare.size))  # rare draws: ~rare.size
    for start in range(0, size, block):
        stop = min(size, start + block)
        counts = rng.multinomial(n, probs, size=stop - start)
        out[start:stop] = counts[:, :-1].astype(np.float64) @ patterns[common]  # exact
        if not tables:
            continue
        draws = counts[:, -1]
        idx = rng.integers(0, rare.size, size=int(draws.sum()), dtype=_index_dtype(rare.size))
        starts = np.concatenate(([0], np.cumsum(draws)[:-1]))
        for table, fields in tables:
            gathered = np.zeros(idx.size + 1, dtype=table.dtype)  # a 0 closes the last segment
            np.take(table, idx, mode="clip", out=gathered[:-1])
            sums = np.add.reduceat(gathered, starts)
            sums[draws == 0] = 0  # reduceat gives the element at an empty segment's start
            _unpack(sums, table, fields, out[start:stop])
    return out


def _sums(rows: np.ndarray, size: int, rng: np.random.Generator, counting: bool
          ) -> np.ndarray:
    """``(size, f)``: sums of the rows of ``rows (f, n)`` over ``n`` items drawn with
    replacement, through pattern counts where items share patterns.
    ``counting``: the rows are nonnegative integers (:func:`_is_counting`)."""
    patterns, freq, inverse = _item_patterns(rows, counting)
    # each multinomial cell saves (f − _PATTERN_MIN) draws' worth of work; below an eighth
    # of the n draws the plain item draws are as fast and simpler
    if np.sum(np.maximum(freq - _PATTERN_MIN, 0)) * 8 < rows.shape[1]:
        return _item_sums(rows, size, rng, counting)
    return _mixed_sums(rows, size, rng, counting, patterns, freq, inverse)


def resampled_totals(values: np.ndarray, n_resamples: int,
                     rng: np.random.Generator) -> np.ndarray:
    """Two-way bootstrap totals ``Σ_s Σ_i S_s W_i X_r[s, i]`` of each row ``r``.

    ``values``: ``(r, k, n)`` (inputs, seeds, items); seeds and items are resampled
    jointly for every input (paired). Returns ``(n_resamples, r)``. For nonnegative integer
    ``values`` (scaled outcomes) the totals are exact integers. With one seed only the items
    are resampled.

    Random stream: the seed counts of every resample first (``rng.integers`` reduced by
    ``np.bincount``); then, for each seed-count vector in sorted order (or for all
    resamples at once), pattern counts (``rng.multinomial``) or item indices
    (``rng.integers``), in blocks of resamples.
    """
    values = np.asarray(values, dtype=np.float64)
    r, k, n = values.shape
    counting = _is_counting(values.reshape(r, k * n) * k)  # seed-weighted sums stay in range
    if k == 1:
        return _sums(values[:, 0], n_resamples, rng, counting)
    seeds = _counts(rng, n_resamples, k)
    groups = inverse = None
    if math.comb(2 * k - 1, k) <= n_resamples:  # then the codes below fit an int64
        codes = seeds.astype(np.int64) @ ((k + 1) ** np.arange(k, dtype=np.int64))
        groups, inverse = np.unique(codes, return_inverse=True)
    if groups is None or groups.size * _GROUP_MIN > n_resamples:
        per_seed = _sums(values.reshape(r * k, n), n_resamples, rng, counting)
        return np.einsum("brk,bk->br", per_seed.reshape(n_resamples, r, k), seeds)
    totals = np.empty((n_resamples, r))
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(groups.size + 1))
    weighted = np.einsum("gk,rkn->grn", seeds[order[bounds[:-1]]], values)  # Σ_s S_s X_si
    for g in range(groups.size):
        members = order[bounds[g]:bounds[g + 1]]
        totals[members] = _sums(weighted[g], members.size, rng, counting)
    return totals


def resampled_means(matrices: Sequence[np.ndarray], n_resamples: int,
                    rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Bootstrap means of each ``(k, n)`` matrix under the seeds × items scheme:
    ``{"means": (B, m)}`` (:func:`resampled_totals` divided by ``k n``)."""
    stacked = np.stack([np.asarray(mat, dtype=np.float64) for mat in matrices])
    _, k, n = stacked.shape
    return {"means": resampled_totals(stacked, n_resamples, rng) / (k * n)}


def jackknife_influence(matrices: Sequence[np.ndarray], statistic) -> tuple[np.ndarray, np.ndarray]:
    """Jackknife influence values of ``statistic(means)`` over items and over seeds.

    ``statistic`` maps an array ``(..., m)`` of means to ``(...)``. Returns ``(U_items,
    U_seeds)`` with ``U_j = (N − 1)(θ̄_(·) − θ_(j))`` (Efron & Tibshirani 1993, eq. 14.15),
    θ̄_(·) over the defined leave-one-out values; ``U_seeds`` is empty for a single seed.
    """
    stacked = np.stack(matrices)  # (m, k, n)
    _, k, n = stacked.shape
    totals = stacked.sum(axis=(1, 2))  # (m,)

    def influence(theta: np.ndarray, size: int) -> np.ndarray:
        # a leave-one-out value can be undefined (a ratio over a clean total of 0): it is
        # left out of the mean and its own influence value is not finite
        finite = np.isfinite(theta)
        if not finite.any():
            return np.full(theta.shape, np.nan)
        with np.errstate(invalid="ignore"):
            return (size - 1) * (theta[finite].mean() - theta)

    u_items = np.zeros(0)
    if n > 1:
        col = stacked.sum(axis=1).T  # (n, m)
        u_items = influence(statistic((totals[None, :] - col) / (k * (n - 1))), n)
    u_seeds = np.zeros(0)
    if k > 1:
        row = stacked.sum(axis=2).T  # (k, m)
        u_seeds = influence(statistic((totals[None, :] - row) / ((k - 1) * n)), k)
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
