"""Hypothesis criteria and verdicts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from robuststats.errors import InputError
from robuststats.glossary import TABLE_COLUMNS
from robuststats.stats import (
    DegenerateDataWarning,
    Hypothesis,
    evaluate_hypotheses,
    evaluate_hypothesis,
    mcnemar,
)
from robuststats.stats._hypotheses import _decision_pvalue, _verdict
from robuststats.stats._hypothesis_data import gather_evidence

# the criteria block of docs/architecture.md, verbatim
CRITERIA_YAML = """
- id: H1
  statement: "Forward-only training retains more accuracy at 5% noise than fwd+bwd"
  metric: accuracy          # accuracy | retention
  a: E8c                    # the claim is about (a − b)
  b: E8b
  eval_noise: 0.05          # for retention: the noisy level; clean is eval_noise 0
  relation: greater         # greater | less | equivalent
  margin: 0.05              # greater: a − b > margin; less: a − b < margin; equivalent: |a − b| < margin
"""


def _rows(cond, seed, level, noise_seed, outcomes):
    return [dict(condition=cond, seed=seed, eval_noise=level, noise_seed=noise_seed,
                 item_id=f"i{i:04d}", correct=int(v)) for i, v in enumerate(outcomes)]


def _cavo_outcomes():
    # Cavo et al. table [[59, 6], [16, 80]]: A correct in rows, B correct in columns
    a = np.repeat([1, 1, 0, 0], [59, 6, 16, 80])
    b = np.repeat([1, 0, 1, 0], [59, 6, 16, 80])
    return pd.DataFrame(_rows("A", 0, 0.0, 0, a) + _rows("B", 0, 0.0, 0, b))


def _simulated(n_items=400, seeds=3, acc=None, seed=0):
    """Outcomes with item difficulty; acc[cond][level] = mean accuracy."""
    acc = acc or {"E8b": {0.0: 0.75, 0.05: 0.55}, "E8c": {0.0: 0.75, 0.05: 0.74}}
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.0, n_items)
    rows = []
    for cond, levels in acc.items():
        for s in range(seeds):
            for level, p in levels.items():
                logit = np.log(p / (1 - p)) + difficulty
                correct = rng.random(n_items) < 1 / (1 + np.exp(-logit))
                rows += _rows(cond, s, level, 0, correct)
    return pd.DataFrame(rows)


def test_docs_yaml_block_parses():
    (d,) = yaml.safe_load(CRITERIA_YAML)
    h = Hypothesis.from_dict(d)
    assert (h.metric, h.a, h.b, h.eval_noise, h.relation, h.margin) == (
        "accuracy", "E8c", "E8b", 0.05, "greater", 0.05)
    assert Hypothesis.from_dict(h.to_dict()) == h


def test_unknown_key_is_named_with_suggestion():
    d = dict(id="H1", metric="accuracy", a="A", b="B", eval_noise=0.0, relaton="greater")
    with pytest.raises(InputError, match=r"hypothesis 'H1': unknown key 'relaton' \(did you mean 'relation'\?\); allowed keys: 'id'"):
        Hypothesis.from_dict(d)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"metric": "accuracyy"}, r"`metric` must be one of 'accuracy', 'retention', got 'accuracyy' \(did you mean 'accuracy'\?\)\."),
        ({"metric": "f1"}, r"hypothesis 'H': `metric` must be one of 'accuracy', 'retention', got 'f1'\."),
        ({"relation": "more"}, r"`relation` must be one of 'greater', 'less', 'equivalent', got 'more'\."),
        ({"relation": "equivalent", "margin": 0.0}, r"an equivalence `margin` must be > 0, got 0.0"),
        ({"metric": "retention", "eval_noise": 0.0}, r"retention needs a noisy level, `eval_noise` > 0"),
        ({"b": "A"}, r"`a` and `b` must differ, got 'A' twice"),
        ({"margin": "5pp"}, r"`margin` must be a number, got '5pp'\."),
        ({"eval_noise": -0.1}, r"`eval_noise` must be a number ≥ 0, got -0.1\."),
    ],
)
def test_invalid_hypotheses(change, match):
    d = dict(id="H", metric="accuracy", a="A", b="B", eval_noise=0.0, relation="greater")
    d.update(change)
    with pytest.raises(InputError, match=match):
        Hypothesis.from_dict(d)


def test_missing_required_key():
    with pytest.raises(InputError, match=r"missing required key\(s\) \['b'\]"):
        Hypothesis.from_dict(dict(id="H", metric="accuracy", a="A", eval_noise=0.0, relation="less"))


def test_single_seed_accuracy_uses_tango_and_matches_mcnemar():
    df = _cavo_outcomes()
    h = dict(id="H", metric="accuracy", a="A", b="B", eval_noise=0.0, relation="less", margin=0.0)
    res = evaluate_hypothesis(h, df)
    # Tango's score statistic at δ0 = 0 is McNemar's: contingencytables gives P = 0.033006
    assert res.pvalue == pytest.approx(0.033006, abs=5e-7)
    assert res.pvalue == pytest.approx(mcnemar([[59, 6], [16, 80]], method="asymptotic").pvalue)
    # Tango_asymptotic_score_CI_paired_2x2(cavo_2012): 95% CI -0.1240 to -0.0054
    assert res.confidence_interval.low == pytest.approx(-0.1240, abs=5e-5)
    assert res.confidence_interval.high == pytest.approx(-0.0054, abs=5e-5)
    assert res.verdict == "VERIFIED"
    assert res.ci_method == "Tango score test and interval"
    h_greater = {**h, "relation": "greater"}
    assert evaluate_hypothesis(h_greater, df).verdict == "FALSIFIED"
    h_eq = {**h, "relation": "equivalent", "margin": 0.05}
    assert evaluate_hypothesis(h_eq, df).verdict == "INCONCLUSIVE"


@pytest.mark.parametrize(
    ("relation", "margin", "ci", "verdict"),
    [
        ("greater", 0.05, (0.06, 0.2), "VERIFIED"),
        ("greater", 0.05, (-0.1, 0.04), "FALSIFIED"),
        ("greater", 0.05, (0.0, 0.1), "INCONCLUSIVE"),
        ("less", 0.0, (-0.2, -0.01), "VERIFIED"),
        ("less", 0.0, (0.01, 0.2), "FALSIFIED"),
        ("equivalent", 0.01, (-0.005, 0.008), "VERIFIED"),
        ("equivalent", 0.01, (0.01, 0.05), "FALSIFIED"),
        ("equivalent", 0.01, (-0.02, 0.0), "INCONCLUSIVE"),
    ],
)
def test_verdict_rule(relation, margin, ci, verdict):
    from robuststats.stats import ConfidenceInterval

    h = Hypothesis(id="H", metric="accuracy", a="A", b="B", eval_noise=0.0,
                   relation=relation, margin=margin)
    assert _verdict(h, ConfidenceInterval(*ci)) == verdict


def test_pvalue_is_the_level_at_which_the_interval_decides():
    df = _simulated()
    rng = np.random.default_rng(0)
    # margins inside the bootstrap distribution: p-values below ~1/B cannot be resolved
    for relation, margin in (("greater", 0.1), ("less", 0.19), ("equivalent", 0.2)):
        h = Hypothesis(id="H", metric="accuracy", a="E8c", b="E8b", eval_noise=0.05,
                       relation=relation, margin=margin)
        ev = gather_evidence(h, df, n_resamples=4000, rng=rng, clean_noise=0.0,
                             confidence_level=0.95)
        p = _decision_pvalue(h, ev.tails)
        assert 0.005 < p < 1.0
        assert _verdict(h, ev.interval(1 - p * 1.05)) != "INCONCLUSIVE"
        assert _verdict(h, ev.interval(1 - p * 0.95)) == "INCONCLUSIVE"


def test_family_verdicts_agree_with_holm_adjusted_pvalues():
    # 5 seeds: the seed-random t has 4 df (3 seeds leave 2 df and decide nothing here)
    df = _simulated(seeds=5)
    hs = [
        dict(id="H1", metric="accuracy", a="E8c", b="E8b", eval_noise=0.05, relation="greater", margin=0.05),
        dict(id="H2", metric="accuracy", a="E8c", b="E8b", eval_noise=0.0, relation="equivalent", margin=0.01),
        dict(id="H3", metric="retention", a="E8c", b="E8b", eval_noise=0.05, relation="greater", margin=0.0),
    ]
    out = evaluate_hypotheses(hs, df, rng=1, n_resamples=4000)
    assert list(out["id"]) == ["H1", "H2", "H3"]
    assert list(out.columns) == [*TABLE_COLUMNS["hypotheses"], "detail"]
    assert (out["multiplicity"] == "holm").all()
    decided = out["verdict"] != "INCONCLUSIVE"
    np.testing.assert_array_equal(decided, out["pvalue_adjusted"] < 0.05)
    assert out.loc[out.id == "H1", "verdict"].item() == "VERIFIED"
    detail = out.loc[out.id == "H1", "detail"].item()
    assert "5 seed(s) x 400 items, seeds and items random; seed-random t" in detail
    assert "diagnostic, models fixed: clustered McNemar over 5 strata" in detail
    assert "holm over 3 hypotheses" in out.loc[out.id == "H1", "detail"].item()
    # the smallest p-value is judged at α/3 (first Holm step): interval level 1 − 0.05/3
    first = out["pvalue"].idxmin()
    assert out.loc[first, "ci_level"] == pytest.approx(1 - 0.05 / 3)
    assert (out["pvalue_adjusted"] >= out["pvalue"]).all()
    unadjusted = evaluate_hypotheses(hs, df, rng=1, n_resamples=4000, multiplicity=None)
    assert (unadjusted["ci_level"] == 0.95).all()
    np.testing.assert_allclose(unadjusted["pvalue_adjusted"], unadjusted["pvalue"])
    assert (unadjusted["multiplicity"] == "none").all()
    spelled = evaluate_hypotheses(hs, df, rng=1, n_resamples=4000, multiplicity="none")
    pd.testing.assert_frame_equal(spelled, unadjusted)


def test_zero_clean_accuracy_is_inconclusive_with_warning():
    acc = {"A": {0.0: 0.7, 0.05: 0.6}, "B": {0.0: 0.7, 0.05: 0.6}}
    df = _simulated(n_items=50, seeds=1, acc=acc)
    df.loc[(df.condition == "B") & (df.eval_noise == 0.0), "correct"] = 0
    h = dict(id="R", metric="retention", a="A", b="B", eval_noise=0.05, relation="greater")
    with pytest.warns(DegenerateDataWarning, match="clean accuracy of 'B' is 0"):
        res = evaluate_hypothesis(h, df, n_resamples=200, rng=0)
    assert res.verdict == "INCONCLUSIVE"
    assert res.pvalue == 1.0


def test_errors_name_the_hypothesis():
    df = _cavo_outcomes()
    h = dict(id="Hx", metric="accuracy", a="A", b="Z", eval_noise=0.0, relation="greater")
    with pytest.raises(InputError, match=r"hypothesis 'Hx': condition 'Z' is not in the outcomes"):
        evaluate_hypothesis(h, df)
    dup = [dict(h, b="B"), dict(h, b="B")]
    with pytest.raises(InputError, match=r"hypothesis ids must be unique, got duplicates \['Hx'\]"):
        evaluate_hypotheses(dup, df)
    with pytest.raises(InputError, match="`multiplicity` must be one of"):
        evaluate_hypotheses([dict(h, b="B")], df, multiplicity="hs")
    assert evaluate_hypotheses([], df).empty


def test_retention_hypothesis_on_correlated_clean_and_noisy_outcomes():
    # noisy outcomes are the clean ones with a fraction of correct items flipped to wrong,
    # as when inference noise perturbs a fixed model; E8c keeps ~98 %, E8b ~75 %
    rng = np.random.default_rng(4)
    n_items, rows = 400, []
    for cond, keep in (("E8c", 0.98), ("E8b", 0.75)):
        for s in range(3):
            clean = rng.random(n_items) < 0.7
            noisy = clean & (rng.random(n_items) < keep)
            rows += _rows(cond, s, 0.0, 0, clean) + _rows(cond, s, 0.05, 0, noisy)
    df = pd.DataFrame(rows)
    h = dict(id="R", metric="retention", a="E8c", b="E8b", eval_noise=0.05,
             relation="greater", margin=0.1)
    res = evaluate_hypothesis(h, df, n_resamples=4000, rng=2)
    assert res.verdict == "VERIFIED"
    assert res.estimate == pytest.approx(0.23, abs=0.05)
    assert res.ci_method == "seed-random t (crossed ANOVA, calibrated Satterthwaite df)"
    assert "3 seed(s) x 400 items, seeds and items random" in res.detail
