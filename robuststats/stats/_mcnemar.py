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
* ``"asymptotic-cc"``: Edwards' continuity correction ``(|b − c| − 1)² / (b + c)``, as R's
  ``mcnemar.test(correct = TRUE)``; the correction is truncated at 0 when b = c.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from robuststats.stats._common import (
    ConfidenceInterval,
    DegenerateDataWarning,
    InputError,
    as_outcomes,
    check_choice,
    check_confidence_level,
    tidy_row,
)
from robuststats.stats._paired_ci import PAIRED_CI_METHODS, paired_difference_ci

__all__ = ["MCNEMAR_METHODS", "McNemarResult", "mcnemar", "paired_table"]

MCNEMAR_METHODS = ("exact", "midp", "asymptotic", "asymptotic-cc")
ALTERNATIVES = ("two-sided", "greater", "less")


@dataclass(frozen=True)
class McNemarResult:
    """Result of :func:`mcnemar`.

    Attributes
    ----------
    statistic : float
        ``b`` (discordant pairs favouring x) for ``exact``/``midp``; χ² for the two-sided
        asymptotic methods; the signed z for one-sided asymptotic tests.
    pvalue : float
    estimate : float
        ``acc_x − acc_y = (b − c) / n``.
    confidence_interval : ConfidenceInterval
        Two-sided interval for ``estimate`` by ``ci_method``.
    b, c, n : int
        Discordant counts and number of pairs.
    method, ci_method, alternative : str
    confidence_level : float
    """

    statistic: float
    pvalue: float
    estimate: float
    confidence_interval: ConfidenceInterval
    b: int
    c: int
    n: int
    method: str
    ci_method: str
    alternative: str = "two-sided"
    confidence_level: float = 0.95

    def to_frame(self) -> pd.DataFrame:
        """One-row tidy table of the result."""
        return pd.DataFrame([tidy_row(self)])


def paired_table(x: object, y: object = None) -> tuple[int, int, int, int]:
    """Return the paired counts ``(a, b, c, d)`` from aligned 0/1 arrays or a 2×2 table.

    ``x`` and ``y`` may be 1-D ``(n_items,)`` or 2-D ``(n_strata, n_items)`` arrays of the
    same shape; every (stratum, item) position is one matched pair.
    """
    if y is None:
        try:
            table = np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"`x` must be a 2×2 table of counts, got {x!r}.") from None
        if table.shape != (2, 2):
            raise InputError(
                f"`x` must be a 2×2 table when `y` is not given, got shape {table.shape}."
            )
        if np.any(table < 0) or np.any(table != np.round(table)) or not np.all(np.isfinite(table)):
            raise InputError(f"`x` must contain non-negative integer counts, got {table.tolist()}.")
        a, b, c, d = (int(v) for v in table.ravel())
    else:
        xa = as_outcomes(x, "x", binary=True)
        ya = as_outcomes(y, "y", binary=True)
        if xa.shape != ya.shape:
            raise InputError(
                f"`x` and `y` must be aligned outcomes of the same shape, got {xa.shape} "
                f"and {ya.shape}."
            )
        a = int(np.sum((xa == 1) & (ya == 1)))
        b = int(np.sum((xa == 1) & (ya == 0)))
        c = int(np.sum((xa == 0) & (ya == 1)))
        d = int(np.sum((xa == 0) & (ya == 0)))
    if a + b + c + d == 0:
        raise InputError("the paired table is empty: at least one pair is needed.")
    return a, b, c, d


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

    Notes
    -----
    With no discordant pairs (b = c = 0) the test has no information: the result has
    statistic 0 and p = 1, and a :class:`DegenerateDataWarning` is issued. The score
    intervals stay informative (Tango's is ``±z²/(n + z²)``), the Wald interval is [0, 0].
    """
    check_choice(method, "method", MCNEMAR_METHODS)
    check_choice(alternative, "alternative", ALTERNATIVES)
    check_choice(ci_method, "ci_method", PAIRED_CI_METHODS)
    level = check_confidence_level(confidence_level)
    a, b, c, d = paired_table(x, y)
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
        b=b,
        c=c,
        n=n,
        method=method,
        ci_method=ci_method,
        alternative=alternative,
        confidence_level=level,
    )
