"""Hypothesis criteria and their verdicts: VERIFIED, FALSIFIED or INCONCLUSIVE.

Criteria format (``docs/architecture.md``; used verbatim in study files)::

    id: H1
    statement: "Forward-only training retains more accuracy at 5% noise than fwd+bwd"
    metric: accuracy        # accuracy | retention
    a: E8c                  # the claim is about (a − b)
    b: E8b
    eval_noise: 0.05        # for retention: the noisy level; clean is eval_noise 0
    relation: greater       # greater | less | equivalent
    margin: 0.05

Decision rule. Let ``[L, U]`` be the two-sided interval for ``δ = a − b`` at level ``1 − t``.

* greater: VERIFIED if ``L > margin``, FALSIFIED if ``U < margin``;
* less: VERIFIED if ``U < margin``, FALSIFIED if ``L > margin``;
* equivalent: VERIFIED if ``−margin < L`` and ``U < margin``; FALSIFIED if
  ``L ≥ margin`` or ``U ≤ −margin``;
* otherwise INCONCLUSIVE.

The p-value reported is the smallest ``t`` at which the interval decides (it is the
two-sided p-value of H0: δ = margin for greater/less, and twice the larger of the two
one-sided p-values (TOST) for a verified-looking equivalence). Without multiplicity
``t = 1 − confidence_level``. With a multiplicity method (default Holm), the p-values of
the family are adjusted and each interval is reported at level ``1 − t_j`` with
``t_j = α p_j / p̃_j`` (see :func:`local_levels`), so the interval decides exactly when
the adjusted p-value is below ``α = 1 − confidence_level``. Equivalence read from the
two-sided ``1 − α`` interval is TOST at ``α/2`` per side (conservative against the usual
``1 − 2α`` interval), so that one interval decides every verdict. Using two-sided tests for
directional decisions follows Shaffer (1980), Ann. Stat. 8:1342–1347.

Which interval. A hypothesis is about training procedures, so with several training seeds
the seeds are random as well as the items: ``acc_a − acc_b`` gets the seed-random t
(:func:`robuststats.stats.seed_random_test`: crossed two-way ANOVA variance of the per-item
differences, Satterthwaite degrees of freedom) and ``retention(a) − retention(b)`` the same
t on its delta-method linearization (:func:`robuststats.stats.seed_random_retention_test`).
With one seed, accuracy of one evaluation per item uses Tango's (1998) score interval,
accuracy averaged over noise seeds the paired t over items, and retention a BCa bootstrap
over items. The seed-random t never decides on discordant pairs that differ by at most one
(``|t| ≤ 1``, ``docs/statistics.md`` §9); the clustered McNemar test of the trained models
is recorded in ``detail`` as a diagnostic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from robuststats._fields import from_mapping
from robuststats._validation import (
    check_choice,
    check_confidence_level,
    check_n_resamples,
    check_number,
    check_rng,
    check_str,
)
from robuststats.errors import InputError
from robuststats.glossary import TABLE_COLUMNS
from robuststats.stats._common import ConfidenceInterval, Record, tidy_row
from robuststats.stats._estimability import clip_interval
from robuststats.stats._multiplicity import MULTIPLICITY_METHODS, adjust_pvalues, local_levels

__all__ = [
    "VERDICTS",
    "Hypothesis",
    "HypothesisResult",
    "evaluate_hypotheses",
    "evaluate_hypothesis",
]

VERDICTS = ("VERIFIED", "FALSIFIED", "INCONCLUSIVE")
METRICS = ("accuracy", "retention")
RELATIONS = ("greater", "less", "equivalent")
_REQUIRED = ("id", "metric", "a", "b", "eval_noise", "relation")
_NUMBERS = ("eval_noise", "margin")


@dataclass(frozen=True)
class Hypothesis(Record):
    """A claim about ``a − b`` for ``metric`` at ``eval_noise`` (see module docstring)."""

    id: str
    metric: str
    a: str
    b: str
    eval_noise: float
    relation: str
    margin: float = 0.0
    statement: str = ""

    def __post_init__(self) -> None:
        check_str(self.id, "id")
        where = f"hypothesis {self.id!r}"
        try:
            check_choice(self.metric, "metric", METRICS)
            check_choice(self.relation, "relation", RELATIONS)
            check_str(self.a, "a")
            check_str(self.b, "b")
            check_number(self.eval_noise, "eval_noise", low=0.0)
            check_number(self.margin, "margin")
            check_str(self.statement, "statement", empty=True)
        except InputError as err:
            raise InputError(f"{where}: {err}") from None
        if self.a == self.b:
            raise InputError(f"{where}: `a` and `b` must differ, got {self.a!r} twice.")
        if self.metric == "retention" and self.eval_noise == 0:
            raise InputError(
                f"{where}: retention needs a noisy level, `eval_noise` > 0, got {self.eval_noise!r}."
            )
        if self.relation == "equivalent" and self.margin <= 0:
            raise InputError(
                f"{where}: an equivalence `margin` must be > 0, got {self.margin!r}."
            )

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Hypothesis:
        """Build from a mapping; unknown keys and missing required keys raise InputError."""
        hid = d.get("id", "?") if isinstance(d, Mapping) else "?"
        if isinstance(d, Mapping):  # a level or margin written as 1 is the number 1.0
            d = {k: float(v) if k in _NUMBERS and isinstance(v, int) and not isinstance(v, bool)
                 else v for k, v in d.items()}
        return from_mapping(cls, d, f"hypothesis {hid!r}", required=_REQUIRED)


@dataclass(frozen=True)
class HypothesisResult:
    """Verdict on one :class:`Hypothesis` with the test and interval that decided it.

    Attributes
    ----------
    id, statement, metric, a, b, eval_noise, relation, margin
        The hypothesis.
    estimate : float
        Point estimate of ``a − b``.
    confidence_interval : ConfidenceInterval
        The interval that decided the verdict, at ``confidence_level``.
    confidence_level : float
        Its level: ``1 − t`` with ``t`` the local level of the multiplicity procedure
        (``ci_level`` in tables).
    ci_method : str
        How the interval was computed.
    pvalue, pvalue_adjusted : float
        The raw decision p-value and its adjusted value (equal without multiplicity).
    multiplicity : str
        The procedure applied to the family (``"none"`` for none).
    verdict : str
        VERIFIED, FALSIFIED or INCONCLUSIVE.
    reason : str
        The comparison of the interval with the margin that gave the verdict.
    detail : str
        The evidence: data, test, and the interval level under multiplicity.
    """

    id: str
    statement: str
    metric: str
    a: str
    b: str
    eval_noise: float
    relation: str
    margin: float
    estimate: float
    confidence_interval: ConfidenceInterval
    confidence_level: float
    ci_method: str
    pvalue: float
    pvalue_adjusted: float
    multiplicity: str
    verdict: str
    reason: str
    detail: str

    def to_frame(self) -> pd.DataFrame:
        """One row in the glossary's ``hypotheses`` columns and order, then ``detail``."""
        return pd.DataFrame([tidy_row(self, table="hypotheses")])


def _decision_pvalue(h: Hypothesis, tails) -> float:
    m = h.margin
    if h.relation in ("greater", "less"):
        low, high = tails(m)
        return min(1.0, 2.0 * min(low, high))
    low_neg, _ = tails(-m)
    _, high_pos = tails(m)
    verify = 2.0 * max(low_neg, high_pos)
    falsify = 2.0 * min(tails(m)[0], tails(-m)[1])
    return min(1.0, verify, falsify)


def _verdict(h: Hypothesis, ci: ConfidenceInterval) -> str:
    return _decide(h, ci)[0]


def _decide(h: Hypothesis, ci: ConfidenceInterval) -> tuple[str, str]:
    """The verdict and its reason: which bound passed the margin, or that none did."""
    m, low, high = h.margin, ci.low, ci.high
    interval = f"[{low:.4g}, {high:.4g}]"
    if h.relation == "greater":
        if low > m:
            return "VERIFIED", f"ci_low {low:.4g} > margin {m:.4g}"
        if high < m:
            return "FALSIFIED", f"ci_high {high:.4g} < margin {m:.4g}"
        return "INCONCLUSIVE", f"interval {interval} contains margin {m:.4g}"
    if h.relation == "less":
        if high < m:
            return "VERIFIED", f"ci_high {high:.4g} < margin {m:.4g}"
        if low > m:
            return "FALSIFIED", f"ci_low {low:.4g} > margin {m:.4g}"
        return "INCONCLUSIVE", f"interval {interval} contains margin {m:.4g}"
    if -m < low and high < m:
        return "VERIFIED", f"interval {interval} lies inside (-{m:.4g}, {m:.4g})"
    if low >= m:
        return "FALSIFIED", f"ci_low {low:.4g} ≥ margin {m:.4g}"
    if high <= -m:
        return "FALSIFIED", f"ci_high {high:.4g} ≤ -margin -{m:.4g}"
    return "INCONCLUSIVE", f"interval {interval} crosses ±{m:.4g}"


def _as_hypothesis(h: Hypothesis | Mapping[str, object]) -> Hypothesis:
    return h if isinstance(h, Hypothesis) else Hypothesis.from_dict(h)


def evaluate_hypotheses(
    hypotheses: Sequence[Hypothesis | Mapping[str, object]],
    outcomes: pd.DataFrame,
    *,
    confidence_level: float = 0.95,
    n_resamples: int = 10_000,
    rng: np.random.Generator | int | None = None,
    clean_noise: float = 0.0,
    multiplicity: str | None = "holm",
) -> pd.DataFrame:
    """Verdicts for a family of hypotheses, one row each.

    Columns: the glossary's ``hypotheses`` table, ``id, statement, metric, a, b,
    eval_noise, relation, margin, estimate, ci_low, ci_high, ci_level, ci_method, pvalue,
    pvalue_adjusted, multiplicity, verdict, reason``, then ``detail``.

    ``multiplicity``: a name of :data:`MULTIPLICITY_METHODS` (``"holm"``, ``"fdr_bh"``,
    ...); ``"none"`` (or ``None``) gives per-hypothesis intervals at ``confidence_level``.
    """
    results = _evaluate(hypotheses, outcomes, confidence_level=confidence_level,
                        n_resamples=n_resamples, rng=rng, clean_noise=clean_noise,
                        multiplicity=multiplicity)
    if not results:
        return pd.DataFrame(columns=[*TABLE_COLUMNS["hypotheses"], "detail"])
    return pd.concat([r.to_frame() for r in results], ignore_index=True)


def evaluate_hypothesis(
    hypothesis: Hypothesis | Mapping[str, object],
    outcomes: pd.DataFrame,
    *,
    confidence_level: float = 0.95,
    n_resamples: int = 10_000,
    rng: np.random.Generator | int | None = None,
    clean_noise: float = 0.0,
) -> HypothesisResult:
    """Verdict for a single hypothesis (no multiplicity adjustment)."""
    return _evaluate([hypothesis], outcomes, confidence_level=confidence_level,
                     n_resamples=n_resamples, rng=rng, clean_noise=clean_noise,
                     multiplicity="none")[0]


def _evaluate_iv(hypotheses, outcomes, confidence_level, n_resamples, rng, clean_noise,
                 multiplicity):
    level = check_confidence_level(confidence_level)
    b = check_n_resamples(n_resamples)
    gen = check_rng(rng)
    clean = check_number(clean_noise, "clean_noise", low=0.0)
    procedure = "none" if multiplicity is None else check_choice(
        multiplicity, "multiplicity", MULTIPLICITY_METHODS)
    items = None
    if not isinstance(hypotheses, (str, bytes, Mapping)):
        try:
            items = list(hypotheses)
        except TypeError:  # not iterable, or a 0-d array
            pass
    if items is None:
        raise InputError(f"`hypotheses` must be a sequence of hypotheses, got "
                         f"{type(hypotheses).__name__}.")
    if not isinstance(outcomes, pd.DataFrame):
        raise InputError(f"`outcomes` must be a pandas DataFrame, got "
                         f"{type(outcomes).__name__}.")
    hs = [_as_hypothesis(h) for h in items]
    ids = [h.id for h in hs]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise InputError(f"hypothesis ids must be unique, got duplicates {dup}.")
    return hs, level, b, gen, clean, procedure


def _evaluate(hypotheses, outcomes, *, confidence_level, n_resamples, rng, clean_noise,
              multiplicity) -> list[HypothesisResult]:
    from robuststats.stats._hypothesis_data import gather_evidence

    hs, level, b, gen, clean_noise, procedure = _evaluate_iv(
        hypotheses, outcomes, confidence_level, n_resamples, rng, clean_noise, multiplicity)
    if not hs:
        return []
    from robuststats.outcomes import validate_outcomes

    outcomes = validate_outcomes(outcomes)  # once for the family
    evidence = [gather_evidence(h, outcomes, n_resamples=b, rng=gen, clean_noise=clean_noise,
                                confidence_level=level) for h in hs]
    alpha = 1.0 - level
    raw = np.array([_decision_pvalue(h, e.tails) for h, e in zip(hs, evidence)])
    adjusted_family = procedure != "none" and len(hs) > 1
    if adjusted_family:
        adjusted = adjust_pvalues(raw, method=procedure, alpha=alpha)
        levels = local_levels(raw, adjusted, alpha=alpha)
    else:
        adjusted = raw.copy()
        levels = np.full(len(hs), alpha)
    out = []
    for h, e, p, q, t in zip(hs, evidence, raw, adjusted, levels):
        ci = e.interval(1.0 - float(t))
        note = e.detail
        if adjusted_family:
            note += (f"; {procedure} over {len(hs)} hypotheses: interval level "
                     f"{1.0 - float(t):.4g}")
        verdict, reason = _decide(h, ci)
        method = e.method
        if h.metric == "accuracy":  # a difference of shares: never outside [-1, 1]
            ci, cut = clip_interval(ci, "accuracy_difference")
            if cut:  # the verdict is the full interval's (the same for margins in ±1)
                method += ", cut to [-1, 1]"
                same, cut_reason = _decide(h, ci)
                reason = cut_reason if same == verdict else reason
        if e.missing:  # no interval to report: the reason instead of (-inf, inf)
            reason = e.missing
            ci = ConfidenceInterval(np.nan, np.nan)
        out.append(HypothesisResult(
            id=h.id, statement=h.statement, metric=h.metric, a=h.a, b=h.b,
            eval_noise=h.eval_noise, relation=h.relation, margin=h.margin,
            estimate=e.estimate, confidence_interval=ci, confidence_level=1.0 - float(t),
            ci_method=method, pvalue=float(p), pvalue_adjusted=float(q),
            multiplicity=procedure, verdict=verdict, reason=reason, detail=note,
        ))
    return out
