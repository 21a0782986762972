"""No interval or verdict claims more than its discordant pairs carry.

Property tests over arbitrary outcome tables (1–10 training seeds, 1–3 noise seeds, any
items): when the pooled discordant pairs of a and b differ by at most one (the pooled exact
McNemar p-value is 1), no interval on a − b excludes 0 and no verdict on a − b is decided;
when a verdict is decided, its direction is that of the discordant pairs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robuststats.analysis import AnalysisOptions, analyze_outcomes
from robuststats.stats import (
    DegenerateDataWarning,
    evaluate_hypothesis,
    mcnemar,
    seed_random_test,
)


@st.composite
def outcome_pairs(draw, balanced: bool) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes ``(k seeds, m noise seeds, n items)`` of conditions a and b.

    ``balanced``: discordant pairs are removed one at a time (b set equal to a where the
    larger kind lies) until the pooled counts differ by at most one.
    """
    k = draw(st.integers(1, 10))
    m = draw(st.integers(1, 3))
    n = draw(st.integers(2, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    p_a, p_b = draw(st.floats(0.0, 1.0)), draw(st.floats(0.0, 1.0))
    shared = rng.random((1, 1, n))  # item difficulty shared by a and b: realistic overlap
    xa = (rng.random((k, m, n)) * 0.5 + shared * 0.5 < p_a).astype(int)
    xb = (rng.random((k, m, n)) * 0.5 + shared * 0.5 < p_b).astype(int)
    if balanced:
        while True:
            b_only, c_only = (xa == 1) & (xb == 0), (xa == 0) & (xb == 1)
            excess = int(b_only.sum()) - int(c_only.sum())
            if abs(excess) <= 1:
                break
            where = np.flatnonzero(b_only if excess > 0 else c_only)
            j = rng.choice(where)
            xb.reshape(-1)[j] = xa.reshape(-1)[j]
    return xa, xb


def _pooled(xa: np.ndarray, xb: np.ndarray) -> tuple[int, int]:
    return int(((xa == 1) & (xb == 0)).sum()), int(((xa == 0) & (xb == 1)).sum())


def _frame(xa: np.ndarray, xb: np.ndarray, level: float = 0.05) -> pd.DataFrame:
    k, m, n = xa.shape
    idx = pd.MultiIndex.from_product([range(k), range(m), range(n)],
                                     names=["seed", "noise_seed", "item"])
    parts = []
    for cond, x in (("A", xa), ("B", xb)):
        df = idx.to_frame(index=False)
        parts.append(df.assign(condition=cond, eval_noise=level,
                               item_id=[f"i{i:03d}" for i in df["item"]],
                               correct=x.reshape(-1)).drop(columns="item"))
    return pd.concat(parts, ignore_index=True)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        return fn(*args, **kwargs)


PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(outcome_pairs(balanced=True), st.sampled_from([0.8, 0.95, 0.99]))
def test_seed_random_interval_covers_zero_without_excess_discordance(pair, level) -> None:
    xa, xb = pair
    b, c = _pooled(xa, xb)
    assert abs(b - c) <= 1
    if b + c:
        pooled = mcnemar(np.r_[np.ones(b), np.zeros(c)], np.r_[np.zeros(b), np.ones(c)],
                         method="exact")
        assert pooled.pvalue == pytest.approx(1.0)
    res = _quiet(seed_random_test, xa.mean(axis=1), xb.mean(axis=1), confidence_level=level)
    ci = res.confidence_interval
    assert ci.low <= 0.0 <= ci.high, (b, c, res)
    assert res.pvalue >= 1.0 - level - 1e-12


@PROPERTY
@given(outcome_pairs(balanced=True), st.sampled_from(["greater", "less"]))
def test_accuracy_verdict_undecided_without_excess_discordance(pair, relation) -> None:
    xa, xb = pair
    h = dict(id="H", metric="accuracy", a="A", b="B", eval_noise=0.05, relation=relation,
             margin=0.0)
    res = _quiet(evaluate_hypothesis, h, _frame(xa, xb), n_resamples=200, rng=0)
    assert res.verdict == "INCONCLUSIVE", (res.confidence_interval, res.detail)
    assert res.confidence_interval.low <= 0.0 <= res.confidence_interval.high


@PROPERTY
@given(outcome_pairs(balanced=False), st.sampled_from(["greater", "less", "equivalent"]),
       st.sampled_from([0.0, 0.02, 0.1]))
def test_decided_verdicts_follow_the_discordant_pairs(pair, relation, margin) -> None:
    xa, xb = pair
    b, c = _pooled(xa, xb)
    if relation == "equivalent" and margin == 0.0:
        margin = 0.05
    h = dict(id="H", metric="accuracy", a="A", b="B", eval_noise=0.05, relation=relation,
             margin=margin)
    res = _quiet(evaluate_hypothesis, h, _frame(xa, xb), n_resamples=200, rng=0)
    estimate = (b - c) / xa.size
    assert res.estimate == pytest.approx(estimate)
    ci = res.confidence_interval
    # an interval never lies wholly on the other side of 0 from its discordant pairs
    if b >= c:
        assert ci.high >= 0.0
    if b <= c:
        assert ci.low <= 0.0
    if abs(b - c) <= 1:
        assert ci.low <= 0.0 <= ci.high
    # and a verdict never says more than its interval
    if res.verdict == "VERIFIED" and relation == "greater":
        assert b - c > margin * xa.size >= 0 or margin < 0
    if res.verdict == "VERIFIED" and relation == "less":
        assert b - c < margin * xa.size
    if res.verdict == "VERIFIED" and relation == "equivalent":
        assert abs(b - c) < margin * xa.size


@pytest.mark.slow  # about 30 s: 25 generated studies
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outcome_pairs(balanced=True))
def test_tests_table_never_rejects_without_excess_discordance(pair) -> None:
    xa, xb = pair
    tests = _quiet(analyze_outcomes, _frame(xa, xb),
                   options=AnalysisOptions(n_resamples=100)).tests
    decision = tests[tests["role"] == "decision"].iloc[0]
    assert not bool(decision["reject"])
    assert decision["ci_low"] <= 0.0 <= decision["ci_high"]
    assert decision["pvalue"] >= 0.05


@PROPERTY
@given(outcome_pairs(balanced=True), st.integers(0, 2**32 - 1))
def test_retention_difference_covers_zero_on_one_discordant_noisy_pair(pair, seed) -> None:
    # both conditions share their clean outcomes; their noisy outcomes differ by at most one
    # pooled discordant pair: retention(a) − retention(b) must not exclude 0
    from robuststats.stats import seed_random_retention_test

    noisy_a, noisy_b = (x.mean(axis=1) for x in pair)
    rng = np.random.default_rng(seed)
    clean = np.maximum(noisy_a, (rng.random(noisy_a.shape) < 0.5).astype(float))
    if clean.mean() == 0.0 or noisy_a.mean() == 0.0 or noisy_b.mean() == 0.0:
        return
    res = _quiet(seed_random_retention_test, clean, noisy_a, clean, noisy_b)
    ci = res.confidence_interval
    assert ci.low <= 0.0 <= ci.high, res
