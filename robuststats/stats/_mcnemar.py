"""McNemar tests for two conditions evaluated on the same items.

Table convention (condition x in rows, y in columns, "1" = correct)::

    [[a, b],      a: both correct        b: x correct, y wrong
     [c, d]]      c: x wrong, y correct  d: both wrong

Only the discordant pairs b and c carry information about ``δ = acc_x − acc_y = (b − c)/n``.

Methods (Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91):

* ``"exact"``: conditional binomial test, ``b | b + c ~ Bin(b + c, 1/2)`` under H0;
  two-sided p = min(1, 2 · P(X ≤ min(b, c))), as R's ``binom.test(b, b + c)``.
* ``"midp"``: the same with half the probability of the observed value,
  p = 2 · P(X ≤ min(b, c)) − P(X = min(b, c)) (recommended by Fagerland et al.).
* ``"asymptotic"``: ``χ² = (b − c)² / (b + c)`` on 1 df (McNemar 1947).
* ``"asymptotic-cc"``: Edwards' continuity correction ``max(|b − c| − 1, 0)² / (b + c)``.
  This equals R's ``mcnemar.test(correct = TRUE)`` whenever b + c > 0: R applies the
  correction only when b ≠ c (``any(x - t(x) != 0)`` in its source), so it too gives 0
  for b = c. With b = c = 0, R returns NaN; see the degenerate case of :func:`mcnemar`.

Sign rule: every difference is first minus second, ``acc_x − acc_y``; ``n_a_only`` (b)
counts the pairs where the first condition alone is correct.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from robuststats._validation import (
    as_float_array,
    as_outcomes,
    check_choice,
    check_confidence_level,
    check_same_shape,
)
from robuststats.errors import InputError
from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning, tidy_row
from robuststats.stats._paired_ci import PAIRED_CI_METHODS, paired_difference_ci

__all__ = ["MCNEMAR_METHODS", "TEST_NAMES", "McNemarResult", "mcnemar", "paired_table"]

MCNEMAR_METHODS = ("exact", "midp", "asymptotic", "asymptotic-cc")
ALTERNATIVES = ("two-sided", "greater", "less")


#: ``method`` -> the test's name in the ``test`` column of tables
TEST_NAMES = {
    "exact": "McNemar exact",
    "midp": "McNemar mid-p",
    "asymptotic": "McNemar asymptotic",
    "asymptotic-cc": "McNemar asymptotic, continuity-corrected",
    "mantel-haenszel": "stratified McNemar (mantel-haenszel)",
    "clustered": "stratified McNemar (clustered)",
}

#: counts above 2**53 are not exact in float64, which the p-values and intervals use
_MAX_COUNT = 2**53


@dataclass(frozen=True)
class McNemarResult:
    """Result of :func:`mcnemar` and :func:`mcnemar_stratified`. Differences are x − y.

    Attributes
    ----------
    statistic : float
        The test statistic: ``n_a_only`` (discordant pairs favouring x) for
        ``exact``/``midp``; χ² on 1 df for the two-sided asymptotic and stratified
        methods; the signed z for one-sided asymptotic tests.
    pvalue : float
    estimate : float
        ``acc_x − acc_y = (n_a_only − n_b_only) / n``.
    confidence_interval : ConfidenceInterval
        Two-sided interval for ``estimate`` by ``ci_method``.
    n_a_only, n_b_only : int
        Discordant pairs: x correct and y wrong (b in the 2×2 table), x wrong and y
        correct (c), pooled over strata.
    n_strata, n_items : int
        Strata and items; ``n = n_strata · n_items`` matched pairs (a 2×2 table is one
        stratum of ``n`` items).
    accuracy_a, accuracy_b : float
        Accuracies of x and y over the pairs.
    method, ci_method, alternative : str
    confidence_level : float
        Level of ``confidence_interval``.
    """

    statistic: float
    pvalue: float
    estimate: float
    confidence_interval: ConfidenceInterval
    n_a_only: int
    n_b_only: int
    n_strata: int
    n_items: int
    accuracy_a: float
    accuracy_b: float
    method: str
    ci_method: str
    alternative: str = "two-sided"
    confidence_level: float = 0.95

    @property
    def n(self) -> int:
        """Number of matched pairs, ``n_strata · n_items``."""
        return self.n_strata * self.n_items

    @property
    def test(self) -> str:
        """The test's name, as in the ``test`` column."""
        return TEST_NAMES[self.method]

    def to_frame(self) -> pd.DataFrame:
        """One-row tidy table in the column names and order of the glossary's ``tests``
        table (``method`` appears as the test's name in ``test``)."""
        row = tidy_row(self, rename={"method": "test"}, table="tests")
        row["test"] = self.test
        return pd.DataFrame([row])


def _check_table(x: object) -> tuple[int, int, int, int]:
    table = as_float_array(x, "x", ndim=2, what="a 2×2 table of counts [[a, b], [c, d]]")
    if table.shape != (2, 2):
        raise InputError(f"`x` must be a 2×2 table when `y` is not given, got shape "
                         f"{table.shape}.")
    if np.any(table < 0) or np.any(table != np.round(table)) or np.any(table > _MAX_COUNT):
        raise InputError(f"`x` must contain non-negative integer counts up to 2**53, got "
                         f"{table.tolist()}.")
    a, b, c, d = (int(v) for v in table.ravel())
    return a, b, c, d


def _check_pairs(x: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    xa = as_outcomes(x, "x", binary=True)
    ya = as_outcomes(y, "y", binary=True)
    check_same_shape({"x": xa, "y": ya}, "(n_items,) or (n_strata, n_items)")
    return xa, ya


def _paired_counts(x: object, y: object) -> tuple[int, int, int, int, int]:
    """``(a, b, c, d, n_strata)`` from a 2×2 table (``y`` None) or aligned 0/1 arrays."""
    if y is None:
        a, b, c, d = _check_table(x)
        n_strata = 1
    else:
        xa, ya = _check_pairs(x, y)
        a = int(np.sum((xa == 1) & (ya == 1)))
        b = int(np.sum((xa == 1) & (ya == 0)))
        c = int(np.sum((xa == 0) & (ya == 1)))
        d = int(np.sum((xa == 0) & (ya == 0)))
        n_strata = 1 if xa.ndim == 1 else xa.shape[0]
    if a + b + c + d == 0:
        raise InputError("`x` must hold at least one pair, got an empty paired table.")
    return a, b, c, d, n_strata


def paired_table(x: object, y: object = None) -> tuple[int, int, int, int]:
    """Return the paired counts ``(a, b, c, d)`` from aligned 0/1 arrays or a 2×2 table.

    ``x`` and ``y`` may be 1-D ``(n_items,)`` or 2-D ``(n_strata, n_items)`` arrays of the
    same shape; every (stratum, item) position is one matched pair.
    """
    return _paired_counts(x, y)[:4]


def _mcnemar_iv(x, y, method, alternative, confidence_level, ci_method):
    check_choice(method, "method", MCNEMAR_METHODS)
    check_choice(alternative, "alternative", ALTERNATIVES)
    check_choice(ci_method, "ci_method", PAIRED_CI_METHODS)
    level = check_confidence_level(confidence_level)
    return (*_paired_counts(x, y), level)


def _binomial_pvalue(b: int, c: int, alternative: str, mid: bool) -> float:
    m = b + c
    if alternative == "greater":  # acc_x > acc_y  <=>  b large
        tail = stats.binom.sf(b - 1, m, 0.5)
        return float(tail - 0.5 * stats.binom.pmf(b, m, 0.5)) if mid else float(tail)
    if alternative == "less":
        tail = stats.binom.cdf(b, m, 0.5)
        return float(tail - 0.5 * stats.binom.pmf(b, m, 0.5)) if mid else float(tail)
    k = min(b, c)
    tail = stats.binom.cdf(k, m, 0.5)
    if mid:
        return float(min(1.0, 2.0 * tail - stats.binom.pmf(k, m, 0.5)))
    return float(min(1.0, 2.0 * tail))


def _asymptotic(b: int, c: int, alternative: str, cc: bool) -> tuple[float, float]:
    m = b + c
    if alternative == "two-sided":
        diff = abs(b - c) - (1.0 if cc else 0.0)
        chi2 = max(diff, 0.0) ** 2 / m
        return chi2, float(stats.chi2.sf(chi2, 1))
    shift = (1.0 if alternative == "greater" else -1.0) if cc else 0.0
    z = (b - c - shift) / math.sqrt(m)
    if alternative == "greater":
        return z, float(stats.norm.sf(z))
    return z, float(stats.norm.cdf(z))


def mcnemar(
    x: object,
    y: object = None,
    *,
    method: str = "exact",
    alternative: str = "two-sided",
    confidence_level: float = 0.95,
    ci_method: str = "newcombe",
) -> McNemarResult:
    """McNemar test of equal accuracy of two conditions on the same items.

    Parameters
    ----------
    x, y : array_like
        Aligned 0/1 outcomes ``(n_items,)`` (or ``(n_strata, n_items)``, pooled) of the
        two conditions, or ``x`` a 2×2 table ``[[a, b], [c, d]]`` and ``y=None``.
    method : {"exact", "midp", "asymptotic", "asymptotic-cc"}
        See the module docstring for formulas and references.
    alternative : {"two-sided", "greater", "less"}
        ``"greater"``: acc_x > acc_y.
    confidence_level : float
        Level of the two-sided interval for ``acc_x − acc_y``.
    ci_method : {"newcombe", "tango", "wald"}
        Newcombe (1998) method 10, Tango (1998) score, or Wald.

    Returns
    -------
    McNemarResult
        ``estimate`` is ``acc_x − acc_y``; ``n_a_only``/``n_b_only`` are b and c.

    Notes
    -----
    With no discordant pairs (b = c = 0) the test has no information: the result has
    statistic 0 and p = 1, and a :class:`DegenerateDataWarning` is issued. The score
    intervals stay informative (Tango's is ``±z²/(n + z²)``), the Wald interval is [0, 0].
    """
    a, b, c, d, n_strata, level = _mcnemar_iv(x, y, method, alternative, confidence_level,
                                              ci_method)
    n = a + b + c + d
    if b + c == 0:
        warnings.warn(
            f"no discordant pairs among {n} pairs: the McNemar test has no information; "
            "returning statistic 0 and p = 1.",
            DegenerateDataWarning,
            stacklevel=2,
        )
        statistic, pvalue = 0.0, 1.0
    elif method in ("exact", "midp"):
        statistic = float(b)
        pvalue = _binomial_pvalue(b, c, alternative, mid=method == "midp")
    else:
        statistic, pvalue = _asymptotic(b, c, alternative, cc=method == "asymptotic-cc")
    ci = paired_difference_ci(a, b, c, d, confidence_level=level, method=ci_method)
    return McNemarResult(
        statistic=float(statistic),
        pvalue=float(min(max(pvalue, 0.0), 1.0)),
        estimate=(b - c) / n,
        confidence_interval=ci,
        n_a_only=b,
        n_b_only=c,
        n_strata=n_strata,
        n_items=n // n_strata,
        accuracy_a=(a + b) / n,
        accuracy_b=(a + c) / n,
        method=method,
        ci_method=ci_method,
        alternative=alternative,
        confidence_level=level,
    )
