"""The resampling engine: every drawing path has the bootstrap's distribution.

``resampled_totals`` draws pattern counts, item indices gathered from packed tables, or a
mix, and with several seeds groups resamples by their seed counts or keeps one field per
seed. Each path is checked against the exact two-way (pigeonhole) bootstrap moments, against
a plain reference implementation (index draws, counts, matrix product: the previous
algorithm), and the intervals against scipy.stats.bootstrap.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from robuststats.stats import (
    bootstrap_accuracy,
    bootstrap_difference,
    bootstrap_retention,
    bootstrap_retention_difference,
)
from robuststats.stats.resampling import _resample
from robuststats.stats.resampling._resample import lattice_scale, resampled_totals


def _exact_moments(lin: np.ndarray) -> tuple[float, float]:
    """Mean and variance of the grand mean of ``lin (k, n)`` under the pigeonhole bootstrap:
    E[S_s S_t] = 1 + δ_st − 1/k for multinomial(k, 1/k) seed counts, likewise for items."""
    k, n = lin.shape
    total, rows, cols = lin.sum(), lin.sum(axis=1), lin.sum(axis=0)
    kn = k * n
    e2 = ((1 - 1 / k) * (1 - 1 / n) * total**2 + (1 - 1 / n) * np.sum(rows**2)
          + (1 - 1 / k) * np.sum(cols**2) + np.sum(lin**2)) / kn**2
    return total / kn, e2 - (total / kn) ** 2


def _reference_means(stacked: np.ndarray, n_resamples: int, rng) -> np.ndarray:
    """The previous algorithm: index draws, bincount counts, s' X w / (k n)."""
    _, k, n = stacked.shape
    w = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(n_resamples)])
    s = np.stack([np.bincount(rng.integers(0, k, k), minlength=k) for _ in range(n_resamples)])
    return np.einsum("bk,mkn,bn->bm", s, stacked, w) / (k * n)


def _data(kind: str, k: int, n: int, rng) -> np.ndarray:
    """(2, k, n) outcomes of two paired inputs with item and seed effects."""
    item = rng.normal(size=n)
    seed = rng.normal(scale=0.5, size=(k, 1))
    p = 1 / (1 + np.exp(-(0.8 + item + seed)))
    x = (rng.random((k, n)) < p).astype(float)
    y = x * (rng.random((k, n)) < 0.85)
    if kind == "quarters":  # means over 4 noisy evaluations
        y = rng.binomial(4, np.clip(p - 0.1, 0, 1), size=(k, n)) / 4
    if kind == "scores":  # not on any lattice
        y = rng.random((k, n)) * x
    return np.stack([x, y])


PATHS = {"default": None, "patterns only": 0, "items only": 10**9}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize(("kind", "k", "n"), [
    ("binary", 1, 300),    # one seed: 2 or 4 patterns
    ("quarters", 1, 200),  # lattice i/4
    ("binary", 3, 150),    # grouped by seed-count vector (10 vectors)
    ("binary", 8, 40),     # many seed-count vectors: one field per seed
    ("scores", 3, 60),     # float tables, no lattice
])
def test_every_path_has_the_exact_two_way_moments(monkeypatch, path, kind, k, n):
    if PATHS[path] is not None:
        monkeypatch.setattr(_resample, "_PATTERN_MIN", PATHS[path])
    rng = np.random.default_rng([k, n, len(kind)])
    values = _data(kind, k, n, rng)
    scale = lattice_scale(values) if kind != "scores" else 1
    scaled = np.rint(values * scale) if kind != "scores" else values
    b = 20_000
    raw = resampled_totals(scaled, b, np.random.default_rng(1))
    if kind != "scores":
        np.testing.assert_array_equal(raw, np.rint(raw))  # exact integer totals
    totals = raw / (scale * k * n)
    for lin, boot in ((values[0], totals[:, 0]), (values[1], totals[:, 1]),
                      (values[0] - values[1], totals[:, 0] - totals[:, 1])):  # pairing
        mean, var = _exact_moments(lin)
        # Monte Carlo SE of a variance from 20,000 draws is about 1 %
        assert boot.var() == pytest.approx(var, rel=0.05)
        assert boot.mean() == pytest.approx(mean, abs=4 * np.sqrt(var / b))


def test_more_items_than_uint16_indices(monkeypatch):
    monkeypatch.setattr(_resample, "_PATTERN_MIN", 10**9)  # force item draws
    x = (np.random.default_rng(0).random((1, 1, 70_000)) < 0.3).astype(float)
    totals = resampled_totals(x, 400, np.random.default_rng(1))[:, 0] / 70_000
    mean, var = _exact_moments(x[0])
    assert totals.var() == pytest.approx(var, rel=0.25)  # MC SE of a variance of 400: 7 %
    assert totals.mean() == pytest.approx(mean, abs=4 * np.sqrt(var / 400))
    assert totals.max() <= 1.0


@pytest.mark.parametrize("quantity", ["difference", "retention"])
def test_two_way_distribution_matches_the_previous_algorithm(quantity):
    rng = np.random.default_rng(21)
    values = _data("binary", 5, 120, rng)
    b = 6_000
    new = resampled_totals(values, b, np.random.default_rng(3)) / (5 * 120)
    old = _reference_means(values, b, np.random.default_rng(4))

    def stat(m):
        return m[:, 0] - m[:, 1] if quantity == "difference" else m[:, 1] / m[:, 0]

    s_new, s_old = stat(new), stat(old)
    # same distribution: SDs within 6 % (MC SE of an SD ratio here ~1.8 %), quantiles within
    # 0.15 SD (MC SE of a 2.5 % quantile ~0.04 SD), two-sample KS test
    assert s_new.std() == pytest.approx(s_old.std(), rel=0.06)
    for q in (0.025, 0.5, 0.975):
        assert np.quantile(s_new, q) == pytest.approx(np.quantile(s_old, q),
                                                      abs=0.15 * s_old.std())
    assert stats.ks_2samp(s_new, s_old).pvalue > 1e-3


def _scipy_bca(data, statistic, n_resamples=20_000):
    return stats.bootstrap(data, statistic, n_resamples=n_resamples, method="BCa",
                           paired=True, vectorized=True, rng=np.random.default_rng(7))


@pytest.mark.parametrize("n", [80, 400])
def test_one_seed_intervals_agree_with_scipy_bca(n):
    rng = np.random.default_rng(n)
    values = _data("binary", 1, n, rng)
    x, z = values[0, 0], values[1, 0]
    y = (rng.random(n) < 0.55).astype(float)
    zb = y * (rng.random(n) < 0.7)
    m = np.mean
    cases = [
        (bootstrap_accuracy(x, n_resamples=20_000, rng=1),
         _scipy_bca((x,), lambda a, axis=-1: m(a, axis=axis))),
        (bootstrap_difference(x, y, n_resamples=20_000, rng=1),
         _scipy_bca((x, y), lambda a, b, axis=-1: m(a, axis=axis) - m(b, axis=axis))),
        (bootstrap_retention(x, z, n_resamples=20_000, rng=1),
         _scipy_bca((x, z), lambda c, r, axis=-1: m(r, axis=axis) / m(c, axis=axis))),
        (bootstrap_retention_difference(x, z, y, zb, n_resamples=20_000, rng=1),
         _scipy_bca((x, z, y, zb), lambda c1, r1, c2, r2, axis=-1: (
             m(r1, axis=axis) / m(c1, axis=axis) - m(r2, axis=axis) / m(c2, axis=axis)))),
    ]
    for ours, ref in cases:
        # Monte Carlo error of a BCa endpoint at B = 20,000 is ~0.02 SE; statistics of
        # 0/1 outcomes are discrete, so an endpoint may also move by one atom (~1/n)
        tol = 0.1 * ref.standard_error + 1.5 / n
        assert ours.confidence_interval.low == pytest.approx(ref.confidence_interval.low,
                                                             abs=tol)
        assert ours.confidence_interval.high == pytest.approx(ref.confidence_interval.high,
                                                              abs=tol)
        assert ours.standard_error == pytest.approx(ref.standard_error, rel=0.04)


def test_two_way_interval_endpoints_match_the_previous_algorithm():
    # same data through the new engine and through the reference draws, same BCa
    from robuststats.stats.resampling._bootstrap import _gradient
    from robuststats.stats.resampling._bootstrap_ci import BootstrapFit, acceleration
    from robuststats.stats.resampling._resample import crossed_variance_ratio, jackknife_influence

    rng = np.random.default_rng(33)
    values = _data("binary", 4, 150, rng)
    x, y = values
    ours = bootstrap_difference(x, y, n_resamples=8_000, rng=2, seeds="bootstrap")
    means = _reference_means(values, 8_000, np.random.default_rng(5))

    def func(mu):
        return mu[..., 0] - mu[..., 1]

    est = x.mean() - y.mean()
    lin = np.tensordot(_gradient(func, np.array([x.mean(), y.mean()])), values, axes=1)
    boot = est + (func(means) - est) * crossed_variance_ratio(lin)
    u_items, u_seeds = jackknife_influence([x, y], func)
    old = BootstrapFit(estimate=est, boot=boot, method="bca",
                       acceleration=acceleration(u_items, u_seeds)).interval(0.95)
    se = ours.standard_error
    assert ours.confidence_interval.low == pytest.approx(old.low, abs=0.12 * se)
    assert ours.confidence_interval.high == pytest.approx(old.high, abs=0.12 * se)


def test_two_way_same_seed_same_result():
    values = _data("binary", 5, 100, np.random.default_rng(1))
    r1 = bootstrap_retention(values[0], values[1], n_resamples=2_000, rng=9)
    r2 = bootstrap_retention(values[0], values[1], n_resamples=2_000,
                             rng=np.random.default_rng(9))
    np.testing.assert_array_equal(r1.bootstrap_distribution, r2.bootstrap_distribution)
    assert r1.confidence_interval == r2.confidence_interval


def test_lattice_scale():
    assert lattice_scale(np.array([0.0, 1.0, 1.0])) == 1
    assert lattice_scale(np.array([0.0, 0.25, 0.5, 1.0])) == 4
    assert lattice_scale(np.array([1 / 3, 0.5])) == 6
    assert lattice_scale(np.array([0.1234567, 0.5])) is None
