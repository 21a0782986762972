"""Tests between conditions at each noise level: an omnibus test, then pairwise tests.

Each row says which question its test answers (``question``) and whether it decides
(``role``):

* With several training seeds the deciding test is the seed-random t test
  (:func:`robuststats.stats.seed_random_test`): seeds and items are both random, so it
  answers "does procedure a differ from b?". Its interval is the row's interval.
* The McNemar tests hold the trained models fixed: they answer "do these trained models
  differ on these items?", with every (seed, noise_seed) evaluation a stratum and each item
  a cluster across strata (Durkalski et al. 2003). With several seeds they are kept as a
  ``diagnostic`` row: when seeds shift a and b differently, the models can differ while the
  procedures do not, and the McNemar test then rejects far above its nominal level
  (``docs/statistics.md`` §9). With one training seed the two questions cannot be told
  apart and McNemar decides.

Multiplicity is adjusted over the deciding rows (the family of decisions) and, separately,
over the diagnostic rows; ``reject`` is empty on diagnostic rows. Cochran's Q is the
omnibus version of the clustered McNemar test for k conditions on the same blocks.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd

from robuststats.analysis._common import quiet_degenerate
from robuststats.analysis._options import AnalysisOptions
from robuststats.errors import InputError
from robuststats.outcomes import align, align_by_condition, seed_pairing

QUESTION_MODELS = "do these trained models differ on these items? (models fixed)"
QUESTION_PROCEDURES = ("does procedure a differ from procedure b? (training seeds and items "
                       "random)")
ROLE_DECISION = "decision"
ROLE_DIAGNOSTIC = "diagnostic"
QUESTION_OMNIBUS = ("do the trained models of these conditions differ at all on these "
                    "items? (models fixed, items as clusters)")


def _conditions_at(out: pd.DataFrame, level: float) -> list[str]:
    return list(dict.fromkeys(out.loc[out["eval_noise"] == level, "condition"]))


def _pairs(conditions: list[str], reference: str | None) -> list[tuple[str, str]]:
    if reference is None:
        return list(itertools.combinations(conditions, 2))
    return [(c, reference) for c in conditions if c != reference]


def omnibus_table(out: pd.DataFrame, opts: AnalysisOptions, drops: list[pd.DataFrame]) -> pd.DataFrame:
    """Cochran's Q over every condition at each level with three or more conditions.

    Blocks are ``(seed, noise_seed, item)`` evaluations present under every condition.
    """
    from robuststats import stats

    rows = []
    for level in sorted(float(v) for v in out["eval_noise"].unique()):
        conditions = _conditions_at(out, level)
        if len(conditions) < 3:
            continue
        strata = align(out, conditions, level, by="stratum", holes="drop")
        drops.append(strata.dropped)
        # items recur in every stratum: clustered by item, like the pairwise McNemar tests
        x = np.stack([strata.values[c] for c in conditions]).astype(int)
        with quiet_degenerate():
            res = stats.cochran_q(x, clustered=True)
        rows.append({"eval_noise": level, "n_conditions": len(conditions),
                     "n_seeds": len({r[0] for r in strata.rows}),
                     "n_items": len(strata.item_ids), "question": QUESTION_OMNIBUS,
                     "test": res.method, "statistic": float(res.statistic),
                     "dof": int(res.dof), "pvalue": float(res.pvalue)})
    return pd.DataFrame(rows)


def _interval(stats: Any, res: Any, opts: AnalysisOptions, pairing: str = ""
              ) -> dict[str, Any]:
    """The row's interval of an accuracy difference, cut to [-1, 1] (and said so) where a
    t interval on few seeds reaches past what a difference of shares can take."""
    ci, cut = stats.clip_interval(res.confidence_interval, "accuracy_difference")
    cut = cut or bool(getattr(res, "clipped", False))  # cut already by the test itself
    return {"ci_low": float(ci.low), "ci_high": float(ci.high),
            "ci_level": float(opts.confidence_level),
            "ci_method": res.method + pairing + (", cut to [-1, 1]" if cut else "")}


def _independent_row(stats: Any, out: pd.DataFrame, a: str, b: str, level: float,
                     opts: AnalysisOptions, pairing: str) -> dict[str, Any]:
    """The deciding row when a's and b's seeds are independent runs (no McNemar row: the
    trained models do not pair)."""
    values, items = align_by_condition(out, [(a, level), (b, level)], holes="drop")
    xa, xb = values[(a, level)], values[(b, level)]
    with quiet_degenerate():
        res = stats.independent_seeds_test(xa, xb, confidence_level=opts.confidence_level)
    return {"eval_noise": level, "a": a, "b": b, "n_seeds": xa.shape[0] + xb.shape[0],
            "n_strata": None, "n_items": len(items), "n_a_only": None, "n_b_only": None,
            "accuracy_a": float(xa.mean()), "accuracy_b": float(xb.mean()),
            "estimate": float(xa.mean() - xb.mean()),
            **_interval(stats, res, opts, pairing),
            "role": ROLE_DECISION, "question": QUESTION_PROCEDURES, "test": res.method,
            "statistic": float(res.statistic), "dof": float(res.dof),
            "pvalue": float(res.pvalue)}


def pairwise_tests(out: pd.DataFrame, opts: AnalysisOptions, drops: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per pair of conditions and noise level (every pair, or each vs reference)."""
    from robuststats import stats

    conditions = list(dict.fromkeys(out["condition"]))
    if opts.reference is not None and opts.reference not in conditions:
        raise InputError(f"`reference` condition {opts.reference!r} is not in the outcomes "
                         f"(conditions: {conditions}).")
    rows = []
    for level in sorted(float(v) for v in out["eval_noise"].unique()):
        present = _conditions_at(out, level)
        for a, b in _pairs(conditions, opts.reference):
            if a not in present or b not in present:
                continue
            paired_out, pairing, independent = seed_pairing(out, a, b, [level])
            if independent:
                rows.append(_independent_row(stats, out, a, b, level, opts, pairing))
                continue
            strata = align(paired_out, [a, b], level, by="stratum", holes="drop")
            by_seed = align(paired_out, [a, b], level, by="seed", holes="drop")
            drops += [strata.dropped, by_seed.dropped]
            xa, xb = strata.values[a].astype(int), strata.values[b].astype(int)
            sa, sb = by_seed.values[a], by_seed.values[b]
            with quiet_degenerate():
                mcnemar, name = _mcnemar(stats, xa, xb, opts.mcnemar)
                procedures = stats.seed_random_test(
                    sa, sb, confidence_level=opts.confidence_level)
            common = {
                "eval_noise": level, "a": a, "b": b, "n_seeds": sa.shape[0],
                "n_strata": len(strata.rows), "n_items": xa.shape[1],
                "n_a_only": int(((xa == 1) & (xb == 0)).sum()),
                "n_b_only": int(((xa == 0) & (xb == 1)).sum()),
                "accuracy_a": float(xa.mean()), "accuracy_b": float(xb.mean()),
                "estimate": float(xa.mean() - xb.mean()),
            }
            interval = _interval(stats, procedures, opts)
            no_interval = dict.fromkeys(interval, np.nan) | {"ci_method": ""}
            models = {"question": QUESTION_MODELS, "test": name,
                      "statistic": float(mcnemar.statistic),
                      # the exact test's statistic is a count; the stratified ones are χ²(1)
                      "dof": np.nan if len(strata.rows) == 1 else 1.0,
                      "pvalue": float(mcnemar.pvalue)}
            if sa.shape[0] > 1:
                rows.append({**common, **interval, "role": ROLE_DECISION,
                             "question": QUESTION_PROCEDURES, "test": procedures.method,
                             "statistic": float(procedures.statistic),
                             "dof": float(procedures.dof), "pvalue": float(procedures.pvalue)})
                rows.append({**common, **no_interval, "role": ROLE_DIAGNOSTIC, **models})
            else:  # one seed: the models' test decides; the interval is named on its own
                rows.append({**common, **interval, "ci_method": procedures.interval_method,
                             "role": ROLE_DECISION, **models})
    tests = pd.DataFrame(rows)
    if tests.empty:
        return tests
    tests["pvalue_adjusted"] = np.nan
    for role in (ROLE_DECISION, ROLE_DIAGNOSTIC):
        mask = (tests["role"] == role).to_numpy()
        if mask.any():
            tests.loc[mask, "pvalue_adjusted"] = np.asarray(stats.adjust_pvalues(
                tests.loc[mask, "pvalue"].to_numpy(), method=opts.multiplicity), float)
    tests["multiplicity"] = opts.multiplicity
    tests["alpha"] = float(opts.alpha)
    decides = tests["role"] == ROLE_DECISION
    tests["reject"] = pd.array([bool(p < opts.alpha) if d else pd.NA for p, d in
                                zip(tests["pvalue_adjusted"], decides)], dtype="boolean")
    return tests


def _mcnemar(stats: Any, xa: np.ndarray, xb: np.ndarray, method: str) -> tuple[Any, str]:
    """Exact McNemar for one stratum; otherwise the stratified test with ``method``.

    ``clustered`` (the default) treats each item as a cluster across strata, because the
    same items recur under every seed and noise seed (Durkalski et al. 2003);
    ``mantel-haenszel`` treats every pair as independent.
    """
    if xa.shape[0] == 1:
        return stats.mcnemar(xa[0], xb[0], method="exact"), "McNemar exact"
    return (stats.mcnemar_stratified(xa, xb, method=method),
            f"stratified McNemar ({method})")
