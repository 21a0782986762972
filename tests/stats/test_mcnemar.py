"""McNemar family against published values (R, Fagerland et al.) and statsmodels."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.contingency_tables import StratifiedTable

from robuststats.errors import InputError
from robuststats.stats import DegenerateDataWarning, mcnemar, mcnemar_stratified

# Agresti (2013), Categorical Data Analysis, Table 11.1: presidential approval, two surveys.
# R: tab <- matrix(c(794, 86, 150, 570), 2)   # column-major: [[794, 150], [86, 570]]
APPROVAL = [[794, 150], [86, 570]]
# Cavo et al. (2012) complete response before/after consolidation, as used in
# Fagerland, Lydersen & Laake (2017), Statistical Analysis of Contingency Tables, ch. 8;
# values from the R package contingencytables (tests/testthat/test-ch8.R):
# n <- matrix(c(59, 6, 16, 80), 2, byrow = TRUE)
CAVO = [[59, 6], [16, 80]]


def _arrays(table):
    (a, b), (c, d) = table
    x = np.repeat([1, 1, 0, 0], [a, b, c, d])
    y = np.repeat([1, 0, 1, 0], [a, b, c, d])
    return x, y


def test_r_mcnemar_test_continuity_corrected():
    # R: mcnemar.test(tab)  ->  McNemar's chi-squared = 16.818, df = 1, p-value = 4.115e-05
    res = mcnemar(APPROVAL, method="asymptotic-cc")
    assert res.statistic == pytest.approx(16.818, abs=5e-4)
    assert res.pvalue == pytest.approx(4.115e-05, rel=1e-3)


def test_r_mcnemar_test_uncorrected():
    # R: mcnemar.test(tab, correct = FALSE)  ->  chi-squared = 17.356, p-value = 3.099e-05
    res = mcnemar(APPROVAL, method="asymptotic")
    assert res.statistic == pytest.approx(17.356, abs=5e-4)
    assert res.pvalue == pytest.approx(3.099e-05, rel=1e-3)


def test_exact_equals_binomial_test_on_discordant_pairs():
    # R: binom.test(86, 236)$p.value; with p = 1/2 the two-sided binomial p-value is
    # 2 * pbinom(86, 236, 0.5); scipy's binomtest is an independent implementation.
    res = mcnemar(APPROVAL, method="exact")
    assert res.pvalue == pytest.approx(stats.binomtest(86, 236).pvalue, rel=1e-10)
    assert res.pvalue == pytest.approx(2 * stats.binom.cdf(86, 236, 0.5), rel=1e-10)


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        # contingencytables: McNemar_exact_cond_test_paired_2x2(n) -> P = 0.052479
        ("exact", 0.052479),
        # McNemar_midP_test_paired_2x2(n) -> P = 0.034690
        ("midp", 0.034690),
        # McNemar_asymptotic_test_paired_2x2(n) -> P = 0.033006, Z = -2.132
        ("asymptotic", 0.033006),
        # McNemar_asymptotic_test_CC_paired_2x2(n) -> P = 0.055009, Z = 1.919
        ("asymptotic-cc", 0.055009),
    ],
)
def test_fagerland_cavo_pvalues(method, expected):
    res = mcnemar(CAVO, method=method)
    assert res.pvalue == pytest.approx(expected, abs=5e-7)
    assert res.estimate == pytest.approx(-0.0621, abs=5e-5)


def test_cavo_asymptotic_z_values():
    assert math.sqrt(mcnemar(CAVO, method="asymptotic").statistic) == pytest.approx(2.132, abs=5e-4)
    assert math.sqrt(mcnemar(CAVO, method="asymptotic-cc").statistic) == pytest.approx(1.919, abs=5e-4)


@pytest.mark.parametrize(
    ("ci_method", "low", "high"),
    [
        # Tango_asymptotic_score_CI_paired_2x2(n) -> (95% CI -0.1240 to -0.0054)
        ("tango", -0.1240, -0.0054),
        # Newcombe_square_and_add_CI_paired_2x2(n) -> (95% CI -0.1186 to -0.0046)
        ("newcombe", -0.1186, -0.0046),
        # Wald_CI_diff_paired_2x2(n) -> (95% CI -0.1184 to -0.0058)
        ("wald", -0.1184, -0.0058),
    ],
)
def test_fagerland_cavo_intervals(ci_method, low, high):
    ci = mcnemar(CAVO, ci_method=ci_method).confidence_interval
    assert ci.low == pytest.approx(low, abs=5e-5)
    assert ci.high == pytest.approx(high, abs=5e-5)


def test_bentur_small_sample_by_hand():
    # Bentur et al. (2009), table [[1, 1], [7, 12]]: b = 1, c = 7, b + c = 8.
    # exact: 2 * (C(8,0) + C(8,1)) / 2^8 = 18/256; mid-p: 18/256 - 8/256 = 10/256;
    # asymptotic: chi2 = (1 - 7)^2 / 8 = 4.5.
    table = [[1, 1], [7, 12]]
    assert mcnemar(table, method="exact").pvalue == pytest.approx(18 / 256, rel=1e-12)
    assert mcnemar(table, method="midp").pvalue == pytest.approx(10 / 256, rel=1e-12)
    assert mcnemar(table, method="asymptotic").statistic == pytest.approx(4.5)
    assert mcnemar(table, method="asymptotic").pvalue == pytest.approx(stats.chi2.sf(4.5, 1))


def test_one_sided_exact_matches_binomtest():
    # acc_x > acc_y <=> b large: P(X >= b), X ~ Bin(b + c, 1/2)
    res = mcnemar(CAVO, method="exact", alternative="less")
    assert res.pvalue == pytest.approx(stats.binomtest(6, 22, alternative="less").pvalue)
    res = mcnemar(CAVO, method="exact", alternative="greater")
    assert res.pvalue == pytest.approx(stats.binomtest(6, 22, alternative="greater").pvalue)


def test_one_sided_asymptotic_is_half_of_two_sided():
    two = mcnemar(CAVO, method="asymptotic").pvalue
    assert mcnemar(CAVO, method="asymptotic", alternative="less").pvalue == pytest.approx(two / 2)


def test_arrays_and_table_agree():
    x, y = _arrays(CAVO)
    from_arrays = mcnemar(x, y, method="midp", ci_method="tango")
    from_table = mcnemar(CAVO, method="midp", ci_method="tango")
    assert from_arrays == from_table
    assert (from_arrays.n_a_only, from_arrays.n_b_only, from_arrays.n) == (6, 16, 161)


def test_to_frame_is_one_tidy_row_in_glossary_names():
    frame = mcnemar(CAVO).to_frame()
    assert frame.shape[0] == 1
    # the glossary's `tests` columns that a single comparison knows, in the declared order
    assert list(frame.columns) == [
        "n_strata", "n_items", "n_a_only", "n_b_only", "accuracy_a", "accuracy_b",
        "estimate", "ci_low", "ci_high", "ci_level", "ci_method", "test", "statistic",
        "pvalue", "alternative"]
    row = frame.iloc[0]
    assert (row.n_a_only, row.n_b_only, row.n_strata, row.n_items) == (6, 16, 1, 161)
    assert (row.ci_level, row.ci_method, row.test) == (0.95, "newcombe", "McNemar exact")
    # first minus second: acc_x − acc_y = (65 − 75) / 161
    assert row.estimate == pytest.approx(row.accuracy_a - row.accuracy_b)
    assert row.estimate == pytest.approx((65 - 75) / 161)


def test_no_discordant_pairs_warns_and_documents_result():
    table = [[30, 0], [0, 10]]
    with pytest.warns(DegenerateDataWarning, match="no discordant pairs"):
        res = mcnemar(table, method="exact", ci_method="tango")
    assert (res.statistic, res.pvalue, res.estimate) == (0.0, 1.0, 0.0)
    # Tango's interval with b = c = 0 is ±z²/(n + z²) (solving Z(δ0) = ±z in closed form)
    z = stats.norm.ppf(0.975)
    assert res.confidence_interval.high == pytest.approx(z**2 / (40 + z**2), rel=1e-6)
    assert res.confidence_interval.low == pytest.approx(-(z**2) / (40 + z**2), rel=1e-6)


def test_all_methods_finite_on_degenerate_tables():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for table in ([[5, 0], [0, 0]], [[0, 3], [0, 0]], [[0, 0], [4, 0]]):
            for method in ("exact", "midp", "asymptotic", "asymptotic-cc"):
                for ci_method in ("tango", "newcombe", "wald"):
                    res = mcnemar(table, method=method, ci_method=ci_method)
                    assert np.isfinite([res.pvalue, *res.confidence_interval]).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "fisher"}, "`method` must be one of"),
        ({"ci_method": "exact"}, "`ci_method` must be one of"),
        ({"alternative": "two_sided"}, "`alternative` must be one of"),
        ({"confidence_level": 95}, r"`confidence_level` must be a number in \(0, 1\), got 95"),
    ],
)
def test_bad_options(kwargs, match):
    with pytest.raises(InputError, match=match):
        mcnemar(CAVO, **kwargs)


def test_bad_inputs():
    with pytest.raises(InputError, match="2×2 table"):
        mcnemar([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(InputError, match="non-negative integer counts"):
        mcnemar([[1, -2], [3, 4]])
    with pytest.raises(InputError, match="same shape"):
        mcnemar([1, 0, 1], [1, 0])
    with pytest.raises(InputError, match=r"only 0/1 outcomes, got 0\.5"):
        mcnemar([1, 0.5, 1], [1, 0, 1])


# --- stratified ---------------------------------------------------------------------------


def _random_strata(seed, shape=(3, 40)):
    rng = np.random.default_rng(seed)
    return (rng.random(shape) < 0.7).astype(int), (rng.random(shape) < 0.55).astype(int)


def test_mantel_haenszel_equals_cmh_with_pairs_as_strata():
    # The CMH statistic with each matched pair as a stratum is McNemar's statistic (Agresti
    # 2013, Sec. 11.1); statsmodels' StratifiedTable computes CMH independently.
    x, y = _random_strata(0)
    tables = np.dstack([np.array([[xi, 1 - xi], [yi, 1 - yi]]) for xi, yi in zip(x.ravel(), y.ravel())])
    cmh = StratifiedTable(tables).test_null_odds(correction=False)
    res = mcnemar_stratified(x, y)
    assert res.statistic == pytest.approx(cmh.statistic, rel=1e-10)
    assert res.pvalue == pytest.approx(cmh.pvalue, rel=1e-10)


def test_stratified_pooled_counts_match_r_on_approval_table():
    # two strata whose pooled discordant counts are Agresti's (150, 86): the MH statistic is
    # R's mcnemar.test(tab, correct = FALSE) chi-squared = 17.356
    x = np.zeros((2, 800), dtype=int)
    y = np.zeros((2, 800), dtype=int)
    x[0, :100] = 1  # 100 (x only) in stratum 0, 50 in stratum 1
    x[1, :50] = 1
    y[0, 100:140] = 1  # 40 + 46 (y only)
    y[1, 50:96] = 1
    res = mcnemar_stratified(x, y)
    assert (res.n_a_only, res.n_b_only) == (150, 86)
    assert res.statistic == pytest.approx(17.356, abs=5e-4)


def test_clustered_with_one_stratum_is_mcnemar():
    x, y = _random_strata(1, shape=(1, 60))
    ref = mcnemar(x[0], y[0], method="asymptotic")
    res = mcnemar_stratified(x, y, method="clustered")
    assert res.statistic == pytest.approx(ref.statistic)
    assert res.pvalue == pytest.approx(ref.pvalue)


def test_clustered_statistic_by_hand():
    # 2 strata x 3 items. item 0: x beats y in both strata (d = 2); item 1: y beats x once
    # (d = -1); item 2: concordant (d = 0). Durkalski: (2 - 1)^2 / (4 + 1) = 0.2.
    x = np.array([[1, 0, 1], [1, 1, 0]])
    y = np.array([[0, 1, 1], [0, 1, 0]])
    res = mcnemar_stratified(x, y, method="clustered")
    assert res.statistic == pytest.approx(0.2)
    assert res.estimate == pytest.approx(1 / 6)
    # Obuchowski variance: K/(K-1) * Σ(d_i - m δ)^2 / N^2 with K=3, m=2, N=6, δ=1/6
    var = 1.5 * ((2 - 1 / 3) ** 2 + (-1 - 1 / 3) ** 2 + (0 - 1 / 3) ** 2) / 36
    half = stats.norm.ppf(0.975) * math.sqrt(var)
    assert res.confidence_interval.high == pytest.approx(min(1.0, 1 / 6 + half))
    assert res.confidence_interval.low == pytest.approx(1 / 6 - half)


def test_stratified_degenerate_and_errors():
    x = np.ones((2, 5), dtype=int)
    with pytest.warns(DegenerateDataWarning, match="no discordant pairs"):
        res = mcnemar_stratified(x, x)
    assert res.pvalue == 1.0
    with pytest.raises(InputError, match="same shape"):
        mcnemar_stratified(x, x[:1])
    with pytest.raises(InputError, match="`method` must be one of"):
        mcnemar_stratified(x, x, method="cmh")


# --- properties over arbitrary tables -------------------------------------------------------

counts = st.integers(min_value=0, max_value=60)


@settings(max_examples=150, deadline=None)
@given(counts, counts, counts, counts, st.sampled_from(["tango", "newcombe", "wald"]),
       st.sampled_from(["exact", "midp", "asymptotic", "asymptotic-cc"]))
def test_any_table_gives_valid_result(a, b, c, d, ci_method, method):
    if a + b + c + d == 0:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        res = mcnemar([[a, b], [c, d]], method=method, ci_method=ci_method)
    ci = res.confidence_interval
    assert 0.0 <= res.pvalue <= 1.0
    assert -1.0 <= ci.low <= res.estimate + 1e-9
    assert res.estimate - 1e-9 <= ci.high <= 1.0


@settings(max_examples=60, deadline=None)
@given(counts, counts, counts, counts)
def test_tango_interval_nests_with_level(a, b, c, d):
    if a + b + c + d == 0:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        wide = mcnemar([[a, b], [c, d]], ci_method="tango", confidence_level=0.99)
        narrow = mcnemar([[a, b], [c, d]], ci_method="tango", confidence_level=0.9)
    assert wide.confidence_interval.low <= narrow.confidence_interval.low + 1e-9
    assert wide.confidence_interval.high >= narrow.confidence_interval.high - 1e-9
