"""Retention that cannot be estimated (Fieller's g ≥ 1) and intervals cut to their range."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robuststats.stats import (
    ConfidenceInterval,
    clip_interval,
    crossed_variance,
    retention_estimability,
)


def _one_seed(correct: int, n: int = 40) -> np.ndarray:
    return np.array([1.0] * correct + [0.0] * (n - correct))


def test_one_seed_g_is_fiellers_with_the_item_t() -> None:
    # R: qt(0.975, 39)  ->  2.022691
    q = 2.022691
    for correct, estimable in ((3, False), (4, True), (10, True)):
        x = _one_seed(correct)
        p = x.mean()
        se = math.sqrt(np.var(x, ddof=1) / x.size)
        judged = retention_estimability(x, confidence_level=0.95)
        assert judged.g == pytest.approx((q * se / p) ** 2, rel=1e-6)
        assert judged.estimable is estimable
    # 3 of 40: g = 1.294; 4 of 40: g = 0.944 (the rule's "about q²(1 − C̄) correct items")
    assert retention_estimability(_one_seed(3)).g == pytest.approx(1.2938, abs=1e-3)
    assert retention_estimability(_one_seed(4)).g == pytest.approx(0.9441, abs=1e-3)


def test_every_seed_must_carry_its_ratio() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        k, n = rng.integers(2, 6), rng.integers(5, 60)
        clean = (rng.random((k, n)) < rng.uniform(0.01, 0.4)).astype(float)
        if clean.mean() == 0:
            continue
        judged = retention_estimability(clean, confidence_level=0.95)
        per_seed = [retention_estimability(row, confidence_level=0.95) for row in clean]
        # Fieller's set of each seed's ratio is bounded exactly when that seed's clean
        # interval (mean ± t·se over its items) excludes 0
        for row, seed in zip(clean, per_seed):
            if row.mean() > 0 and np.var(row) > 0:
                q = crossed_variance(row[None, :]).reference.critical(0.95)
                low = row.mean() - q * math.sqrt(np.var(row, ddof=1) / n)
                assert seed.estimable == bool(low > 0)
        assert judged.estimable == all(s.estimable for s in per_seed)
        assert judged.g == pytest.approx(max(s.g for s in per_seed))


def test_a_seed_effect_alone_does_not_make_retention_inestimable() -> None:
    # a clean accuracy of 70 % on 3 seeds × 300 items (as seed002_nvfp4); with seeds at 45, 70
    # and 95 % the crossed variance of the mean (seed part included) gives g > 1, while
    # each seed's items give g < 0.05
    rows = [np.r_[np.ones(round(300 * p)), np.zeros(300 - round(300 * p))]
            for p in (0.45, 0.70, 0.95)]
    clean = np.vstack(rows)
    cv = crossed_variance(clean)
    assert (cv.reference.critical(0.95) * math.sqrt(cv.variance) / clean.mean()) ** 2 > 1
    judged = retention_estimability(clean)
    assert judged.estimable and judged.g < 0.05


def test_the_reason_says_why_and_zero_is_undefined() -> None:
    # e8_smoke's clean accuracy: 2 seeds × 40 items, 0 and 4 correct (5 %)
    clean = np.vstack([_one_seed(0), _one_seed(4)])
    judged = retention_estimability(clean)
    assert not judged.estimable and math.isinf(judged.g)
    assert judged.reason.startswith("the clean accuracy of 1 of 2 training seeds (lowest 0 % "
                                    "of 40 items) cannot be told from 0 at 95 %")
    # 1 and 4 of 40 (e8_smoke's E8c): the first seed fails with g = 4.09
    e8c = retention_estimability(np.vstack([_one_seed(1), _one_seed(4)]))
    assert not e8c.estimable and e8c.g == pytest.approx(4.09, abs=0.01)
    assert "(Fieller's g = 4.09 ≥ 1)" in e8c.reason
    zero = retention_estimability(np.zeros((2, 10)))
    assert not zero.estimable and math.isinf(zero.g) and "undefined" in zero.reason
    perfect = retention_estimability(np.ones((3, 10)))
    assert perfect.estimable and perfect.g == 0.0 and perfect.reason == ""


def test_clip_interval_cuts_and_says_so() -> None:
    ci, cut = clip_interval(ConfidenceInterval(-2.17, 2.05), "accuracy_difference")
    assert (ci.low, ci.high, cut) == (-1.0, 1.0, True)
    ci, cut = clip_interval(ConfidenceInterval(-0.2, 0.3), "accuracy_difference")
    assert (ci.low, ci.high, cut) == (-0.2, 0.3, False)
    ci, cut = clip_interval(ConfidenceInterval(-0.1, 1.2), "accuracy")
    assert (ci.low, ci.high, cut) == (0.0, 1.0, True)
    ci, cut = clip_interval(ConfidenceInterval(-0.5, math.inf), "retention")
    assert (ci.low, ci.high, cut) == (0.0, math.inf, True)
    ci, cut = clip_interval(ConfidenceInterval(math.nan, math.nan), "accuracy")
    assert not cut and math.isnan(ci.low)
