"""Multiplicity adjustment across a family of comparisons.

Thin, explicit wrapper of :func:`statsmodels.stats.multitest.multipletests`. The method is
always passed by name: statsmodels' own default is Holm–Šidák (``"hs"``), not Holm.

* ``"holm"``: Holm (1979), Scand J Statist 6:65–70, step-down Bonferroni; controls the
  family-wise error rate under any dependence.
* ``"fdr_bh"``: Benjamini & Hochberg (1995), JRSS B 57:289–300, step-up; controls the
  false discovery rate under independence or positive dependence (PRDS).
* also ``"bonferroni"``, ``"sidak"``, ``"holm-sidak"``, ``"simes-hochberg"``, ``"hommel"``,
  ``"fdr_by"`` (any dependence), ``"fdr_tsbh"``, ``"fdr_tsbky"``.

:func:`local_levels` turns adjusted p-values into the per-comparison significance level
at which each raw p-value is judged, ``t_j = α · p_j / p̃_j``; then ``p_j < t_j`` exactly
when ``p̃_j < α``. For Holm this is ``α / (m − j + 1)`` along the step-down path and for
BH it is ``R α / m`` for the R rejected hypotheses (the false-coverage-rate level of
Benjamini & Yekutieli 2005, JASA 100:71–81). Intervals at level ``1 − t_j`` therefore
agree with the adjusted test.
"""

from __future__ import annotations

import numpy as np

from robuststats.stats._common import InputError, check_choice

__all__ = ["MULTIPLICITY_METHODS", "adjust_pvalues", "local_levels"]

MULTIPLICITY_METHODS = (
    "holm",
    "fdr_bh",
    "bonferroni",
    "sidak",
    "holm-sidak",
    "simes-hochberg",
    "hommel",
    "fdr_by",
    "fdr_tsbh",
    "fdr_tsbky",
)


def _check_pvalues(pvalues: object) -> np.ndarray:
    try:
        p = np.asarray(pvalues, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"`pvalues` must be a 1-D array of probabilities, got {pvalues!r}.") from None
    if p.ndim != 1:
        raise InputError(f"`pvalues` must be 1-D, got shape {p.shape}.")
    bad = ~np.isfinite(p) | (p < 0) | (p > 1)
    if bad.any():
        raise InputError(f"`pvalues` must lie in [0, 1], got {float(p[bad][0])!r}.")
    return p


def adjust_pvalues(pvalues: object, *, method: str, alpha: float = 0.05) -> np.ndarray:
    """Adjusted p-values of a family of comparisons, in the input order.

    ``method`` is required (see module docstring for the choices). ``alpha`` matters only
    for the two-stage FDR methods, whose adjusted values depend on it.
    """
    check_choice(method, "method", MULTIPLICITY_METHODS)
    p = _check_pvalues(pvalues)
    if p.size == 0:
        return p.copy()
    if not 0.0 < float(alpha) < 1.0:
        raise InputError(f"`alpha` must be a number in (0, 1), got {alpha!r}.")
    # imported here: statsmodels takes about a second to import, and `robuststats power`
    # imports this package without needing it
    from statsmodels.stats.multitest import multipletests

    _, adjusted, _, _ = multipletests(p, alpha=alpha, method=method)
    return np.minimum(np.asarray(adjusted, dtype=float), 1.0)


def local_levels(pvalues: object, adjusted: object, *, alpha: float) -> np.ndarray:
    """Per-comparison levels ``t_j = α p_j / p̃_j`` implied by an adjustment.

    Where ``p_j = 0`` the comparison is decided at any level; the Bonferroni level
    ``α / m`` is returned for it.
    """
    p = _check_pvalues(pvalues)
    q = _check_pvalues(adjusted)
    m = max(p.size, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where((p > 0) & (q > 0), alpha * p / q, alpha / m)
    return np.clip(t, 0.0, alpha)
