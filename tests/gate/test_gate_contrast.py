"""The gate's one-sided test at one level: reference values from R, agreement with the
seed-random t where seeds pair, the decision rule, degenerate data and error messages."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from robuststats.errors import InputError
from robuststats.gate import gate_test, unpaired_variance
from robuststats.stats import (
    DegenerateDataWarning,
    seed_random_retention_test,
    seed_random_test,
)

XC = np.array([0.81, 0.78, 0.84])
XB = np.array([0.80, 0.83, 0.79, 0.82])


def _rows(values, n=5):
    """Rows constant over items: only the seed component (the item part is 0)."""
    return np.repeat(np.asarray(values, float)[:, None], n, axis=1)


def test_independent_seeds_without_item_part_is_welch_t():
    # R 4.2: r <- t.test(c(0.81, 0.78, 0.84), c(0.80, 0.83, 0.79, 0.82),
    #   var.equal = FALSE, alternative = "greater", mu = -0.05, conf.level = 0.95)
    # r$statistic 2.5537695923, r$parameter 3.1056751468, r$p.value 0.0404188431,
    # r$conf.int[1] -0.0454440784
    r = gate_test(None, _rows(XC), None, _rows(XB), max_degradation=0.05, metric="accuracy",
                  margin_type="absolute")
    assert r.design == "independent seeds"
    assert r.statistic == pytest.approx(2.5537695923, abs=1e-9)
    assert r.dof == pytest.approx(3.1056751468, abs=1e-9)
    assert r.pvalue == pytest.approx(0.0404188431, abs=1e-9)
    assert r.lower_bound == pytest.approx(-0.0454440784, abs=1e-9)
    assert r.passed and r.pvalue < r.alpha


def test_one_candidate_model_is_a_prediction_bound():
    # R 4.2: p <- predict(lm(xb ~ 1), newdata = data.frame(row.names = 1),
    #   interval = "prediction", level = 0.90); xb <- c(0.80, 0.83, 0.79, 0.82)
    # p[, "upr"] 0.8580378300, so 0.70 − upr = -0.1580378300
    r = gate_test(None, _rows([0.70]), None, _rows(XB), max_degradation=0.05,
                  metric="accuracy", margin_type="absolute")
    assert r.design == "candidate seed borrowed" and r.dof == 3.0
    assert r.lower_bound == pytest.approx(-0.1580378300, abs=1e-9)
    assert not r.passed


@pytest.mark.parametrize("margin_type", ["absolute", "relative"])
def test_paired_seeds_match_the_seed_random_t(margin_type):
    rng = np.random.default_rng(3)
    k, n = 4, 120
    p = rng.uniform(0.2, 0.9, n)
    clean_a, clean_b = (rng.random((k, n)) < p).astype(float), (rng.random((k, n)) < p).astype(float)
    noisy_a = clean_a * (rng.random((k, n)) < 0.85)
    noisy_b = clean_b * (rng.random((k, n)) < 0.8)
    r = gate_test(clean_a, noisy_a, clean_b, noisy_b, max_degradation=0.05,
                  margin_type=margin_type, pairing="paired", alpha=0.05)
    assert r.design == "paired seeds"
    if margin_type == "absolute":
        ref = seed_random_retention_test(clean_a, noisy_a, clean_b, noisy_b,
                                         alternative="greater", margin=-0.05,
                                         confidence_level=0.95)
        assert r.lower_bound == pytest.approx(ref.confidence_interval.low, abs=1e-12)
        assert r.pvalue == pytest.approx(ref.pvalue, abs=1e-12)
        assert r.dof == pytest.approx(ref.dof)
    # accuracy, absolute: the seed-random t of the noisy outcomes
    acc = gate_test(None, noisy_a, None, noisy_b, max_degradation=0.05, metric="accuracy",
                    margin_type="absolute", pairing="paired")
    ref = seed_random_test(noisy_a, noisy_b, alternative="greater", margin=-0.05)
    assert acc.lower_bound == pytest.approx(ref.confidence_interval.low, abs=1e-12)
    assert acc.pvalue == pytest.approx(ref.pvalue, abs=1e-12)


def test_decision_is_the_lower_bound_and_the_pvalue_alike():
    rng = np.random.default_rng(11)
    for _ in range(60):
        kc, kb, n = rng.integers(1, 4), rng.integers(2, 6), rng.integers(20, 80)
        p = rng.uniform(0.3, 0.95, n)
        cc, cb = (rng.random((kc, n)) < p) * 1.0, (rng.random((kb, n)) < p) * 1.0
        zc = cc * (rng.random((kc, n)) < rng.uniform(0.5, 1.0))
        zb = cb * (rng.random((kb, n)) < rng.uniform(0.5, 1.0))
        m = float(rng.uniform(0.0, 0.5))
        for mt in ("relative", "absolute"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DegenerateDataWarning)
                r = gate_test(cc, zc, cb, zb, max_degradation=m, margin_type=mt)
            assert r.passed == (r.lower_bound > -m) == (r.pvalue < r.alpha)
            if mt == "relative":
                assert r.estimate == pytest.approx(r.candidate / r.baseline - 1.0)


def test_unpaired_variance_is_unbiased_for_a_normal_crossed_design():
    # L_g[s, i] = a_gs + b_i + d_gi + e_gsi; Var(T) = σa²h + σd²·2/n + σe²h/n
    rng = np.random.default_rng(5)
    kc, kb, n, sa, sd, se = 3, 5, 40, 0.3, 0.4, 1.0
    h = 1 / kc + 1 / kb
    truth = sa**2 * h + 2 * sd**2 / n + se**2 * h / n
    est, diffs = [], []
    for _ in range(4000):
        b = rng.normal(0, 1.0, n)
        lc = rng.normal(0, sa, (kc, 1)) + b + rng.normal(0, sd, n) + rng.normal(0, se, (kc, n))
        lb = rng.normal(0, sa, (kb, 1)) + b + rng.normal(0, sd, n) + rng.normal(0, se, (kb, n))
        est.append(unpaired_variance(lc, lb).variance)
        diffs.append(lc.mean() - lb.mean())
    assert np.var(diffs) == pytest.approx(truth, rel=0.06)
    # the truncation of the item part only adds: the mean estimate is at or above the truth
    assert truth * 0.97 < np.mean(est) < truth * 1.08


def test_one_discordant_pair_cannot_pass_a_zero_margin():
    n = 50
    clean = np.ones((1, n))
    noisy_b = np.ones((1, n))
    noisy_c = noisy_b.copy()
    noisy_c[0, 0] = 0.0
    better = gate_test(clean, noisy_b, clean, noisy_c, max_degradation=0.0,
                       margin_type="absolute")
    assert better.design == "one model each" and abs(better.statistic) <= 1.0 + 1e-12
    assert not better.passed


def test_a_candidate_that_lost_everything_fails_without_an_error():
    clean = np.ones((2, 10))
    zero = np.zeros((1, 10))
    r = gate_test(zero, zero, clean, clean * 0.5 + 0.0, max_degradation=0.2)
    assert not r.passed and "clean accuracy is 0" in r.reason
    r = gate_test(np.ones((1, 10)), zero, clean, clean, max_degradation=0.2)
    assert not r.passed and r.estimate == -1.0 and r.lower_bound == -1.0
    assert math.isnan(r.power_at_margin)


def test_identical_sides_warn_and_use_a_score_type_bound():
    x = np.tile([1.0, 0.0, 1.0, 1.0], (2, 100))
    with pytest.warns(DegenerateDataWarning, match="no spread"):
        r = gate_test(x, x, x, x, max_degradation=0.1, pairing="paired")
    assert r.method == "score-type bound (no spread)" and r.estimate == 0.0
    assert r.passed and r.lower_bound < 0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"max_degradation": 1.0}, r"`max_degradation` must be a number in \[0, 1\), got 1.0"),
    ({"max_degradation": -0.1, "margin_type": "absolute"},
     r"`max_degradation` must be a number ≥ 0, got -0.1"),
    ({"max_degradation": 0.1, "metric": "retension"}, r"did you mean 'retention'"),
    ({"max_degradation": 0.1, "margin_type": "ratio"}, r"`margin_type` must be one of"),
    ({"max_degradation": 0.1, "alpha": 1.5}, r"`alpha` must be a number in \(0, 1\)"),
    ({"max_degradation": 0.1, "pairing": "paired"},
     r"`pairing` 'paired' needs as many candidate as baseline seeds, got 1 and 3"),
])
def test_bad_options_name_the_parameter(kwargs, match):
    c = np.ones((1, 6)) * [1, 0, 1, 1, 0, 1]
    b = np.ones((3, 6)) * [1, 1, 1, 0, 0, 1]
    with pytest.raises(InputError, match=match):
        gate_test(c, c, b, b, **kwargs)


def test_bad_data_names_the_problem():
    c = np.ones((1, 6))
    with pytest.raises(InputError, match="'retention' needs the clean outcomes"):
        gate_test(None, c, None, c, max_degradation=0.1)
    with pytest.raises(InputError, match="must share the items"):
        gate_test(c, c, np.ones((2, 5)), np.ones((2, 5)), max_degradation=0.1)
    with pytest.raises(InputError, match="baseline's clean accuracy is 0"):
        gate_test(c, c, np.zeros((2, 6)), np.zeros((2, 6)), max_degradation=0.1)
    with pytest.raises(InputError, match="relative margin is undefined; use `margin_type`"):
        gate_test(None, c, None, np.zeros((2, 6)), max_degradation=0.1, metric="accuracy")


def test_one_model_each_accuracy_is_tangos_score_test():
    # 100 items, the candidate answers none under noise, the baseline 2: two discordant
    # pairs. The paired t over items gave the lower bound −0.0434 > −0.05 and passed; two
    # pairs cannot show a loss below 5 points. Tango's score test (as seed_random_test uses
    # for one seed) does not pass it.
    cand, base = np.zeros((1, 100)), np.zeros((1, 100))
    base[0, :2] = 1.0
    r = gate_test(None, cand, None, base, max_degradation=0.05, metric="accuracy",
                  margin_type="absolute")
    ref = seed_random_test(cand, base, alternative="greater", margin=-0.05,
                           confidence_level=0.95)
    assert r.design == "one model each" and r.method.startswith("Tango score test")
    assert r.lower_bound == pytest.approx(ref.confidence_interval.low, abs=1e-12)
    assert r.pvalue == pytest.approx(ref.pvalue, abs=1e-12) and r.dof == math.inf
    assert r.lower_bound < -0.05 and not r.passed
    rng = np.random.default_rng(8)
    for _ in range(40):
        n = int(rng.integers(20, 200))
        p = rng.uniform(0.0, 1.0, n)
        zc = (rng.random((1, n)) < p * rng.uniform(0.6, 1.0)) * 1.0
        zb = (rng.random((1, n)) < p) * 1.0
        m = float(rng.uniform(0.0, 0.2))
        r = gate_test(None, zc, None, zb, max_degradation=m, metric="accuracy",
                      margin_type="absolute")
        assert r.passed == (r.lower_bound > -m) == (r.pvalue < r.alpha)
        assert math.isfinite(r.detectable_degradation) and 0 <= r.power_at_margin <= 1
