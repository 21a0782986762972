"""The seed-random t calibrated for few seeds (robuststats/stats/_few_seeds.py)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import special

from robuststats.stats import (
    SeedBootstrapWarning,
    bootstrap_difference,
    bootstrap_retention,
    crossed_variance,
    independent_seeds_test,
    seed_random_accuracy,
    seed_random_test,
)
from robuststats.stats._few_seeds import SeedReference, _size
from robuststats.stats._simulate import seed_model, simulate_matrices, true_effects


def _normal_study(rng, k, n, seed_sd, item_sd, delta=0.0):
    return (delta + rng.normal(0.0, seed_sd, k)[:, None] + rng.normal(0.0, item_sd, n)[None, :]
            + rng.normal(0.0, 1.0, (k, n)))


def test_the_nominal_level_gives_a_largest_size_of_alpha() -> None:
    ref = SeedReference(seed_ms=1.0, seed_df=1.0, floor=1.0, rest=2.0,
                        rest_var=2.0**2 / 999 + 1.0 / 999, scale=2000.0)
    for alpha in (0.05, 0.01, 0.2):
        a = ref.nominal(alpha)
        assert a < alpha  # two seeds with an item term: the plug-in is liberal
        assert _size(1.0, 1.0, 2.0, ref.rest_var, a) == pytest.approx(alpha, rel=1e-6)
    # the calibrated interval is wider than the plug-in's at the same level
    assert ref.critical(0.95) > special.stdtrit(ref.dof, 0.975)


def test_without_an_item_term_nothing_is_calibrated() -> None:
    ref = SeedReference(seed_ms=3.0, seed_df=4.0, floor=1.0, rest=1.0, rest_var=0.0,
                        scale=500.0)
    assert not ref.calibrated and ref.dof == 4.0
    assert ref.pvalue(2.0) == pytest.approx(2.0 * special.stdtr(4.0, -2.0), rel=1e-12)
    assert ref.critical(0.95) == pytest.approx(special.stdtrit(4.0, 0.975), rel=1e-12)


def test_tails_invert_the_interval_and_sum_to_one() -> None:
    rng = np.random.default_rng(3)
    x = (rng.random((3, 200)) < 0.7).astype(float)
    y = (rng.random((3, 200)) < 0.6).astype(float)
    res = seed_random_test(x, y)
    ref = res.reference
    assert ref is not None and ref.calibrated
    t = res.statistic
    assert ref.tail(t) + ref.tail(-t) == pytest.approx(1.0, abs=1e-12)
    assert res.pvalue == pytest.approx(2.0 * min(ref.tail(t), ref.tail(-t)), rel=1e-12)
    # the interval at level 1 − p has 0 on its boundary
    if res.pvalue < 0.9:
        q = ref.critical(1.0 - res.pvalue)
        bound = res.estimate - math.copysign(q * res.standard_error, res.estimate)
        assert bound == pytest.approx(0.0, abs=1e-6)


def test_two_seeds_with_an_item_component_hold_the_level() -> None:
    # Normal theory, n = 1,000: a seed × condition SD of 0.1 against an item × condition SD
    # of 0.7 (per-item residual SD 1). The plug-in t rejected 9.5 % here (2,500 studies);
    # 400 studies: MC SE ≤ 1.1 pp at 5 %.
    rng = np.random.default_rng(17)
    rejected = plug_in = 0
    reps = 400
    for _ in range(reps):
        values = _normal_study(rng, 2, 1000, 0.1, 0.7)
        cv = crossed_variance(values)
        t = values.mean() / math.sqrt(cv.variance)
        rejected += cv.reference.pvalue(t) < 0.05
        # the plug-in without the calibration and without the floor MS_seed ≥ MS_resid in V
        raw = (cv.ms_seed + max(cv.ms_item - cv.ms_resid, 0.0)) / (2 * 1000)
        plug_in += 2.0 * special.stdtr(cv.dof, -abs(values.mean()) / math.sqrt(raw)) < 0.05
    assert rejected / reps <= 0.05 + 0.01
    assert plug_in / reps > 0.065  # the uncalibrated test fails here: the check has teeth


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 3, 5])
def test_item_by_condition_designs_hold_the_level(k: int) -> None:
    # binary outcomes with items that favour one procedure (item × condition SD 1 on the
    # logit scale) and moderate seed effects; 600 studies of 1,000 items
    rng = np.random.default_rng(100 + k)
    model = seed_model("moderate", item_condition_sd=1.0, item_robustness_sd=0.5)
    reps, hits = 600, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            x = simulate_matrices(model, k, 1000, rng)
            hits += seed_random_test(x[0, 0], x[1, 0]).pvalue < 0.05
    assert hits / reps <= 0.05 + 0.01 + 2 * math.sqrt(0.05 * 0.95 / reps)


def test_accuracy_interval_is_asymmetric_near_the_ceiling() -> None:
    rng = np.random.default_rng(8)
    x = (rng.random((10, 100)) < 0.99).astype(float)
    res = seed_random_accuracy(x)
    ci = res.confidence_interval
    assert ci.low < res.estimate < ci.high <= 1.0
    assert res.estimate - ci.low > ci.high - res.estimate  # longer towards 0.5
    assert "logit" in res.method


@pytest.mark.slow
def test_accuracy_interval_covers_at_the_ceiling() -> None:
    rng = np.random.default_rng(9)
    model = seed_model("moderate", intercept=5.6)
    truth = float(true_effects("moderate", intercept=5.6).accuracy_b[0])
    assert truth > 0.98
    reps, covered = 600, 0
    for _ in range(reps):
        ci = seed_random_accuracy(simulate_matrices(model, 10, 100, rng)[1, 0])
        covered += ci.confidence_interval.low <= truth <= ci.confidence_interval.high
    assert covered / reps >= 0.94 - 2 * math.sqrt(0.05 * 0.95 / reps)


def test_bootstrap_with_several_seeds_warns_and_names_the_seed_random_function() -> None:
    rng = np.random.default_rng(4)
    x = (rng.random((3, 40)) < 0.7).astype(float)
    y = (rng.random((3, 40)) < 0.6).astype(float)
    # asked for explicitly, the two-way bootstrap still warns and names the function that
    # the default returns
    with pytest.warns(SeedBootstrapWarning, match="seed_random_test"):
        bootstrap_difference(x, y, n_resamples=200, rng=1, seeds="bootstrap")
    with pytest.warns(SeedBootstrapWarning, match="seed_random_retention"):
        bootstrap_retention(x, y, n_resamples=200, rng=1, seeds="bootstrap")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeedBootstrapWarning)
        bootstrap_difference(x[0], y[0], n_resamples=200, rng=1)  # one seed: no warning


def test_simulator_default_streams_are_unchanged_by_the_item_condition_terms() -> None:
    plain = simulate_matrices(seed_model("moderate"), 3, 50, np.random.default_rng(1))
    zero = simulate_matrices(seed_model("moderate", item_condition_sd=0.0,
                                        item_robustness_sd=0.0), 3, 50,
                             np.random.default_rng(1))
    assert np.array_equal(plain, zero)
    # the item × condition component is shared by every seed of a condition
    model = seed_model("none", item_condition_sd=3.0, noise_item_sd=0.0)
    x = simulate_matrices(model, 20, 400, np.random.default_rng(2))
    d = x[0, 0] - x[1, 0]
    assert crossed_variance(d).var_item > 5 * crossed_variance(d).var_seed
    assert crossed_variance(d).var_item > 0.05


def test_quantile_table_is_within_its_stated_error() -> None:
    from robuststats.stats._few_seeds import _quantiles

    for low in (1.0, 2.0, 4.0):
        dof = np.concatenate([np.linspace(low, 50, 300), np.logspace(1.7, 7, 100)])
        for p, tol in ((0.975, 3e-5), (1 - 1e-7, 7e-4)):
            ratio = _quantiles(dof, low, p) / special.stdtrit(dof, p)
            assert np.max(np.abs(ratio - 1.0)) < tol


def test_independent_seeds_without_items_is_welch() -> None:
    # constant rows (no item or residual spread): Welch's t on the per-seed means
    # (scipy.stats.ttest_ind with equal_var=False; nothing to calibrate without items)
    from scipy import stats

    x = np.repeat([[0.6], [0.7], [0.8]], 10, axis=1)
    y = np.repeat([[0.5], [0.55], [0.5], [0.45]], 10, axis=1)
    res = independent_seeds_test(x, y)
    ref = stats.ttest_ind(x[:, 0], y[:, 0], equal_var=False)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-9)
    assert res.dof == pytest.approx(ref.df, rel=1e-9)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-9)


def test_independent_seeds_hold_the_level_with_an_item_component() -> None:
    rng = np.random.default_rng(41)
    model = seed_model("moderate", item_condition_sd=1.0)
    reps, hits = 300, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            study = simulate_matrices(model, 7, 500, rng)
            a, b = study[0, 0, :3], study[1, 0, 3:]  # different runs, the same items
            hits += independent_seeds_test(a, b).pvalue < 0.05
    assert hits / reps <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / reps)


def test_bootstrap_functions_return_the_seed_random_interval_with_several_seeds() -> None:
    from robuststats.stats import (
        bootstrap_retention_difference,
        seed_random_retention,
        seed_random_retention_test,
    )

    rng = np.random.default_rng(4)
    x, y, u, v = ((rng.random((3, 60)) < p).astype(float) for p in (0.8, 0.7, 0.8, 0.55))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeedBootstrapWarning)
        for ours, theirs in ((bootstrap_difference(x, y), seed_random_test(x, y)),
                             (bootstrap_retention(x, y), seed_random_retention(x, y)),
                             (bootstrap_retention_difference(x, y, u, v),
                              seed_random_retention_test(x, y, u, v))):
            assert ours.confidence_interval == theirs.confidence_interval
            assert ours.estimate == pytest.approx(theirs.estimate)
            assert ours.scheme == "seeds x items, seed-random t" and ours.n_resamples == 0
            assert ours.method.startswith(theirs.method) and "in place of" in ours.method
    with pytest.raises(Exception, match="`seeds`"):
        bootstrap_difference(x, y, seeds="fixed")


def test_the_default_bootstrap_interval_covers_with_5_seeds_and_seed_effects() -> None:
    # large seed effects, an item × condition component, 5 seeds, 300 items: the seeds ×
    # items bootstrap covered 89.7 % here (300 replications), the seed-random t 94.0 %
    rng = np.random.default_rng(36)
    params = dict(seed_effects="large", item_condition_sd=0.3, accuracy_effect=0.2)
    model = seed_model(**params)
    truth = float(true_effects(**params)["estimate"].iloc[0])
    reps, covered = 400, 0
    for _ in range(reps):
        m = simulate_matrices(model, 5, 300, rng)
        ci = bootstrap_difference(m[0, 0], m[1, 0], rng=1).confidence_interval
        covered += ci.low <= truth <= ci.high
    assert covered / reps >= 0.94 - 2 * math.sqrt(0.05 * 0.95 / reps)
