"""Betting confidence sequences (Waudby-Smith & Ramdas 2023) for a paired difference."""

from __future__ import annotations

import numpy as np
import pytest

from robuststats.errors import InputError
from robuststats.stats.sequential import betting_confidence_sequence
from robuststats.stats.sequential._betting import bounds


def test_nested_contains_the_estimate_and_shrinks() -> None:
    rng = np.random.default_rng(4)
    x = (rng.random(400) < 0.7).astype(float)
    y = (rng.random(400) < 0.5).astype(float)
    cs = betting_confidence_sequence(x, y, alpha=0.05)
    assert np.all(np.diff(cs.low) >= 0) and np.all(np.diff(cs.high) <= 0)  # running ∩
    assert np.all(cs.low <= cs.high)
    assert cs.high[-1] - cs.low[-1] < 0.25 < cs.high[9] - cs.low[9]
    # a true difference of 0.2: the stream excludes 0 before its end
    stop = cs.first_excluding(0.0)
    assert stop is not None and stop < 400
    assert cs.low[stop - 1] > 0


def test_wider_than_the_fixed_n_interval_at_every_n() -> None:
    # time-uniform coverage costs width: wider than the one-n normal interval
    rng = np.random.default_rng(5)
    d = rng.integers(-1, 2, 300).astype(float)
    cs = betting_confidence_sequence(d)
    n = np.arange(1, 301)
    sd = np.array([d[:k].std(ddof=1) if k > 1 else 1.0 for k in n])
    half = 1.96 * sd / np.sqrt(n)
    assert np.all((cs.high - cs.low)[50:] > 2 * half[50:])


@pytest.mark.slow
def test_time_uniform_coverage() -> None:
    # 300 streams of 400 items, δ = 0.1: the sequence misses δ at some n in at most α
    # of the streams (binomial SE 1.3 pp at 5 %)
    rng = np.random.default_rng(6)
    d = (rng.random((300, 400)) < 0.6).astype(float) - (rng.random((300, 400)) < 0.5)
    low, high = bounds(d, 0.05)
    missed = np.any((low > 0.1) | (high < 0.1), axis=1).mean()
    assert missed <= 0.05 + 0.02


@pytest.mark.parametrize(("args", "match"), [
    (([0.5, 2.0],), r"\[-1, 1\]"),
    (([],), "non-empty"),
])
def test_bad_input(args, match) -> None:
    with pytest.raises(InputError, match=match):
        betting_confidence_sequence(*args)
