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


def test_g_of_one_is_the_clean_interval_reaching_zero() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        k, n = rng.integers(2, 6), rng.integers(5, 60)
        clean = (rng.random((k, n)) < rng.uniform(0.01, 0.4)).astype(float)
        if clean.mean() == 0:
            continue
        cv = crossed_variance(clean)
        if cv.variance == 0:
            continue
        low = clean.mean() - cv.reference.critical(0.95) * math.sqrt(cv.variance)
        judged = retention_estimability(clean, confidence_level=0.95)
        # Fieller's set is bounded exactly when the denominator's interval excludes 0
        assert judged.estimable == bool(low > 0), (judged, low)


def test_the_reason_says_why_and_zero_is_undefined() -> None:
    # e8_smoke's clean accuracy: 2 seeds × 40 items, 0 and 4 correct (5 %)
    clean = np.vstack([_one_seed(0), _one_seed(4)])
    judged = retention_estimability(clean)
    assert not judged.estimable and judged.g > 100
    assert "cannot be told from 0 at 95 %" in judged.reason and "Fieller's g" in judged.reason
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
