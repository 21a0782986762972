"""Multiplicity adjustment across a family of comparisons.

Thin, explicit wrapper of :func:`statsmodels.stats.multitest.multipletests`. The method is
always passed by name: statsmodels' own default is Holm–Šidák (``"hs"``), not Holm.

* ``"holm"``: Holm (1979), Scand J Statist 6:65–70, step-down Bonferroni; controls the
  family-wise error rate under any dependence.
* ``"fdr_bh"``: Benjamini & Hochberg (1995), JRSS B 57:289–300, step-up; controls the
  false discovery rate under independence or positive dependence (PRDS).
* also ``"bonferroni"``, ``"sidak"``, ``"holm-sidak"``, ``"simes-hochberg"``, ``"hommel"``,
  ``"fdr_by"`` (any dependence), ``"fdr_tsbh"``, ``"fdr_tsbky"``;
* ``"none"``: no adjustment, the p-values are returned unchanged (listed so that every
  caller accepts the same names).

:func:`local_levels` turns adjusted p-values into the per-comparison significance level
at which each raw p-value is judged, ``t_j = α · p_j / p̃_j``; then ``p_j < t_j`` exactly
when ``p̃_j < α``. For Holm this is ``α / (m − j + 1)`` along the step-down path and for
BH it is ``R α / m`` for the R rejected hypotheses (the false-coverage-rate level of
Benjamini & Yekutieli 2005, JASA 100:71–81). Intervals at level ``1 − t_j`` therefore
agree with the adjusted test.
"""

from __future__ import annotations

import numpy as np

from robuststats._validation import as_probabilities, check_choice, check_probability
from robuststats.errors import InputError

__all__ = ["MULTIPLICITY_METHODS", "adjust_pvalues", "local_levels"]

#: The one list of multiplicity procedures (the study file, the CLI and the analysis take
#: theirs from here). ``"none"`` is a procedure too: it returns the p-values unchanged.
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
    "none",
)


def _adjust_iv(pvalues, method, alpha):
    check_choice(method, "method", MULTIPLICITY_METHODS)
    p = as_probabilities(pvalues, "pvalues")
    a = check_probability(alpha, "alpha")
    return p, a


def adjust_pvalues(pvalues: object, *, method: str, alpha: float = 0.05) -> np.ndarray:
    """Adjusted p-values of a family of comparisons, in the input order.

    ``method`` is required (see the module docstring for the choices); ``"none"`` returns
    a copy of ``pvalues``. ``alpha`` matters only for the two-stage FDR methods, whose
    adjusted values depend on it.
    """
    p, a = _adjust_iv(pvalues, method, alpha)
    if p.size == 0 or method == "none":
        return p.copy()
    # imported here: statsmodels takes about a second to import, and `robuststats power`
    # imports this package without needing it
    from statsmodels.stats.multitest import multipletests

    _, adjusted, _, _ = multipletests(p, alpha=a, method=method)
    return np.minimum(np.asarray(adjusted, dtype=float), 1.0)


def local_levels(pvalues: object, adjusted: object, *, alpha: float) -> np.ndarray:
    """Per-comparison levels ``t_j = α p_j / p̃_j`` implied by an adjustment.

    Where ``p_j = 0`` the comparison is decided at any level; the Bonferroni level
    ``α / m`` is returned for it.
    """
    p = as_probabilities(pvalues, "pvalues")
    q = as_probabilities(adjusted, "adjusted")
    alpha = check_probability(alpha, "alpha")
    if p.shape != q.shape:
        raise InputError(f"`pvalues` and `adjusted` must have one shape, got {p.shape} "
                         f"and {q.shape}.")
    m = max(p.size, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where((p > 0) & (q > 0), alpha * p / q, alpha / m)
    return np.clip(t, 0.0, alpha)
