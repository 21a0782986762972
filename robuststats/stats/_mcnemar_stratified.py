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

from robuststats._validation import (
    as_outcomes,
    check_choice,
    check_confidence_level,
    check_same_shape,
)
from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning
from robuststats.stats._mcnemar import McNemarResult
from robuststats.stats._paired_ci import paired_difference_ci

__all__ = ["STRATIFIED_METHODS", "mcnemar_stratified"]

STRATIFIED_METHODS = ("mantel-haenszel", "clustered")


def _as_strata(x: object, name: str) -> np.ndarray:
    arr = as_outcomes(x, name, binary=True)
    return arr if arr.ndim == 2 else arr[None, :]


def _mcnemar_stratified_iv(x, y, method, confidence_level):
    check_choice(method, "method", STRATIFIED_METHODS)
    level = check_confidence_level(confidence_level)
    xa = _as_strata(x, "x")
    ya = _as_strata(y, "y")
    check_same_shape({"x": xa, "y": ya}, "(n_strata, n_items)")
    return xa, ya, level


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
        ``statistic`` is χ² on 1 df, ``estimate`` is ``acc_x − acc_y``,
        ``n_a_only``/``n_b_only`` (b and c) are pooled over strata, and ``ci_method`` is
        ``"tango"`` (MH) or ``"cluster-wald"``.

    Notes
    -----
    With no discordant pairs at all (or, for ``"clustered"``, when they cancel within every
    item) a :class:`DegenerateDataWarning` is issued and the result has statistic 0 and
    p = 1; the interval is Tango's on the pooled table (``±z²/(N + z²)`` without
    discordant pairs).
    """
    xa, ya, level = _mcnemar_stratified_iv(x, y, method, confidence_level)
    m, k = xa.shape
    disc_b = xa * (1 - ya)  # x correct, y wrong
    disc_c = (1 - xa) * ya
    b, c = int(disc_b.sum()), int(disc_c.sum())
    n = m * k
    a = int((xa * ya).sum())
    d = n - a - b - c
    estimate = (b - c) / n
    counts = dict(n_a_only=b, n_b_only=c, n_strata=m, n_items=k, accuracy_a=(a + b) / n,
                  accuracy_b=(a + c) / n)
    diff_i = (disc_b - disc_c).sum(axis=0)  # d_i per item
    # clustered: discordant pairs that cancel within every item (d_i = 0) leave no
    # item-level information either, and Durkalski's χ² would be 0/0
    empty = b + c == 0 or (method == "clustered" and not np.any(diff_i))
    if empty:
        what = ("no discordant pairs" if b + c == 0 else
                "the discordant pairs cancel within every item (all d_i = 0)")
        warnings.warn(
            f"{what} in {m} strata × {k} items: the test has no information; "
            "returning statistic 0 and p = 1 with Tango's interval.",
            DegenerateDataWarning,
            stacklevel=2,
        )
        ci = paired_difference_ci(a, b, c, d, confidence_level=level, method="tango")
        return McNemarResult(statistic=0.0, pvalue=1.0, estimate=estimate,
                             confidence_interval=ci, **counts, method=method,
                             ci_method="tango", alternative="two-sided",
                             confidence_level=level)
    if method == "mantel-haenszel":
        chi2 = (b - c) ** 2 / (b + c)
        ci = paired_difference_ci(a, b, c, d, confidence_level=level, method="tango")
        ci_method = "tango"
    else:
        chi2 = float(diff_i.sum() ** 2 / np.sum(diff_i**2))
        z = float(special.ndtri(0.5 + level / 2.0))
        var = k / max(k - 1, 1) * np.sum((diff_i - m * estimate) ** 2) / n**2
        half = z * math.sqrt(var)
        ci = ConfidenceInterval(max(-1.0, estimate - half), min(1.0, estimate + half))
        ci_method = "cluster-wald"
    return McNemarResult(
        statistic=float(chi2), pvalue=float(stats.chi2.sf(chi2, 1)), estimate=estimate,
        confidence_interval=ci, **counts, method=method, ci_method=ci_method,
        alternative="two-sided", confidence_level=level,
    )
