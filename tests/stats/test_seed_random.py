"""Seed-random intervals and tests: formulas, R references, discordant pairs, simulator."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from robuststats.errors import InputError
from robuststats.stats import (
    DegenerateDataWarning,
    crossed_variance,
    mcnemar,
    seed_random_accuracy,
    seed_random_retention,
    seed_random_retention_test,
    seed_random_test,
    simulate_outcomes,
    true_effects,
)
from robuststats.stats._paired_ci import paired_difference_ci, tango_pvalue
from robuststats.stats._seed_calibration import seed_bootstrap_t
from robuststats.stats._seed_random import seed_random_evidence
from robuststats.stats._simulate import (
    SEED_EFFECT_PRESETS,
    seed_model,
    seed_retention_sd,
    simulate_matrices,
)

# A balanced 4 seeds × 6 items table of per-seed item differences (tenths).
D46 = np.array([[3, 5, 1, 4, 6, 2],
                [1, 4, 0, 2, 5, 1],
                [4, 7, 3, 5, 6, 4],
                [2, 3, 1, 3, 4, 0]], dtype=float) / 10


def _anova(d):
    k, n = d.shape
    g = d.mean()
    ss_seed = n * np.sum((d.mean(axis=1) - g) ** 2)
    ss_item = k * np.sum((d.mean(axis=0) - g) ** 2)
    ss_resid = np.sum((d - g) ** 2) - ss_seed - ss_item
    return ss_seed / (k - 1), ss_item / (n - 1), ss_resid / ((k - 1) * (n - 1))


# --- the crossed variance --------------------------------------------------------------

def test_crossed_variance_matches_hand_anova():
    ms_s, ms_i, ms_e = _anova(D46)
    cv = crossed_variance(D46)
    assert (cv.ms_seed, cv.ms_item, cv.ms_resid) == pytest.approx((ms_s, ms_i, ms_e), rel=1e-12)
    assert cv.variance == pytest.approx((ms_s + ms_i - ms_e) / 24, rel=1e-12)
    terms = (ms_s**2 / 3 + ms_i**2 / 5 + ms_e**2 / 15)
    assert cv.dof == pytest.approx((ms_s + ms_i - ms_e) ** 2 / terms, rel=1e-12)


def test_crossed_variance_matches_lme4_and_lmertest():
    # R 4.2, lme4 1.1, lmerTest 3.1 (balanced: REML = ANOVA estimates, Satterthwaite df):
    # dat <- data.frame(seed = factor(rep(1:4, each = 6)), item = factor(rep(1:6, 4)),
    #                   d = c(3,5,1,4,6,2, 1,4,0,2,5,1, 4,7,3,5,6,4, 2,3,1,3,4,0) / 10)
    # fit <- lmer(d ~ 1 + (1|seed) + (1|item), data = dat, REML = TRUE)
    # as.data.frame(VarCorr(fit))$vcov  -> item 0.02522233580061, seed 0.01566665752160,
    #                                      Residual 0.00377777283359
    # summary(fit)$coefficients          -> Estimate 0.316666666667, Std. Error 0.0909823840929,
    #                                      df 7.33776563767, t 3.48052724518, p 0.00952066921645
    # anova(aov(d ~ seed + item, dat))   -> Mean Sq 0.0977777777778, 0.1046666666667,
    #                                      0.0037777777778
    cv = crossed_variance(D46)
    assert cv.var_item == pytest.approx(0.02522233580061, rel=1e-5)  # lme4 optimizer tolerance
    assert cv.var_seed == pytest.approx(0.01566665752160, rel=1e-5)
    assert cv.var_resid == pytest.approx(0.00377777283359, rel=1e-5)
    assert cv.ms_seed == pytest.approx(0.0977777777778, rel=1e-10)
    assert cv.ms_item == pytest.approx(0.1046666666667, rel=1e-10)
    assert math.sqrt(cv.variance) == pytest.approx(0.0909823840929, rel=1e-5)
    assert cv.dof == pytest.approx(7.33776563767, rel=1e-5)
    x = np.clip(D46 + 0.2, 0, 1)  # any x, y with x − y = D46
    res = seed_random_test(x, x - D46)
    assert res.estimate == pytest.approx(0.316666666667)
    assert res.statistic == pytest.approx(3.48052724518, rel=1e-5)
    # lmerTest's p-value is the plug-in's; the shipped test is calibrated for its 4 seeds
    # (stats/_few_seeds.py) and never rejects where the plug-in does not
    plug_in = 2.0 * special.stdtr(cv.dof, -abs(res.statistic))
    assert plug_in == pytest.approx(0.00952066921645, rel=1e-4)
    assert res.pvalue >= plug_in
    assert res.dof == pytest.approx(7.33776563767, rel=1e-5)


def test_one_seed_is_the_paired_t_over_items():
    rng = np.random.default_rng(1)
    d = rng.normal(0.1, 1.0, 40)
    cv = crossed_variance(d)
    assert cv.variance == pytest.approx(np.var(d, ddof=1) / 40)
    assert cv.dof == 39
    x = rng.uniform(0.3, 0.7, 40)
    y = np.clip(x - d / 10, 0, 1)
    res = seed_random_test(x, y)
    ref = stats.ttest_1samp(x - y, 0.0)
    assert res.statistic == pytest.approx(ref.statistic)
    assert res.pvalue == pytest.approx(ref.pvalue)
    assert res.method == "paired t over items (one seed)"


def test_without_item_term_it_is_the_t_test_on_per_seed_means():
    # MS_item ≤ MS_resid ≤ MS_seed: V = MS_seed/(kn) on k − 1 df, the t test on the k seed
    # means
    rng = np.random.default_rng(4)
    while True:  # independent outcomes: MS_item ≤ MS_resid about half the time
        x = (rng.random((5, 60)) < 0.6).astype(float)
        y = (rng.random((5, 60)) < 0.55).astype(float)
        cv = crossed_variance(x - y)
        if cv.ms_item <= cv.ms_resid <= cv.ms_seed:
            break
    res = seed_random_test(x, y)
    ref = stats.ttest_1samp((x - y).mean(axis=1), 0.0)
    assert res.dof == 4
    assert res.statistic == pytest.approx(ref.statistic)
    assert res.pvalue == pytest.approx(ref.pvalue)


def test_a_seed_mean_square_below_the_residual_is_floored_there():
    # E MS_seed = σ_e² + nσ_a² ≥ E MS_resid: V = max(MS_seed, MS_resid)/(kn) without an item
    # term, so seed means that agree by chance do not shrink the variance below σ_e²/(kn)
    rng = np.random.default_rng(5)
    while True:
        x = (rng.random((5, 60)) < 0.6).astype(float)
        y = (rng.random((5, 60)) < 0.55).astype(float)
        cv = crossed_variance(x - y)
        if max(cv.ms_item, cv.ms_seed) < cv.ms_resid:
            break
    assert cv.variance == pytest.approx(cv.ms_resid / 300.0, rel=1e-12)
    res = seed_random_test(x, y)
    assert res.dof == 4
    assert res.statistic == pytest.approx((x - y).mean() / math.sqrt(cv.ms_resid / 300.0))
    assert res.pvalue == pytest.approx(2.0 * stats.t.sf(abs(res.statistic), 4))


def test_degrees_of_freedom_never_below_seeds_minus_one():
    rng = np.random.default_rng(8)
    for _ in range(200):
        d = rng.integers(-1, 2, (3, 30)).astype(float)
        assert crossed_variance(d).dof >= 2


def test_one_seed_of_binary_outcomes_is_tango():
    x = np.repeat([1, 1, 0, 0], [59, 6, 16, 80])  # Cavo et al. (Fagerland et al. 2017)
    y = np.repeat([1, 0, 1, 0], [59, 6, 16, 80])
    res = seed_random_test(x, y)
    ci = paired_difference_ci(59, 6, 16, 80, confidence_level=0.95, method="tango")
    assert tuple(res.confidence_interval) == pytest.approx(tuple(ci))
    assert tuple(res.confidence_interval) == pytest.approx((-0.1240, -0.0054), abs=1e-4)
    assert res.pvalue == pytest.approx(tango_pvalue(6, 16, 161, 0.0, "two-sided"))
    assert res.dof == math.inf and res.n_seeds == 1
    greater = seed_random_test(x, y, alternative="greater", margin=-0.1)
    assert greater.pvalue == pytest.approx(tango_pvalue(6, 16, 161, -0.1, "greater"))
    assert greater.confidence_interval.high == 1.0


# --- options, one-sided tests and margins ------------------------------------------------

def test_one_sided_and_margin():
    two = seed_random_test(np.clip(D46 + 0.2, 0, 1), np.clip(D46 + 0.2, 0, 1) - D46)
    x, y = np.clip(D46 + 0.2, 0, 1), np.clip(D46 + 0.2, 0, 1) - D46
    g = seed_random_test(x, y, alternative="greater")
    assert g.pvalue == pytest.approx(two.pvalue / 2)
    assert g.confidence_interval.high == 1.0  # one-sided, clipped to the range of a − b
    lower90 = seed_random_test(x, y, confidence_level=0.90).confidence_interval.low
    assert g.confidence_interval.low == pytest.approx(lower90)
    ls = seed_random_test(x, y, alternative="less")
    assert ls.pvalue == pytest.approx(1 - two.pvalue / 2)
    m = seed_random_test(x, y, margin=0.1)
    assert m.statistic == pytest.approx((two.estimate - 0.1) / two.standard_error)
    assert m.confidence_interval == two.confidence_interval


def test_to_frame_uses_glossary_columns():
    frame = seed_random_test(np.clip(D46 + 0.2, 0, 1), np.clip(D46 + 0.2, 0, 1) - D46).to_frame()
    for col in ("n_seeds", "n_items", "estimate", "ci_low", "ci_high", "ci_level", "ci_method",
                "statistic", "dof", "pvalue"):
        assert col in frame.columns
    assert frame.loc[0, "ci_level"] == 0.95 and len(frame) == 1


def test_evidence_inverts_the_same_t():
    x, y = np.clip(D46 + 0.2, 0, 1), np.clip(D46 + 0.2, 0, 1) - D46
    res = seed_random_test(x, y)
    ev = seed_random_evidence(res, "H1")
    assert tuple(ev.interval(0.95)) == pytest.approx(tuple(res.confidence_interval))
    low_tail, high_tail = ev.tails(0.0)
    assert 2 * min(low_tail, high_tail) == pytest.approx(res.pvalue)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(alternative="greatr"), r"`alternative` must be one of .*did you mean 'greater'"),
        (dict(margin=math.nan), r"`margin` must be a finite number"),
        (dict(confidence_level=1.0), r"`confidence_level` must be a number in \(0, 1\)"),
    ],
)
def test_option_errors(kwargs, match):
    with pytest.raises(InputError, match=match):
        seed_random_test(np.ones((2, 3)), np.zeros((2, 3)), **kwargs)


def test_shape_errors():
    with pytest.raises(InputError, match=r"inputs must be aligned"):
        seed_random_test(np.ones((2, 3)), np.zeros((3, 3)))
    with pytest.raises(InputError, match=r"at least 2 items"):
        seed_random_test(np.ones((2, 1)), np.zeros((2, 1)))
    with pytest.raises(InputError, match=r"`x` must contain values in \[0, 1\]"):
        seed_random_test(np.full((2, 3), 2.0), np.zeros((2, 3)))
    with pytest.raises(InputError, match=r"`values` must have shape"):
        crossed_variance(np.ones((2, 2, 2)))


def test_identical_conditions_warn_and_return_the_tango_bound():
    x = (np.random.default_rng(2).random((3, 50)) < 0.5).astype(float)
    with pytest.warns(DegenerateDataWarning, match="no spread"):
        res = seed_random_test(x, x)
    z = stats.norm.ppf(0.975)
    h0 = z * z / (50 + z * z)
    assert res.estimate == 0.0 and res.pvalue == 1.0
    assert tuple(res.confidence_interval) == pytest.approx((-h0, h0))


# --- no interval claims more than its discordant pairs carry ----------------------------

@pytest.mark.parametrize(("k", "n"), [(5, 500), (2, 40), (10, 1319), (2, 2)])
def test_one_discordant_pair_never_excludes_zero(k, n):
    # the examples: the two-way BCa interval excluded 0 here
    x = np.zeros((k, n))
    y = np.zeros((k, n))
    x[k - 1, n // 2] = 1.0
    res = seed_random_test(x, y)
    assert res.confidence_interval.contains(0.0)
    assert res.statistic == pytest.approx(1.0)
    assert res.pvalue > 0.3


@settings(max_examples=300, deadline=None)
@given(
    k=st.integers(1, 10),
    n=st.integers(2, 30),
    seed=st.integers(0, 2**32 - 1),
    p=st.floats(0.0, 1.0),
    q=st.floats(0.0, 0.3),
    level=st.sampled_from([0.7, 0.9, 0.95, 0.99]),
)
def test_pooled_mcnemar_p_of_one_means_the_interval_covers_zero(k, n, seed, p, q, level):
    rng = np.random.default_rng(seed)
    x = (rng.random((k, n)) < p).astype(float)
    flip = rng.random((k, n)) < q  # few discordant pairs, so |b − c| ≤ 1 happens often
    # undo surplus flips of the majority kind so that |b − c| ≤ 1 (pooled exact p = 1)
    up = np.flatnonzero(flip & (x == 1))
    down = np.flatnonzero(flip & (x == 0))
    surplus = len(up) - len(down) - int(rng.integers(-1, 2))
    undo = up[:surplus] if surplus > 0 else down[:-surplus]
    flip.flat[undo] = False
    y = np.where(flip, 1 - x, x)
    b, c = int(np.sum(x * (1 - y))), int(np.sum((1 - x) * y))
    assert abs(b - c) <= 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        pooled = mcnemar([[0, b], [c, 0]], method="exact").pvalue if b + c else 1.0
        res = seed_random_test(x, y, confidence_level=level)
    if pooled == 1.0:
        assert res.confidence_interval.contains(0.0), (b, c, res)
        assert res.pvalue >= 1.0 - 0.6827 - 1e-9 or res.pvalue == pytest.approx(1.0)


@settings(max_examples=100, deadline=None)
@given(k=st.integers(2, 10), n=st.integers(2, 30), m=st.integers(2, 4),
       seed=st.integers(0, 2**32 - 1))
def test_noise_seed_means_with_one_net_discordant_pair_cover_zero(k, n, m, seed):
    # x, y are means over m noisy re-evaluations; m·(x − y) has integer row sums
    rng = np.random.default_rng(seed)
    x = np.zeros((k, n))
    y = np.zeros((k, n))
    net = 0
    while net != 1:
        x = rng.integers(0, m + 1, (k, n)) * (rng.random((k, n)) < 0.1) / m
        y = x.copy()
        s, i = rng.integers(k), rng.integers(n)
        if x[s, i] < 1:
            x[s, i] += 1 / m
        net = round(float(np.sum(x - y)) * m)
    res = seed_random_test(x, y)
    assert res.confidence_interval.contains(0.0)


# --- retention ----------------------------------------------------------------------------

def test_one_seed_retention_is_the_delta_method():
    a, b, c, d = 700, 150, 60, 409
    clean = np.repeat([1, 1, 0, 0], [a, b, c, d]).astype(float)
    noisy = np.repeat([1, 0, 1, 0], [a, b, c, d]).astype(float)
    n = clean.size
    res = seed_random_retention(clean, noisy)
    assert res.estimate == pytest.approx((a + c) / (a + b))
    # Var(log R) ≈ (b + c)/((a + b)(a + c)), times n/(n − 1) for the ddof-1 item variance
    delta = math.sqrt((b + c) / ((a + b) * (a + c)) * n / (n - 1))
    assert res.standard_error == pytest.approx(delta, rel=1e-10)
    q = stats.t.ppf(0.975, n - 1)
    assert res.confidence_interval.low == pytest.approx(res.estimate * math.exp(-q * delta))


def test_retention_difference_linearization_matches_finite_differences():
    rng = np.random.default_rng(3)
    mats = simulate_matrices(seed_model("moderate"), 4, 200, rng)
    ca, na, cb, nb = mats[0, 0], mats[0, 1], mats[1, 0], mats[1, 1]
    res = seed_random_retention_test(ca, na, cb, nb)
    assert res.estimate == pytest.approx(na.mean() / ca.mean() - nb.mean() / cb.mean())
    # the influence values: perturbing one cell by h moves the estimate by L_si·h/(kn)
    h = 1e-7
    base = res.estimate
    ca2 = ca.copy()
    ca2[1, 5] += h
    moved = na.mean() / ca2.mean() - nb.mean() / cb.mean()
    r_a = na.mean() / ca.mean()
    infl = -(r_a / ca.mean())  # ∂/∂c_si of (z − R c)/C̄
    assert (moved - base) / (h / ca.size) == pytest.approx(infl, rel=1e-4)
    # same crossed variance as the difference when applied to the influence matrix
    la = (na - r_a * ca) / ca.mean()
    lb = (nb - nb.mean() / cb.mean() * cb) / cb.mean()
    assert res.standard_error == pytest.approx(math.sqrt(crossed_variance(la - lb).variance))


def test_retention_with_zero_clean_accuracy_warns():
    zero = np.zeros((2, 5))
    with pytest.warns(DegenerateDataWarning, match="retention is undefined"):
        res = seed_random_retention_test(zero, zero, np.ones((2, 5)), np.ones((2, 5)))
    assert math.isnan(res.estimate) and res.pvalue == 1.0
    with pytest.warns(DegenerateDataWarning, match="retention is undefined"):
        single = seed_random_retention(zero, zero)
    assert tuple(single.confidence_interval) == (0.0, math.inf)


def test_accuracy_interval_is_clipped_to_unit_range():
    x = np.ones((3, 20))
    x[0, 0] = 0.0
    res = seed_random_accuracy(x)
    assert 0.0 <= res.confidence_interval.low <= res.estimate <= res.confidence_interval.high
    assert res.confidence_interval.high <= 1.0


def test_seed_bootstrap_t_studentizes_by_the_crossed_se():
    rng = np.random.default_rng(6)
    mats = simulate_matrices(seed_model("large"), 5, 100, rng)
    low, high = seed_bootstrap_t([mats[0, 1], mats[1, 1]], "difference", confidence_level=0.95,
                                 n_resamples=2000, rng=rng)
    est = float(np.mean(mats[0, 1] - mats[1, 1]))
    assert low < est < high


# --- the simulator ------------------------------------------------------------------------

@pytest.mark.parametrize(("preset", "target"),
                         [("none", 0.0), ("small", 0.02), ("moderate", 0.04), ("large", 0.075)])
def test_presets_match_their_per_seed_retention_sd(preset, target):
    assert seed_retention_sd(preset, n_draws=100_000, rng=1) == pytest.approx(target, abs=0.002)


def test_true_effects_are_zero_without_effects_and_match_simulation():
    null = true_effects("large")
    assert np.allclose(null[["estimate", "retention_difference"]].to_numpy(), 0.0)
    truth = true_effects("large", accuracy_effect=0.3, robustness_effect=0.3).iloc[-1]
    rng = np.random.default_rng(12)
    sims = np.stack([simulate_matrices(seed_model("large", accuracy_effect=0.3,
                                                  robustness_effect=0.3), 20, 2000, rng)
                     for _ in range(10)])  # (10, 2, 2, k, n)
    acc = sims.mean(axis=(0, 3, 4))
    assert acc[0, 1] == pytest.approx(truth["accuracy_a"], abs=0.01)
    assert acc[1, 1] == pytest.approx(truth["accuracy_b"], abs=0.01)
    ret = acc[:, 1] / acc[:, 0]
    assert ret[0] - ret[1] == pytest.approx(truth["retention_difference"], abs=0.01)


def test_simulate_outcomes_table():
    df = simulate_outcomes(3, 7, seed_effects="small", n_noise_seeds=2, rng=5)
    assert list(df.columns) == ["condition", "seed", "eval_noise", "noise_seed", "item_id",
                                "correct"]
    # clean: 2 conditions × 3 seeds × 7 items; noisy: the same × 2 noise seeds
    assert len(df) == 2 * 3 * 7 * 3
    assert set(df["correct"]) <= {0, 1}
    assert df.equals(simulate_outcomes(3, 7, seed_effects="small", n_noise_seeds=2, rng=5))
    assert not df.duplicated(["condition", "seed", "eval_noise", "noise_seed",
                              "item_id"]).any()


def test_simulator_validation():
    with pytest.raises(InputError, match=r"`seed_effects` must be one of .*did you mean"):
        simulate_outcomes(seed_effects="moderat")
    with pytest.raises(InputError, match=r"`item_sd` must be a number ≥ 0, got -1\.0"):
        simulate_outcomes(item_sd=-1.0)
    with pytest.raises(InputError, match=r"`eval_noise` must start with 0"):
        simulate_outcomes(eval_noise=(0.05, 0.1))
    with pytest.raises(InputError, match=r"`n_seeds` must be a positive integer"):
        simulate_outcomes(0)
    assert set(SEED_EFFECT_PRESETS) == {"none", "small", "moderate", "large"}
