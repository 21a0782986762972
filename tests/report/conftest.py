"""A small synthetic set of analysis tables under the glossary's names.

Its interval level is 0.90 (hypotheses: multiplicity-adjusted levels) so that any
hard-coded "95%" shows up, and its hypotheses cover every verdict and relation plus one
left without an estimate.
"""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from robuststats.glossary import TABLE_COLUMNS, ordered

LEVEL = 0.90
CONDITIONS = {"base": "no training noise", "fwd": "forward-only noise, 5 %",
              "bwd": "backward-only noise, 5 % (a description long enough to need wrapping)"}
CLEAN = {"base": 0.80, "fwd": 0.70, "bwd": 0.30}
KEEP = {0.05: {"base": 0.60, "fwd": 0.85, "bwd": 0.95}, 0.1: {"base": 0.3, "fwd": 0.6,
                                                             "bwd": 0.9}}


def synthetic_tables() -> dict[str, pd.DataFrame]:
    summary, retention, seeds = [], [], []
    for cond, clean in CLEAN.items():
        for noise in (0.0, 0.05, 0.1):
            acc = clean * (1 if noise == 0 else KEEP[noise][cond])
            summary.append({"condition": cond, "eval_noise": noise, "n_seeds": 3,
                            "n_noise_seeds": 1 if noise == 0 else 2, "n_items": 40,
                            "accuracy": acc, "ci_low": acc - 0.05, "ci_high": acc + 0.04,
                            "ci_level": LEVEL, "ci_method": "seeds x items bootstrap (bca)",
                            "seed_sd": 0.03, "seed_min": acc - 0.04, "seed_max": acc + 0.03})
            for seed, d in zip(range(3), (-0.03, 0.0, 0.03)):
                seeds.append({"condition": cond, "seed": seed, "eval_noise": noise,
                              "accuracy": acc + d,
                              "retention": 1.0 if noise == 0 else (acc + d) / (clean + d)})
            if noise:
                r = KEEP[noise][cond]
                retention.append({"condition": cond, "eval_noise": noise, "n_seeds": 3,
                                  "n_items": 40, "clean_accuracy": clean, "noisy_accuracy": acc,
                                  "retention": r, "ci_low": r - 0.06, "ci_high": r + 0.05,
                                  "ci_level": LEVEL, "ci_method": "bca", "seed_sd": 0.04})
    tests = []
    for noise, (a, b) in itertools.product((0.0, 0.05), [("base", "fwd"), ("base", "bwd")]):
        tests.append({"eval_noise": noise, "a": a, "b": b, "n_strata": 3, "n_items": 40,
                      "n_a_only": 12, "n_b_only": 5, "accuracy_a": 0.7, "accuracy_b": 0.6,
                      "estimate": 0.1, "ci_low": 0.02, "ci_high": 0.18, "ci_level": LEVEL,
                      "ci_method": "seeds x items bootstrap (bca)",
                      "question": "do a and b differ in accuracy on the same items?",
                      "test": "stratified McNemar (clustered)", "statistic": 4.2,
                      "pvalue": 0.0404, "pvalue_adjusted": 0.121, "multiplicity": "holm",
                      "alpha": 0.1, "reject": False})
    omnibus = [{"eval_noise": noise, "n_conditions": 3, "n_seeds": 3, "n_items": 40,
                "question": "do the conditions differ at all?", "test": "Cochran's Q",
                "statistic": 9.5, "dof": 2, "pvalue": 0.00865} for noise in (0.0, 0.05, 0.1)]

    def hyp(id_, a, b, noise, relation, margin, est, lo, hi, level, verdict, metric="accuracy",
            reason="decided by the interval"):
        return {"id": id_, "statement": f"claim {id_}", "metric": metric, "a": a, "b": b,
                "eval_noise": noise, "relation": relation, "margin": margin, "estimate": est,
                "ci_low": lo, "ci_high": hi, "ci_level": level,
                "ci_method": "seeds x items bootstrap (bca)", "pvalue": 0.01,
                "pvalue_adjusted": 0.03, "multiplicity": "holm", "verdict": verdict,
                "reason": reason}

    nan = float("nan")
    hypotheses = [
        hyp("H1", "fwd", "base", 0.05, "greater", 0.05, 0.12, 0.07, 0.17, 0.975, "VERIFIED"),
        hyp("H2", "bwd", "fwd", 0.05, "greater", 0.0, 0.10, 0.04, 0.16, 0.9667, "VERIFIED",
            metric="retention"),
        hyp("H3", "bwd", "base", 0.0, "less", -0.1, 0.02, -0.04, 0.08, 0.93, "FALSIFIED"),
        hyp("H4", "fwd", "base", 0.0, "equivalent", 0.05, -0.1, -0.2, 0.0, 0.9, "INCONCLUSIVE"),
        hyp("H5", "bwd", "base", 0.1, "greater", 0.0, nan, nan, nan, nan, "INCONCLUSIVE",
            reason="2 needed cell(s) missing"),
    ]
    missing = [{"condition": "bwd", "seed": 2, "eval_noise": 0.1, "noise_seed": 1}]
    dropped = [{"condition": "fwd", "seed": 1, "eval_noise": 0.05, "noise_seed": 0,
                "item_id": f"item{i}", "reason": "absent under base"} for i in range(3)]
    strata = [{"eval_noise": 0.05, "a": "fwd", "b": "base", "seed": s, "noise_seed": ns,
               "n_items": 40, "n_a_only": 4, "n_b_only": 2, "accuracy_a": 0.6,
               "accuracy_b": 0.55, "estimate": 0.05,
               "test": "McNemar exact (one stratum, unadjusted, descriptive)",
               "statistic": 4.0, "pvalue": 0.6875} for s in range(3) for ns in range(2)]
    raw = {"summary": summary, "retention": retention, "seeds": seeds, "omnibus": omnibus,
           "tests": tests, "strata": strata, "hypotheses": hypotheses, "missing": missing,
           "dropped": dropped}
    return {name: ordered(pd.DataFrame(rows), name) for name, rows in raw.items()}


META = {
    "study": "synthetic", "label": "v1", "spec_hash": "ab" * 32, "seeds": [0, 1, 2],
    "noise_seeds": [0, 1], "cells_planned": 15, "cells_finished": 14, "alpha": 0.1,
    "confidence_level": LEVEL, "multiplicity": "holm",
    "spec": {"conditions": {c: {"description": d, "train_noise": None, "aqn": None}
                            for c, d in CONDITIONS.items()}},
}


@pytest.fixture()
def tables() -> dict[str, pd.DataFrame]:
    out = synthetic_tables()
    # every table a version stores; the power plans are printed, never stored in a version,
    # a dose-response sweep's tables are stored only by sweep studies, and the gate's by
    # gate versions, and the table of looks only by sequential studies
    from robuststats.analysis._dose import DOSE_TABLES

    assert set(out) == set(TABLE_COLUMNS) - {"power", "power_seeds", "gate",
                                             "sequential_looks", *DOSE_TABLES}
    return out


@pytest.fixture()
def meta() -> dict:
    return dict(META)
