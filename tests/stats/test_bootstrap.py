"""Bootstrap intervals: closed forms, scipy.stats.bootstrap, degenerate data, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from robuststats.errors import InputError
from robuststats.stats import (
    DegenerateDataWarning,
    bootstrap_accuracy,
    bootstrap_difference,
    bootstrap_retention,
    bootstrap_retention_difference,
)
from robuststats.stats.resampling._resample import crossed_variance_ratio, resampled_means


def _paired(a, b, c, d):
    """Clean/noisy item outcomes with a = both correct, b = clean only, c = noisy only."""
    clean = np.repeat([1, 1, 0, 0], [a, b, c, d]).astype(float)
    noisy = np.repeat([1, 0, 1, 0], [a, b, c, d]).astype(float)
    return clean, noisy


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_accuracy_agrees_with_scipy_bootstrap(method):
    rng = np.random.default_rng(3)
    x = (rng.random(200) < 0.62).astype(float)
    ours = bootstrap_accuracy(x, method=method, n_resamples=20_000, rng=1)
    ref = stats.bootstrap((x,), np.mean, method="BCa" if method == "bca" else "percentile",
                          n_resamples=20_000, rng=np.random.default_rng(2))
    # accuracies live on a grid of 1/200, and here the bootstrap CDF at the grid point
    # 0.555 is 0.02517 (binomial(200, 0.625)), within Monte Carlo error of 0.025: either
    # Monte Carlo stream may land on 0.555 or on 0.56, one atom apart
    atom = 1 / 200 + 1e-9
    assert ours.confidence_interval.low == pytest.approx(ref.confidence_interval.low, abs=atom)
    assert ours.confidence_interval.high == pytest.approx(ref.confidence_interval.high, abs=atom)
    assert ours.standard_error == pytest.approx(ref.standard_error, rel=0.03)
    # and the binomial standard error sqrt(p(1 - p)/n)
    p = x.mean()
    assert ours.standard_error == pytest.approx(math.sqrt(p * (1 - p) / 200), rel=0.03)


def test_log_ratio_standard_error_matches_delta_method():
    # Var(log R) ≈ (b + c) / ((a + b)(a + c))  (ratio of paired proportions, delta method)
    a, b, c, d = 700, 150, 60, 409
    clean, noisy = _paired(a, b, c, d)
    res = bootstrap_retention(clean, noisy, method="log-ratio", n_resamples=20_000, rng=5)
    assert res.estimate == pytest.approx((a + c) / (a + b))
    assert res.standard_error == pytest.approx(math.sqrt((b + c) / ((a + b) * (a + c))), rel=0.03)


def test_log_ratio_interval_matches_fagerland_wald_ratio_interval():
    # Cavo et al. data [[59, 6], [16, 80]]: ratio of paired proportions π1+/π+1 = 65/75.
    # contingencytables: Wald_CI_ratio_paired_2x2(cavo_2012) -> 0.8667 (95% CI 0.7597 to 0.9886)
    # retention = acc_noisy / acc_clean, so noisy = rows (59 + 6), clean = columns (59 + 16)
    noisy = np.repeat([1, 1, 0, 0], [59, 6, 16, 80]).astype(float)
    clean = np.repeat([1, 0, 1, 0], [59, 6, 16, 80]).astype(float)
    res = bootstrap_retention(clean, noisy, method="log-ratio", n_resamples=40_000, rng=11)
    assert res.estimate == pytest.approx(0.8667, abs=5e-5)
    assert res.confidence_interval.low == pytest.approx(0.7597, abs=4e-3)
    assert res.confidence_interval.high == pytest.approx(0.9886, abs=4e-3)


def test_studentized_interval_near_wald_ratio_interval():
    noisy = np.repeat([1, 1, 0, 0], [59, 6, 16, 80]).astype(float)
    clean = np.repeat([1, 0, 1, 0], [59, 6, 16, 80]).astype(float)
    res = bootstrap_retention(clean, noisy, method="studentized", n_resamples=20_000, rng=4)
    # bootstrap-t corrects skewness, so only a loose agreement with the Wald interval
    assert res.confidence_interval.low == pytest.approx(0.7597, abs=0.02)
    assert res.confidence_interval.high == pytest.approx(0.9886, abs=0.02)
    assert res.confidence_interval.contains(res.estimate)


def test_difference_standard_error_matches_paired_closed_form():
    # Var(p̂x − p̂y) = [(b + c)/n − δ²] / n for paired 0/1 outcomes
    a, b, c, d = 500, 120, 70, 310
    x, y = _paired(a, b, c, d)
    n = a + b + c + d
    res = bootstrap_difference(x, y, n_resamples=20_000, rng=8, method="percentile")
    delta = (b - c) / n
    assert res.estimate == pytest.approx(delta)
    assert res.standard_error == pytest.approx(math.sqrt(((b + c) / n - delta**2) / n), rel=0.03)


def test_exact_pigeonhole_variance_formula_matches_simulation():
    rng = np.random.default_rng(0)
    lin = rng.normal(size=(4, 30)) + rng.normal(size=30)[None, :]
    parts = resampled_means([lin], 40_000, np.random.default_rng(1))
    boot_var = parts["means"][:, 0].var()
    ratio = crossed_variance_ratio(lin)
    # recover Var* from the ratio and the target; compare with simulation
    k, n = lin.shape
    grand = lin.mean()
    r = lin.mean(axis=1)
    cm = lin.mean(axis=0)
    ms_r = n * np.sum((r - grand) ** 2) / (k - 1)
    ms_c = k * np.sum((cm - grand) ** 2) / (n - 1)
    ms_e = np.sum((lin - r[:, None] - cm[None, :] + grand) ** 2) / ((k - 1) * (n - 1))
    target = max((ms_r - ms_e) / n, 0) / k + max((ms_c - ms_e) / k, 0) / n + ms_e / (k * n)
    assert target / ratio**2 == pytest.approx(boot_var, rel=0.03)


def test_crossed_correction_removes_residual_double_counting():
    # pure seed × item noise: the pigeonhole bootstrap variance is ~3 σ²/(kn) while the
    # variance of the mean is σ²/(kn), so the ratio is ~1/sqrt(3) for many seeds (the
    # truncation of the estimated seed variance at 0 adds a few percent)
    rng = np.random.default_rng(5)
    lin = rng.normal(size=(40, 2000))
    assert crossed_variance_ratio(lin) == pytest.approx(1 / math.sqrt(3), rel=0.08)
    # pure item effects (identical seeds): nothing to correct
    same = np.repeat(rng.normal(size=(1, 500)), 6, axis=0)
    assert crossed_variance_ratio(same) == pytest.approx(1.0, rel=0.01)


def test_two_dimensional_input_uses_two_way_scheme():
    rng = np.random.default_rng(2)
    x = (rng.random((5, 300)) < 0.7).astype(float)
    y = (rng.random((5, 300)) < 0.6).astype(float)
    res = bootstrap_difference(x, y, n_resamples=2_000, rng=1, seeds="bootstrap")
    assert res.scheme == "seeds x items"
    assert res.estimate == pytest.approx(x.mean() - y.mean())
    assert res.confidence_interval.contains(res.estimate)
    assert bootstrap_difference(x[0], y[0], n_resamples=500, rng=1).scheme == "items"


def test_retention_difference_estimate_and_to_frame():
    rng = np.random.default_rng(6)
    ca, na, cb, nb = ((rng.random((3, 200)) < p).astype(float) for p in (0.8, 0.7, 0.8, 0.6))
    res = bootstrap_retention_difference(ca, na, cb, nb, n_resamples=2_000, rng=3,
                                         seeds="bootstrap")
    assert res.estimate == pytest.approx(na.mean() / ca.mean() - nb.mean() / cb.mean())
    frame = res.to_frame()
    assert list(frame["quantity"]) == ["retention_difference"]
    assert "bootstrap_distribution" not in frame
    assert "statistic" not in frame  # `statistic` is kept for test statistics
    assert list(frame.columns) == ["quantity", "estimate", "ci_low", "ci_high", "ci_level",
                                   "ci_method", "standard_error", "n_resamples", "scheme",
                                   "n_seeds", "n_items"]
    assert frame.iloc[0][["ci_level", "ci_method", "n_seeds", "n_items"]].tolist() == [
        0.95, "bca", 3, 200]


def test_proportion_inputs_are_accepted():
    rng = np.random.default_rng(7)
    clean = (rng.random(100) < 0.8).astype(float)
    noisy = rng.integers(0, 5, size=100) / 4  # mean over 4 noisy re-evaluations
    res = bootstrap_retention(clean, noisy, n_resamples=1_000, rng=1)
    assert res.estimate == pytest.approx(noisy.mean() / clean.mean())


def test_same_seed_reproduces_and_generator_is_used():
    x = (np.random.default_rng(0).random(150) < 0.5).astype(float)
    r1 = bootstrap_accuracy(x, n_resamples=500, rng=42)
    r2 = bootstrap_accuracy(x, n_resamples=500, rng=np.random.default_rng(42))
    assert r1.confidence_interval == r2.confidence_interval
    np.testing.assert_array_equal(r1.bootstrap_distribution, r2.bootstrap_distribution)


def test_all_correct_warns_and_returns_wilson_interval():
    x = np.ones(50)
    with pytest.warns(DegenerateDataWarning, match="no spread"):
        res = bootstrap_accuracy(x, n_resamples=200, rng=0)
    # Wilson interval for 50/50: lower = n / (n + z²)
    z = stats.norm.ppf(0.975)
    assert res.confidence_interval.low == pytest.approx(50 / (50 + z**2))
    assert res.confidence_interval.high == 1.0


def test_no_discordance_difference_uses_score_bound():
    x = np.array([1, 0, 1, 1, 0] * 8, dtype=float)
    with pytest.warns(DegenerateDataWarning, match="no spread"):
        res = bootstrap_difference(x, x, n_resamples=200, rng=0)
    z = stats.norm.ppf(0.975)
    assert res.estimate == 0.0
    assert res.confidence_interval.high == pytest.approx(z**2 / (40 + z**2))


def test_zero_clean_accuracy_warns_and_documents_nan():
    clean = np.zeros(30)
    noisy = np.zeros(30)
    with pytest.warns(DegenerateDataWarning, match="clean accuracy of `clean` is 0"):
        res = bootstrap_retention(clean, noisy, n_resamples=100, rng=0)
    assert math.isnan(res.estimate)
    assert (res.confidence_interval.low, res.confidence_interval.high) == (0.0, math.inf)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_resamples": -3}, "`n_resamples` must be a positive integer, got -3."),
        ({"n_resamples": 10.5}, "`n_resamples` must be a positive integer, got 10.5."),
        ({"confidence_level": 1.0}, r"`confidence_level` must be a number in \(0, 1\), got 1.0."),
        ({"rng": "seed"}, "`rng` must be a numpy Generator, an int seed or None, got 'seed'."),
        ({"method": "basic"}, "`method` must be one of 'bca', 'percentile', 'log-ratio', 'studentized'"),
    ],
)
def test_option_errors(kwargs, match):
    with pytest.raises(InputError, match=match):
        bootstrap_retention(np.ones(5), np.ones(5), **kwargs)


def test_input_errors():
    with pytest.raises(InputError, match="inputs must be aligned"):
        bootstrap_difference(np.ones((2, 5)), np.ones((3, 5)))
    with pytest.raises(InputError, match=r"`x` must contain values in \[0, 1\], got 2.0"):
        bootstrap_accuracy([0, 1, 2])
    with pytest.raises(InputError, match="must be 1-D"):
        bootstrap_accuracy(np.ones((2, 2, 2)))
    with pytest.raises(InputError, match="'studentized' needs one seed"):
        bootstrap_retention(np.ones((2, 5)), np.ones((2, 5)), method="studentized")


def test_difference_is_first_minus_second():
    rng = np.random.default_rng(8)
    x = (rng.random(120) < 0.8).astype(float)
    y = (rng.random(120) < 0.5).astype(float)
    res = bootstrap_difference(x, y, n_resamples=500, rng=0)
    assert res.quantity == "difference"
    assert res.estimate == pytest.approx(x.mean() - y.mean())
    assert res.estimate > 0
    assert bootstrap_difference(y, x, n_resamples=500, rng=0).estimate == pytest.approx(-res.estimate)
