"""Hypothesis verdicts, with INCONCLUSIVE for hypotheses whose cells are missing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from robuststats.analysis._common import quiet_degenerate, stable_hash
from robuststats.analysis._options import AnalysisOptions
from robuststats.glossary import TABLE_COLUMNS


def as_hypotheses(hypotheses: Sequence[Any]) -> list[Any]:
    from robuststats.stats import Hypothesis

    return [h if isinstance(h, Hypothesis) else Hypothesis.from_dict(h) for h in hypotheses]


def _needed_missing(h: Any, out: pd.DataFrame, missing: pd.DataFrame) -> int:
    """Cells ``h`` needs that are missing (planned but absent, or absent altogether)."""
    levels = {float(h.eval_noise)} | ({0.0} if h.metric == "retention" else set())
    gone = 0
    if not missing.empty:
        gone = int((missing["condition"].isin([h.a, h.b])
                    & missing["eval_noise"].isin(levels)).sum())
    absent = sum(out[(out["condition"] == c) & (out["eval_noise"] == lv)].empty
                 for c in (h.a, h.b) for lv in levels)
    return gone or absent


def _claim(h: Any) -> dict[str, Any]:
    return {"id": h.id, "statement": h.statement, "metric": h.metric, "a": h.a, "b": h.b,
            "eval_noise": float(h.eval_noise), "relation": h.relation,
            "margin": float(h.margin)}


def hypotheses_table(out: pd.DataFrame, hypotheses: list[Any], missing: pd.DataFrame,
                     opts: AnalysisOptions) -> pd.DataFrame:
    """One row per hypothesis, in the order given (glossary ``hypotheses`` columns).

    The family adjusted for multiplicity is the hypotheses that can be judged; one that
    needs a missing cell is INCONCLUSIVE and does not take part.
    """
    from robuststats import stats

    columns = [*TABLE_COLUMNS["hypotheses"], "detail"]
    if not hypotheses:
        return pd.DataFrame(columns=columns)
    rows: dict[str, dict[str, Any]] = {}
    ready = []
    for h in hypotheses:
        n = _needed_missing(h, out, missing)
        if n:
            rows[h.id] = {**_claim(h), "estimate": np.nan, "ci_low": np.nan,
                          "ci_high": np.nan, "ci_level": np.nan, "ci_method": "",
                          "pvalue": np.nan, "pvalue_adjusted": np.nan,
                          "multiplicity": opts.multiplicity, "verdict": "INCONCLUSIVE",
                          "reason": f"{n} needed cell(s) missing (failed or not run)",
                          "detail": ""}
        else:
            ready.append(h)
    if ready:
        with quiet_degenerate():
            table = stats.evaluate_hypotheses(
                ready, out, confidence_level=opts.confidence_level,
                n_resamples=opts.n_resamples,
                rng=np.random.default_rng([opts.rng_seed, stable_hash(["hypotheses"])]),
                multiplicity=None if opts.multiplicity == "none" else opts.multiplicity)
        for h, (_, r) in zip(ready, table.iterrows()):
            rows[h.id] = {**_claim(h), **{k: r[k] for k in (
                "estimate", "ci_low", "ci_high", "ci_level", "ci_method", "pvalue",
                "pvalue_adjusted", "verdict", "reason", "detail")},
                "multiplicity": opts.multiplicity}
    return pd.DataFrame([rows[h.id] for h in hypotheses], columns=columns)
