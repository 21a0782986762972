"""McNemar tests combined over strata (training seeds, or seed × noise seed).

Each ``(stratum, item)`` position is a matched pair of outcomes of conditions x and y.

* ``"mantel-haenszel"``: the Cochran–Mantel–Haenszel statistic with every matched pair as
  its own stratum reduces to ``Z = Σ_s (b_s − c_s) / sqrt(Σ_s (b_s + c_s))`` (Agresti 2013,
  Categorical Data Analysis, 3rd ed., Sec. 11.1; Mantel & Haenszel 1959), i.e. McNemar's
  statistic on the pooled discordant counts. The common difference is the MH risk
  difference with pairs as strata, ``Σ(b_s − c_s) / Σ n_s``; its interval is Tango's
  score interval on the pooled table, which inverts the same score statistic. This
  treats all pairs as independent.
* ``"clustered"``: the same item is evaluated in every stratum, so its pairs are
  correlated. Durkalski et al. (2003), Stat Med 22:2417–2428, treat each item as a
  cluster with ``d_i = b_i − c_i`` (discordance summed over strata):
  ``χ² = (Σ_i d_i)² / Σ_i d_i²``. The interval for the difference is the Wald interval
  with the cluster (ratio-estimator) variance of Obuchowski (1998), Stat Med 17:1495,
  ``Var(δ̂) = K/(K − 1) · Σ_i (d_i − m δ̂)² / N²`` for K items, m strata, N = K m pairs.

With one stratum both methods equal the ordinary asymptotic McNemar test.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import special, stats

from robuststats.stats._common import (
    ConfidenceInterval,
    DegenerateDataWarning,
    InputError,
    as_outcomes,
    check_choice,
    check_confidence_level,
)
from robuststats.stats._mcnemar import McNemarResult
from robuststats.stats._paired_ci import paired_difference_ci

__all__ = ["STRATIFIED_METHODS", "mcnemar_stratified"]

STRATIFIED_METHODS = ("mantel-haenszel", "clustered")


def _as_strata(x: object, name: str) -> np.ndarray:
    arr = as_outcomes(x, name, binary=True)
    return arr if arr.ndim == 2 else arr[None, :]


def mcnemar_stratified(
    x: object,
    y: object,
    *,
    method: str = "mantel-haenszel",
    confidence_level: float = 0.95,
) -> McNemarResult:
    """Stratified McNemar test of equal accuracy of x and y over matched pairs.

    Parameters
    ----------
    x, y : array_like, shape (n_strata, n_items)
        0/1 outcomes; row s of x and y are the two conditions in stratum s (e.g. training
        seed, or seed × noise seed), column i the same item in every row.
    method : {"mantel-haenszel", "clustered"}
        See the module docstring. ``"clustered"`` accounts for the same items recurring
        in every stratum.
    confidence_level : float
        Level of the two-sided interval for ``acc_x − acc_y``.

    Returns
    -------
    McNemarResult
        ``statistic`` is χ² on 1 df, ``b``/``c``/``n`` are pooled over strata, and
        ``ci_method`` is ``"tango"`` (MH) or ``"cluster-wald"``.

    Notes
    -----
    With no discordant pairs at all a :class:`DegenerateDataWarning` is issued and the
    result has statistic 0 and p = 1; the interval is Tango's ``±z²/(N + z²)``.
    """
    check_choice(method, "method", STRATIFIED_METHODS)
    level = check_confidence_level(confidence_level)
    xa = _as_strata(x, "x")
    ya = _as_strata(y, "y")
    if xa.shape != ya.shape:
        raise InputError(
            f"`x` and `y` must have the same shape (n_strata, n_items), got {xa.shape} "
            f"and {ya.shape}."
        )
    m, k = xa.shape
    disc_b = xa * (1 - ya)  # x correct, y wrong
    disc_c = (1 - xa) * ya
    b, c = int(disc_b.sum()), int(disc_c.sum())
    n = m * k
    a = int((xa * ya).sum())
    d = n - a - b - c
    estimate = (b - c) / n
    if b + c == 0:
        warnings.warn(
            f"no discordant pairs in {m} strata × {k} items: the test has no information; "
            "returning statistic 0 and p = 1.",
            DegenerateDataWarning,
            stacklevel=2,
        )
        ci = paired_difference_ci(a, b, c, d, confidence_level=level, method="tango")
        return McNemarResult(0.0, 1.0, estimate, ci, b, c, n, method, "tango",
                             "two-sided", level)
    if method == "mantel-haenszel":
        chi2 = (b - c) ** 2 / (b + c)
        ci = paired_difference_ci(a, b, c, d, confidence_level=level, method="tango")
        ci_method = "tango"
    else:
        diff_i = (disc_b - disc_c).sum(axis=0)  # d_i per item
        chi2 = float(diff_i.sum() ** 2 / np.sum(diff_i**2))
        z = float(special.ndtri(0.5 + level / 2.0))
        var = k / max(k - 1, 1) * np.sum((diff_i - m * estimate) ** 2) / n**2
        half = z * math.sqrt(var)
        ci = ConfidenceInterval(max(-1.0, estimate - half), min(1.0, estimate + half))
        ci_method = "cluster-wald"
    return McNemarResult(
        statistic=float(chi2), pvalue=float(stats.chi2.sf(chi2, 1)), estimate=estimate,
        confidence_interval=ci, b=b, c=c, n=n, method=method, ci_method=ci_method,
        alternative="two-sided", confidence_level=level,
    )
