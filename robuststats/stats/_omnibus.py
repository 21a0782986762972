"""Cochran's Q: the omnibus test of equal accuracy of k conditions on the same blocks.

With ``x[j, i]`` the 0/1 outcome of condition j in block i (a block is one matched set:
the same item, training seed and noise seed under every condition), condition totals
``C_j``, block totals ``R_i`` and grand total ``N``,

    Q = (k − 1) [k Σ_j C_j² − N²] / (k N − Σ_i R_i²),

approximately χ² on k − 1 degrees of freedom under H0: every condition has the same
probability of a correct answer within a block (Cochran 1950, "The comparison of
percentages in matched samples", Biometrika 37:256–266). For k = 2, Q is McNemar's
uncorrected statistic ``(b − c)² / (b + c)``. It is the test to run before the pairwise
McNemar tests: they are its k(k − 1)/2 post-hoc comparisons.

Blocks whose outcome is the same under every condition (all correct or all wrong) leave Q
unchanged (an all-correct block adds 2kN + k² to both k ΣC_j² and N², and k² to both kN
and ΣR_i²), so Q depends only on the other, informative blocks. Q is computed by :func:`pingouin.cochran` on the long-format
table of those blocks. When no block is informative, Q is 0/0: a
:class:`DegenerateDataWarning` is issued and the result has statistic 0 and p = 1.

Like the Mantel–Haenszel McNemar test, Q treats blocks as independent. In a study the
same item recurs under every seed and noise seed, so blocks that share an item are
correlated, and when the conditions differ item by item (but not on average) Q rejects far
too often. ``clustered=True`` answers the question with items as clusters, as the
clustered McNemar test does for two conditions: with ``Y_ji`` the successes of condition j
on item i summed over strata and ``D_i = Y_·i − mean_j Y_ji`` (centred across conditions),

    Q_cl = Tᵀ V⁺ T,   T = Σ_i D_i,   V = Σ_i D_i D_iᵀ,

the cluster-robust (sandwich) score statistic for equal condition totals (Liang & Zeger
1986), χ² on rank(V) (= k − 1 unless conditions coincide) degrees of freedom. For k = 2 it
is Durkalski et al.'s (2003) ``(Σ_i d_i)² / Σ_i d_i²``, the clustered McNemar statistic.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from robuststats._validation import as_float_array
from robuststats.errors import InputError
from robuststats.stats._common import DegenerateDataWarning, tidy_row

__all__ = ["CochranQResult", "cochran_q"]

PLAIN_METHOD = "Cochran's Q (chi-squared)"
CLUSTERED_METHOD = "item-clustered Cochran's Q (chi-squared)"


@dataclass(frozen=True)
class CochranQResult:
    """Result of :func:`cochran_q`.

    Attributes
    ----------
    statistic : float
        Cochran's Q.
    dof : int
        Degrees of freedom, ``n_conditions − 1``.
    pvalue : float
        ``P(χ²_dof ≥ Q)``.
    n_blocks : int
        Blocks (matched sets) in the data, informative or not.
    n_conditions : int
    method : str
        The test and its reference distribution, ``"Cochran's Q (chi-squared)"`` or
        ``"item-clustered Cochran's Q (chi-squared)"``: the name for a table's ``test``
        column.
    """

    statistic: float
    dof: int
    pvalue: float
    n_blocks: int
    n_conditions: int
    method: str = PLAIN_METHOD

    def to_frame(self) -> pd.DataFrame:
        """One row in the glossary's ``omnibus`` columns that the test knows
        (``n_conditions, question, test, statistic, dof, pvalue``), then ``n_blocks``."""
        row = tidy_row(self, drop=("method",))
        row["question"] = f"do the {self.n_conditions} conditions differ in accuracy?"
        row["test"] = self.method
        declared = ("n_conditions", "question", "test", "statistic", "dof", "pvalue")
        return pd.DataFrame([{**{c: row[c] for c in declared}, "n_blocks": row["n_blocks"]}])


def _cochran_q_iv(x: object, clustered: object) -> np.ndarray:
    """``x`` as ``(n_conditions, n_strata, n_items)`` 0/1 outcomes (2-D: one stratum)."""
    if not isinstance(clustered, (bool, np.bool_)):
        raise InputError(f"`clustered` must be True or False, got {clustered!r}.")
    arr = as_float_array(
        x, "x", ndim=(2, 3), shapes=("(n_conditions, n_blocks)",
                                     "(n_conditions, n_strata, n_items)"),
        what="an array of 0/1 outcomes", low=0.0, high=1.0,
    )
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        raise InputError(f"`x` must contain only 0/1 outcomes, got {float(arr[bad][0])!r}.")
    if arr.shape[0] < 2:
        raise InputError(f"`x` must hold at least 2 conditions (rows), got {arr.shape[0]}.")
    return arr if arr.ndim == 3 else arr[:, None, :]


def q_statistic(x: np.ndarray) -> float:
    """Cochran's Q from its closed form (module docstring); ``nan`` when no block is
    informative. ``x``: validated 0/1 outcomes ``(n_conditions, n_blocks)``."""
    k = x.shape[0]
    cols = x.sum(axis=1)  # C_j
    rows = x.sum(axis=0)  # R_i
    total = cols.sum()
    den = k * total - np.sum(rows**2)
    if den == 0:
        return float("nan")
    return float((k - 1) * (k * np.sum(cols**2) - total**2) / den)


def _pingouin_q(x: np.ndarray) -> float:
    import pingouin  # slow to import (it loads its plotting module); only needed here

    k, m = x.shape
    long = pd.DataFrame({
        "block": np.tile(np.arange(m), k),
        "condition": np.repeat(np.arange(k), m),
        "correct": x.ravel(),
    })
    table = pingouin.cochran(long, dv="correct", within="condition", subject="block")
    return float(table["Q"].iloc[0])


def _clustered_q(x3: np.ndarray) -> tuple[float, int]:
    """Item-clustered statistic and its degrees of freedom (module docstring); (0, 0)
    when no item's totals differ between conditions."""
    y = x3.sum(axis=1)  # (k, n_items): successes per condition and item over strata
    d = y - y.mean(axis=0, keepdims=True)  # D_i, centred across conditions
    t = d.sum(axis=1)
    v = d @ d.T
    rank = int(np.linalg.matrix_rank(v))
    if rank == 0:
        return 0.0, 0
    return float(max(t @ np.linalg.pinv(v) @ t, 0.0)), rank


def _uninformative(what: str, k: int, n_blocks: int, method: str) -> CochranQResult:
    """Statistic 0 and p = 1, with a warning, when no block carries information."""
    warnings.warn(f"{what} has no information; returning statistic 0 and p = 1.",
                  DegenerateDataWarning, stacklevel=3)
    return CochranQResult(statistic=0.0, dof=k - 1, pvalue=1.0, n_blocks=n_blocks,
                          n_conditions=k, method=method)


def cochran_q(x: object, *, clustered: bool = False) -> CochranQResult:
    """Cochran's Q test of equal accuracy of k conditions on the same blocks.

    Parameters
    ----------
    x : array_like, shape (n_conditions, n_blocks) or (n_conditions, n_strata, n_items)
        0/1 outcomes; column i holds the same block (item, seed and noise seed) under
        every condition. A 3-D array is read as ``n_strata × n_items`` blocks.
    clustered : bool
        Treat items as clusters (3-D ``x``: an item's blocks in every stratum are one
        cluster; 2-D ``x``: every block is its own cluster), with the cluster-robust
        statistic of the module docstring. Use it when the strata share items, as they
        always do in a study.

    Returns
    -------
    CochranQResult
        ``statistic`` Q, ``dof = n_conditions − 1`` (clustered: the rank of the cluster
        covariance, normally the same), the χ² ``pvalue``.

    Notes
    -----
    See the module docstring for the formulas and sources. When every block is constant
    (no condition differs from another on any block; clustered: on any item's totals) a
    :class:`DegenerateDataWarning` is issued and the result has statistic 0 and p = 1,
    never NaN.
    """
    x3 = _cochran_q_iv(x, clustered)
    k = x3.shape[0]
    arr = x3.reshape(k, -1)
    n_blocks = arr.shape[1]
    if clustered:
        q, dof = _clustered_q(x3)
        if dof == 0:
            return _uninformative(f"no item's outcomes differ between the {k} conditions: "
                                  "the clustered Cochran's Q", k, n_blocks, CLUSTERED_METHOD)
        return CochranQResult(statistic=q, dof=dof, pvalue=float(special.chdtrc(dof, q)),
                              n_blocks=n_blocks, n_conditions=k, method=CLUSTERED_METHOD)
    informative = arr.min(axis=0) != arr.max(axis=0)
    if not informative.any():
        return _uninformative(f"no block of the {n_blocks} differs between the {k} "
                              "conditions: Cochran's Q", k, n_blocks,
                              PLAIN_METHOD)
    q = max(_pingouin_q(arr[:, informative]), 0.0)
    return CochranQResult(statistic=q, dof=k - 1, pvalue=float(special.chdtrc(k - 1, q)),
                          n_blocks=n_blocks, n_conditions=k)
