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

Which interval: accuracy with one seed and one evaluation per item uses Tango's (1998)
score interval; otherwise a two-way (seeds × items) BCa bootstrap of ``acc_a − acc_b``.
Retention uses a BCa bootstrap of ``retention(a) − retention(b)``, two-way over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd

from robuststats.errors import closest_match
from robuststats.stats._common import (
    ConfidenceInterval,
    InputError,
    check_choice,
    check_confidence_level,
    check_n_resamples,
    check_rng,
    tidy_row,
)
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


@dataclass(frozen=True)
class Hypothesis:
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
        if not isinstance(self.id, str) or not self.id:
            raise InputError(f"hypothesis `id` must be a non-empty string, got {self.id!r}.")
        where = f"hypothesis {self.id!r}"
        if self.metric not in METRICS:
            raise InputError(f"{where}: `metric` must be one of {list(METRICS)}, got {self.metric!r}.")
        if self.relation not in RELATIONS:
            raise InputError(
                f"{where}: `relation` must be one of {list(RELATIONS)}, got {self.relation!r}."
            )
        for key in ("a", "b"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value:
                raise InputError(f"{where}: `{key}` must be a condition name, got {value!r}.")
        if self.a == self.b:
            raise InputError(f"{where}: `a` and `b` must differ, got {self.a!r} twice.")
        for key in ("eval_noise", "margin"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"{where}: `{key}` must be a finite number, got {value!r}.")
        if self.eval_noise < 0:
            raise InputError(f"{where}: `eval_noise` must be ≥ 0, got {self.eval_noise!r}.")
        if self.metric == "retention" and self.eval_noise == 0:
            raise InputError(
                f"{where}: retention needs a noisy level, `eval_noise` > 0, got {self.eval_noise!r}."
            )
        if self.relation == "equivalent" and self.margin <= 0:
            raise InputError(
                f"{where}: an equivalence `margin` must be > 0, got {self.margin!r}."
            )
        if not isinstance(self.statement, str):
            raise InputError(f"{where}: `statement` must be a string, got {self.statement!r}.")

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Hypothesis:
        """Build from a mapping; unknown keys and missing required keys raise InputError."""
        if not isinstance(d, Mapping):
            raise InputError(f"a hypothesis must be a mapping, got {type(d).__name__}.")
        names = [f.name for f in fields(cls)]
        hid = d.get("id", "?")
        for key in d:
            if key not in names:
                close = closest_match(key, names)
                hint = f" Did you mean {close!r}?" if close else ""
                raise InputError(
                    f"hypothesis {hid!r}: unknown key {key!r}; allowed keys: {names}.{hint}"
                )
        required = ["id", "metric", "a", "b", "eval_noise", "relation"]
        missing = [k for k in required if k not in d]
        if missing:
            raise InputError(f"hypothesis {hid!r}: missing required key(s) {missing}.")
        values = dict(d)
        for key in ("eval_noise", "margin"):
            if key in values and isinstance(values[key], int) and not isinstance(values[key], bool):
                values[key] = float(values[key])
        return cls(**values)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class HypothesisResult:
    """Verdict on one :class:`Hypothesis` with the test and interval that decided it.

    ``confidence_level`` is the level of ``confidence_interval`` (adjusted for
    multiplicity); ``pvalue`` is the raw decision p-value and ``adjusted_pvalue`` its
    adjusted value (equal to ``pvalue`` without multiplicity).
    """

    id: str
    statement: str
    verdict: str
    estimate: float
    confidence_interval: ConfidenceInterval
    confidence_level: float
    pvalue: float
    adjusted_pvalue: float
    method: str
    detail: str
    metric: str = ""
    a: str = ""
    b: str = ""
    eval_noise: float = 0.0
    relation: str = ""
    margin: float = 0.0

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([tidy_row(self)])


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
    m, low, high = h.margin, ci.low, ci.high
    if h.relation == "greater":
        return "VERIFIED" if low > m else "FALSIFIED" if high < m else "INCONCLUSIVE"
    if h.relation == "less":
        return "VERIFIED" if high < m else "FALSIFIED" if low > m else "INCONCLUSIVE"
    if -m < low and high < m:
        return "VERIFIED"
    return "FALSIFIED" if (low >= m or high <= -m) else "INCONCLUSIVE"


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
    """Verdicts for a family of hypotheses, one row each (columns of HypothesisResult).

    ``multiplicity``: a method of :func:`adjust_pvalues` (``"holm"``, ``"fdr_bh"``, ...)
    or ``None`` for per-hypothesis intervals at ``confidence_level``.
    """
    results = _evaluate(hypotheses, outcomes, confidence_level=confidence_level,
                        n_resamples=n_resamples, rng=rng, clean_noise=clean_noise,
                        multiplicity=multiplicity)
    if not results:
        return pd.DataFrame(columns=[*(f.name for f in fields(HypothesisResult)),
                                     "ci_low", "ci_high"])
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
                     multiplicity=None)[0]


def _evaluate(hypotheses, outcomes, *, confidence_level, n_resamples, rng, clean_noise,
              multiplicity) -> list[HypothesisResult]:
    from robuststats.stats._hypothesis_data import gather_evidence

    level = check_confidence_level(confidence_level)
    b = check_n_resamples(n_resamples)
    gen = check_rng(rng)
    if multiplicity is not None:
        check_choice(multiplicity, "multiplicity", MULTIPLICITY_METHODS)
    hs = [_as_hypothesis(h) for h in hypotheses]
    ids = [h.id for h in hs]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise InputError(f"hypothesis ids must be unique, got duplicates {dup}.")
    if not hs:
        return []
    from robuststats.outcomes import validate_outcomes

    outcomes = validate_outcomes(outcomes)  # once for the family
    evidence = [gather_evidence(h, outcomes, n_resamples=b, rng=gen, clean_noise=clean_noise,
                                confidence_level=level) for h in hs]
    alpha = 1.0 - level
    raw = np.array([_decision_pvalue(h, e.tails) for h, e in zip(hs, evidence)])
    if multiplicity is None or len(hs) == 1:
        adjusted = raw.copy()
        levels = np.full(len(hs), alpha)
    else:
        adjusted = adjust_pvalues(raw, method=multiplicity, alpha=alpha)
        levels = local_levels(raw, adjusted, alpha=alpha)
    out = []
    for h, e, p, q, t in zip(hs, evidence, raw, adjusted, levels):
        ci = e.interval(1.0 - float(t))
        note = e.detail
        if multiplicity is not None and len(hs) > 1:
            note += (f"; {multiplicity} over {len(hs)} hypotheses: interval level "
                     f"{1.0 - float(t):.4g}")
        out.append(HypothesisResult(
            id=h.id, statement=h.statement, verdict=_verdict(h, ci), estimate=e.estimate,
            confidence_interval=ci, confidence_level=1.0 - float(t), pvalue=float(p),
            adjusted_pvalue=float(q), method=e.method, detail=note, metric=h.metric, a=h.a,
            b=h.b, eval_noise=h.eval_noise, relation=h.relation, margin=h.margin,
        ))
    return out
