"""Betting confidence sequences (Waudby-Smith & Ramdas 2023) for a paired difference and
for retention, a ratio of means."""

from __future__ import annotations

import numpy as np
import pytest

from robuststats.errors import InputError
from robuststats.stats.sequential import (
    betting_confidence_sequence,
    retention_confidence_sequence,
)
from robuststats.stats.sequential._betting import (
    bounds,
    difference_nulls,
    ratio_bounds,
    ratio_nulls,
    running_sets,
)


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


# ---------------------------------------------------------------- retention (a ratio)
def _retention_streams(rng, shape, clean=0.8, keep=0.85, flip=0.2):
    """Clean outcomes at ``clean``; noisy keeps a right answer with ``keep`` and turns a
    wrong one right with ``flip``: retention ``(clean·keep + (1 − clean)·flip)/clean``."""
    y = (rng.random(shape) < clean).astype(float)
    x = np.where(y == 1, rng.random(shape) < keep, rng.random(shape) < flip).astype(float)
    return x, y, (clean * keep + (1 - clean) * flip) / clean


def test_retention_covers_and_excludes_a_wrong_ratio() -> None:
    # 60 streams of 150 items at α = 0.2, ρ = 0.9: misses ρ somewhere in at most α of the
    # streams (+ 3 binomial SE), and excludes the wrong ratio 1.2 by the end in most
    rng = np.random.default_rng(11)
    x, y, rho = _retention_streams(rng, (60, 150))
    low, high = ratio_bounds(x, y, 0.2)
    missed = np.any((low > rho) | (high < rho), axis=1).mean()
    assert missed <= 0.2 + 3 * np.sqrt(0.2 * 0.8 / 60)
    assert np.mean(high[:, -1] < 1.2) > 0.8
    assert np.all(low[:, 1:] >= low[:, :-1]) and np.all(high[:, 1:] <= high[:, :-1])


@pytest.mark.slow
def test_retention_time_uniform_coverage() -> None:
    # 400 streams of 300 items at α = 0.05, ρ = 0.9 (binomial SE 1.1 pp at 5 %)
    rng = np.random.default_rng(12)
    x, y, rho = _retention_streams(rng, (400, 300))
    low, high = ratio_bounds(x, y, 0.05)
    assert np.any((low > rho) | (high < rho), axis=1).mean() <= 0.05 + 0.02


def test_retention_at_one_is_the_difference_at_zero() -> None:
    # r = 1: z = (x − y + 1)/2 against ½, the difference's stream at δ = 0: the same
    # capital, so the same rejection time (streams with δ ≠ 0 so that it is rejected)
    rng = np.random.default_rng(13)
    x = (rng.random((20, 300)) < 0.75).astype(float)
    y = (rng.random((20, 300)) < 0.6).astype(float)
    ratio = np.stack(list(running_sets(x, y, ratio_nulls(np.array([1.0])), 0.05)))
    diff = np.stack(list(running_sets(x, y, difference_nulls(np.array([0.5])), 0.05)))
    assert np.array_equal(ratio, diff)
    assert 0 < ratio[-1].sum() < 20  # rejected in some streams, not in all
    assert ratio[0].all()  # a path over items (each yield its own array), not one state
    # and through the public functions: 1 leaves the retention set when 0 leaves the
    # difference's (both grids hold the point exactly)
    for s in range(5):
        rs = retention_confidence_sequence(x[s], y[s])
        ds = betting_confidence_sequence(x[s], y[s])
        alive = ratio[:, s, 0]
        gone = int(np.argmin(alive)) + 1 if not alive.all() else None
        assert (rs.first_excluding(1.0) is None) == (gone is None)
        assert (ds.first_excluding(0.0) is None) == (gone is None)


def test_retention_nested_and_contains_the_estimate() -> None:
    rng = np.random.default_rng(14)
    x, y, _ = _retention_streams(rng, 500)
    cs = retention_confidence_sequence(x, y)
    assert np.all(cs.low[1:] >= cs.low[:-1]) and np.all(cs.high[1:] <= cs.high[:-1])  # ∞ too
    assert np.all(cs.low <= cs.high)
    assert np.all((cs.low <= cs.estimate + 1e-12) | ~np.isfinite(cs.estimate))
    assert cs.high[-1] - cs.low[-1] < 0.3 < cs.high[19] - cs.low[19]


def test_retention_edge_cases() -> None:
    # all correct: ρ = 1 stays inside, the set shrinks around it
    cs = retention_confidence_sequence(np.ones(300), np.ones(300))
    assert cs.low[-1] <= 1.0 <= cs.high[-1] and cs.high[-1] - cs.low[-1] < 0.3
    assert cs.estimate[-1] == 1.0
    # none correct, noisy or clean: nothing is learned; [0, ∞) all along
    cs = retention_confidence_sequence(np.zeros(200), np.zeros(200))
    assert np.all(cs.low == 0) and np.all(np.isinf(cs.high)) and np.isnan(cs.estimate[-1])
    # clean never correct but noisy sometimes: the ratio is unbounded above, reported inf
    cs = retention_confidence_sequence(np.r_[np.ones(20), np.zeros(80)], np.zeros(100))
    assert np.isinf(cs.high[-1]) and np.isinf(cs.estimate[-1]) and cs.low[-1] > 0
    # noisy never correct, clean always: the set shrinks to 0
    cs = retention_confidence_sequence(np.zeros(300), np.ones(300))
    assert cs.low[-1] == 0 and cs.high[-1] < 0.1
    # length 1: one item decides nothing
    for a, b in ((1.0, 1.0), (0.0, 1.0), (1.0, 0.0)):
        cs = retention_confidence_sequence([a], [b])
        assert cs.low[0] == 0 and np.isinf(cs.high[0]) and len(cs.n) == 1


@pytest.mark.parametrize(("args", "match"), [
    (([0.5, 2.0], [1, 1]), r"\[0, 1\]"),
    (([], []), "non-empty"),
    (([1, 0], [1]), "same length"),
])
def test_retention_bad_input(args, match) -> None:
    with pytest.raises(InputError, match=match):
        retention_confidence_sequence(*args)
