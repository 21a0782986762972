"""Meaningless numbers are not printed as results: retention at a clean accuracy that
cannot be told from 0 is reported as not estimable, and intervals stay in their range."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from robuststats.analysis import AnalysisOptions, analyze_outcomes
from robuststats.errors import InputError
from robuststats.gate import gate_test
from robuststats.outcomes import validate_outcomes
from robuststats.report import condition_rows, retention_notes

OPTS = AnalysisOptions(n_resamples=200, multiplicity="holm")
N = 40


def _cells(cond: str, correct: dict[tuple[int, float], int]) -> list[pd.DataFrame]:
    """``correct[(seed, level)]`` correct items of N, on the first items."""
    return [pd.DataFrame({"condition": cond, "seed": seed, "eval_noise": level,
                          "noise_seed": 0 if level == 0 else 1,
                          "item_id": [f"i{k:03d}" for k in range(N)],
                          "correct": [1] * k + [0] * (N - k)})
            for (seed, level), k in correct.items()]


def _outcomes(low: dict[tuple[int, float], int], high: dict[tuple[int, float], int]
              ) -> pd.DataFrame:
    return validate_outcomes(pd.concat(_cells("low", low) + _cells("high", high)))


# e8_smoke's shape: 2 seeds, 0 and 4 of 40 correct when clean (5 %)
LOW = {(0, 0.0): 0, (1, 0.0): 4, (0, 0.05): 1, (1, 0.05): 1}
HIGH = {(0, 0.0): 32, (1, 0.0): 30, (0, 0.05): 25, (1, 0.05): 22}
HYPOTHESES = [
    {"id": "R", "metric": "retention", "a": "high", "b": "low", "eval_noise": 0.05,
     "relation": "greater", "margin": 0.0},
    {"id": "A", "metric": "accuracy", "a": "high", "b": "low", "eval_noise": 0.05,
     "relation": "greater", "margin": 0.0},
]


def test_retention_of_a_near_zero_clean_accuracy_is_not_estimable() -> None:
    res = analyze_outcomes(_outcomes(LOW, HIGH), hypotheses=HYPOTHESES, options=OPTS)
    ret = res.retention.set_index("condition")
    low, high = ret.loc["low"], ret.loc["high"]
    assert math.isnan(low["retention"]) and math.isnan(low["ci_low"])
    assert math.isnan(low["ci_high"]) and math.isnan(low["seed_sd"])
    assert low["ci_method"].startswith("none, not estimable: the clean accuracy of 1 of 2 "
                                       "training seeds (lowest 0 % of 40 items)")
    assert "Fieller's g" in low["ci_method"]
    # the accuracies behind it are still reported
    assert (low["clean_accuracy"], low["noisy_accuracy"]) == (0.05, 0.025)
    # a decent clean accuracy keeps its number and interval
    assert high["retention"] == pytest.approx(47 / 62) and high["ci_low"] > 0
    assert not high["ci_method"].startswith("none")
    # the seed with no correct clean answer has no retention; the other (4 of 40) has one
    seeds = res.seeds.set_index(["condition", "seed", "eval_noise"])["retention"]
    assert math.isnan(seeds[("low", 1, 0.05)]) is False
    assert math.isnan(seeds[("low", 0, 0.05)])
    # the hypothesis on it has no estimate, no interval, and says why
    hyp = res.hypotheses.set_index("id")
    r = hyp.loc["R"]
    assert r["verdict"] == "INCONCLUSIVE" and math.isnan(r["estimate"])
    assert math.isnan(r["ci_low"]) and math.isnan(r["ci_high"])
    assert r["ci_method"] == "none (retention not estimable)"
    assert r["reason"].startswith("retention of 'low' is not estimable: the clean accuracy")
    # the accuracy hypothesis is decided as before
    assert not math.isnan(hyp.loc["A", "estimate"])


def test_results_show_says_not_estimable_and_why() -> None:
    res = analyze_outcomes(_outcomes(LOW, HIGH), options=OPTS)
    rows = {(r["condition"], r["eval_noise"]): r for r in
            condition_rows(res.summary, res.retention)}
    assert rows[("low", "5%")]["retention"] == "not estimable"
    assert rows[("low", "5%")]["retention_ci"] == "-"
    assert rows[("high", "5%")]["retention"] not in ("not estimable", "-")
    (note,) = retention_notes(res.retention)
    assert note.startswith("retention of low at 5% noise not estimable: the clean accuracy")


def test_an_accuracy_difference_interval_never_passes_100_pp() -> None:
    # 2 seeds whose differences are +1 and −1 on every item: the t on 1 df reaches ±12.7
    a = {(0, 0.0): N, (1, 0.0): 0}
    b = {(0, 0.0): 0, (1, 0.0): N}
    out = validate_outcomes(pd.concat(_cells("a", a) + _cells("b", b)))
    hyp = [{"id": "H", "metric": "accuracy", "a": "a", "b": "b", "eval_noise": 0.0,
            "relation": "greater", "margin": 0.0}]
    res = analyze_outcomes(out, hypotheses=hyp, options=OPTS)
    for table in (res.tests[res.tests["role"] == "decision"], res.hypotheses):
        row = table.iloc[0]
        assert (row["ci_low"], row["ci_high"]) == (-1.0, 1.0)
        assert row["ci_method"].endswith(", cut to [-1, 1]")
    assert res.hypotheses.iloc[0]["verdict"] == "INCONCLUSIVE"
    assert (res.summary["ci_low"] >= 0).all() and (res.summary["ci_high"] <= 1).all()


def test_the_gate_refuses_a_retention_it_cannot_estimate() -> None:
    rng = np.random.default_rng(5)
    good_clean = (rng.random((3, N)) < 0.8).astype(float)
    good_noisy = good_clean * (rng.random((3, N)) < 0.9)
    low_clean = np.vstack([np.r_[np.ones(4), np.zeros(N - 4)], np.zeros(N)])
    low_noisy = np.vstack([np.r_[np.ones(1), np.zeros(N - 1)], np.zeros(N)])
    r = gate_test(low_clean, low_noisy, good_clean, good_noisy, max_degradation=0.2)
    assert not r.passed and "the candidate's retention is not estimable" in r.reason
    with pytest.raises(InputError, match=r"baseline's retention at eval_noise .* not estimable"):
        gate_test(good_clean, good_noisy, low_clean, low_noisy, max_degradation=0.2)
    # both sides well clear of 0: decided as before
    assert gate_test(good_clean, good_noisy, good_clean, good_noisy,
                     max_degradation=0.2).method.startswith("one-sided t")
