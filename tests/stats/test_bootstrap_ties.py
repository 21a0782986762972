"""BCa on lattice-valued statistics: ties with the observed value are counted exactly.

Statistics of 0/1 outcomes over n items live on a grid (1/n for an accuracy or a paired
difference, fractions of integer totals for retentions). A resample equal to the observed
value as a fraction must count as a tie in BCa's bias correction
``z0 = Φ⁻¹(#{θ* < θ̂}/B + ½ #{θ* = θ̂}/B)``. The expected values below are computed from the
integer totals of the very same resamples (``resampled_totals`` with the same seed).
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import special

from robuststats.stats import DegenerateDataWarning, bootstrap_difference
from robuststats.stats.resampling._bootstrap import fit_bootstrap
from robuststats.stats.resampling._bootstrap_ci import BootstrapFit
from robuststats.stats.resampling._resample import jackknife_influence, resampled_totals

B = 4000


def _paired(a, b, c, d):
    x = np.repeat([1, 1, 0, 0], [a, b, c, d]).astype(float)
    y = np.repeat([1, 0, 1, 0], [a, b, c, d]).astype(float)
    return x, y


def _exact(values_of, totals, observed):
    """(#less, #tied) of θ(totals) against θ(observed), in fractions."""
    target = values_of(observed)
    vals = [values_of(t) for t in totals]
    return sum(v < target for v in vals), sum(v == target for v in vals)


def _bca_lower_upper(sorted_boot, z0, acc, level=0.95):
    za = special.ndtri(np.array([(1 - level) / 2, (1 + level) / 2]))
    adj = special.ndtr(z0 + (z0 + za) / (1 - acc * (z0 + za)))
    return np.quantile(sorted_boot, adj, method="linear")


def test_paired_difference_counts_ties_exactly_and_naive_floats_do_not():
    # 60 items, b = 9 discordant for x, c = 3 for y: θ̂ = 6/60 recurs in many resamples
    x, y = _paired(24, 9, 3, 24)
    n = x.size
    fit, _ = fit_bootstrap("difference", [x[None], y[None]], method="bca", n_resamples=B,
                           rng=np.random.default_rng(5))
    totals = resampled_totals(np.stack([x, y])[:, None, :], B, np.random.default_rng(5))
    less, tied = _exact(lambda t: int(t[0]) - int(t[1]), totals, [x.sum(), y.sum()])
    assert tied > 300  # the observed value recurs: the case this test is about
    assert fit.estimate == 6 / 60
    assert np.count_nonzero(fit.boot == fit.estimate) == tied
    assert np.count_nonzero(fit.boot < fit.estimate) == less
    z0 = special.ndtri((less + tied / 2) / B)
    assert fit._z0() == pytest.approx(z0, abs=1e-12)
    # every resampled value is a grid point k/n, as one correctly rounded quotient
    k = np.rint(fit.boot * n)
    np.testing.assert_array_equal(fit.boot, k / n)
    # the endpoints follow from the exact z0 on the exact grid values
    expected = _bca_lower_upper(np.sort((totals[:, 0] - totals[:, 1]) / n), z0,
                                fit.acceleration)
    got = fit.interval(0.95)
    assert (got.low, got.high) == pytest.approx(tuple(expected), abs=1e-15)
    # differences of float means, as computed before, miss most of these ties
    naive = totals[:, 0] / n - totals[:, 1] / n
    assert np.count_nonzero(naive == x.mean() - y.mean()) < tied / 2


def test_tail_levels_for_verdicts_count_ties_at_zero_exactly():
    # verdict p-values invert the interval at a margin; 0 is a grid point here
    x, y = _paired(30, 5, 5, 20)
    fit, _ = fit_bootstrap("difference", [x[None], y[None]], method="bca", n_resamples=B,
                           rng=np.random.default_rng(8))
    totals = resampled_totals(np.stack([x, y])[:, None, :], B, np.random.default_rng(8))
    d = totals[:, 0] - totals[:, 1]
    f = (np.count_nonzero(d < 0) + 0.5 * np.count_nonzero(d == 0)) / B
    z0 = fit._z0()
    w = special.ndtri(f) - z0
    expected_low = special.ndtr(w / (1 + fit.acceleration * w) - z0)
    low, high = fit.tails(0.0)
    assert low == pytest.approx(expected_low, abs=1e-12)
    assert high == pytest.approx(1 - expected_low, abs=1e-12)


@pytest.mark.parametrize("k", [1, 3])
def test_retention_ties_are_exact_fractions(k):
    rng = np.random.default_rng(11)
    clean = (rng.random((k, 40)) < 0.6).astype(float)
    noisy = clean * (rng.random((k, 40)) < 0.8)
    fit, _ = fit_bootstrap("retention", [clean, noisy], method="bca", n_resamples=B,
                           rng=np.random.default_rng(2))
    totals = resampled_totals(np.stack([clean, noisy]), B, np.random.default_rng(2))
    less, tied = _exact(lambda t: Fraction(int(t[1]), int(t[0])), totals,
                        [clean.sum(), noisy.sum()])
    assert tied > 20
    # with several seeds the deviations are rescaled (crossed variance) about θ̂: ties and
    # sides survive the rescaling
    assert np.count_nonzero(fit.boot == fit.estimate) == tied
    assert np.count_nonzero(fit.boot < fit.estimate) == less


def test_retention_difference_ties_are_exact_fractions():
    # two conditions with the same clean and noisy totals in many resamples: θ* = θ̂ = 0
    rng = np.random.default_rng(4)
    ca = (rng.random(30) < 0.7).astype(float)
    na = ca * (rng.random(30) < 0.8)
    mats = [ca[None], na[None], ca[None].copy(), na[None].copy()]
    mats[2][0, [0, 1]] = mats[2][0, [1, 0]]  # same totals, other items: θ̂ = 0
    fit, _ = fit_bootstrap("retention_difference", mats, method="bca", n_resamples=B,
                           rng=np.random.default_rng(6))
    totals = resampled_totals(np.stack(mats), B, np.random.default_rng(6))

    def theta(t):
        return Fraction(int(t[1]), int(t[0])) - Fraction(int(t[3]), int(t[2]))

    less, tied = _exact(theta, totals, np.stack(mats).sum(axis=(1, 2)))
    assert fit.estimate == 0.0
    assert tied > 100
    assert np.count_nonzero(fit.boot == fit.estimate) == tied
    assert np.count_nonzero(fit.boot < fit.estimate) == less


def test_proportion_outcomes_are_put_on_their_lattice():
    # means over 4 noisy evaluations: values i/4, totals exact in quarters
    rng = np.random.default_rng(9)
    x = rng.integers(0, 5, size=50) / 4
    y = rng.integers(0, 5, size=50) / 4
    fit, _ = fit_bootstrap("difference", [x[None], y[None]], method="bca", n_resamples=B,
                           rng=np.random.default_rng(1))
    q = np.rint(fit.boot * 200)  # grid of 1/(4 · 50)
    np.testing.assert_array_equal(fit.boot, q / 200)
    assert fit.estimate == (4 * x.sum() - 4 * y.sum()) / 200


# --- the same resamples through R's boot.ci ---------------------------------------------
# t: a paired difference of 0/1 outcomes over 60 items (24, 9, 3, 24 as above), from
# pattern counts drawn by numpy; L: its empirical influence values (= jackknife values for
# a difference of means). Exported to R 4.2.2 (boot 1.3-28.1) with
#   np.savetxt("t.txt", t, "%.17g"); np.savetxt("L.txt", L, "%.17g")
# and, in R:
#   library(boot); t <- scan("t.txt"); L <- scan("L.txt"); t0 <- 0.1
#   b <- structure(list(t0 = t0, t = matrix(t), R = length(t), data = seq_along(L),
#          statistic = function(d, i) 0, sim = "ordinary", stype = "i", call = quote(boot()),
#          strata = rep(1, 60), weights = rep(1 / 60, 60)), class = "boot")
#   boot.ci(b, conf = 0.95, type = "bca", L = L)$bca[4:5]
#   # -> -0.01666666667 0.20000000000   (R: w = qnorm(#{t < t0}/R), ties not split)
#   w <- qnorm((sum(t < t0) + sum(t == t0) / 2) / length(t)); a <- sum(L^3) / (6 * sum(L^2)^1.5)
#   z <- qnorm(c(0.025, 0.975)); boot:::norm.inter(t, pnorm(w + (w + z) / (1 - a * (w + z))))[, 2]
#   # -> 0.0000000000 0.2166666667   (ties split, as in robuststats and scipy)
#   c(sum(t < t0), sum(t == t0), a)  # -> 1347 347 0.01091168985
# The tie rule alone moves both endpoints by one atom (1/60).
R_STRICT = (-0.01666666667, 0.20000000000)
R_SPLIT = (0.0, 0.2166666667)
R_ACCELERATION = 0.01091168985


def _r_resamples():
    x, y = _paired(24, 9, 3, 24)
    d = x - y
    patterns, freq = np.array([1.0, -1.0, 0.0]), np.array([9, 3, 48])
    counts = np.random.default_rng(2024).multinomial(60, freq / 60, size=3000)
    t = (counts @ patterns) / 60  # one correctly rounded quotient per resample
    u_items, _ = jackknife_influence([x[None], y[None]], lambda m: m[..., 0] - m[..., 1])
    np.testing.assert_allclose(u_items, d - d.mean(), atol=1e-12)  # = empirical influence
    return t, u_items


def test_bca_matches_r_boot_ci_on_the_same_resamples():
    t, u = _r_resamples()
    acc = float(np.sum(u**3) / (6 * np.sum(u**2) ** 1.5))
    assert acc == pytest.approx(R_ACCELERATION, abs=1e-11)
    assert (np.count_nonzero(t < 0.1), np.count_nonzero(t == 0.1)) == (1347, 347)
    split = BootstrapFit(estimate=0.1, boot=t, method="bca", acceleration=acc)
    assert tuple(split.interval(0.95)) == pytest.approx(R_SPLIT, abs=1e-10)
    # R counts a tie as "not below"; moving θ̂ half an atom down reproduces that rule
    strict = BootstrapFit(estimate=0.1 - 1 / 120, boot=t, method="bca", acceleration=acc)
    assert tuple(strict.interval(0.95)) == pytest.approx(R_STRICT, abs=1e-10)


def test_interval_tie_rule_reaches_public_functions():
    x, y = _paired(24, 9, 3, 24)
    res = bootstrap_difference(x, y, n_resamples=B, rng=3)
    assert res.estimate == 0.1
    assert np.count_nonzero(res.bootstrap_distribution == 0.1) > 300


# --- any outcome table: the fit's ties and sides equal the exact fraction counts ---------

@st.composite
def _tables(draw):
    k = draw(st.integers(1, 4))
    n = draw(st.integers(2, 12))
    scale = draw(st.sampled_from([1, 1, 3]))  # 0/1 outcomes, or thirds
    cells = st.integers(0, scale)
    mats = [np.array(draw(st.lists(cells, min_size=k * n, max_size=k * n)), dtype=float)
            .reshape(k, n) / scale for _ in range(4)]
    assume(mats[0].sum() > 0 and mats[2].sum() > 0)
    return mats


@settings(max_examples=60, deadline=None)
@given(mats=_tables(), quantity=st.sampled_from(["difference", "retention",
                                                 "retention_difference"]))
def test_ties_and_sides_match_exact_fractions_on_any_table(mats, quantity):
    inputs = {"difference": mats[:2], "retention": mats[:2],
              "retention_difference": mats}[quantity]
    k, n = inputs[0].shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        fit, _ = fit_bootstrap(quantity, inputs, method="bca", n_resamples=300,
                               rng=np.random.default_rng(0))
    scale = 3 if any(np.any((m != 0) & (m != 1)) for m in inputs) else 1
    scaled = np.rint(np.stack(inputs) * scale)
    totals = resampled_totals(scaled, 300, np.random.default_rng(0))

    def theta(t):
        t = [int(v) for v in t]
        if quantity == "difference":
            return Fraction(t[0] - t[1], scale * k * n)
        if 0 in (t[0], t[len(t) - 2]):
            return None  # undefined ratio: dropped by the fit
        if quantity == "retention":
            return Fraction(t[1], t[0])
        return Fraction(t[1], t[0]) - Fraction(t[3], t[2])

    target = theta(scaled.sum(axis=(1, 2)))
    vals = [v for v in (theta(t) for t in totals) if v is not None]
    assert fit.boot.size == len(vals)
    assert np.count_nonzero(fit.boot == fit.estimate) == sum(v == target for v in vals)
    assert np.count_nonzero(fit.boot < fit.estimate) == sum(v < target for v in vals)
