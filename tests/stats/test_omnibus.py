"""Cochran's Q against a published example, pingouin's documented value, statsmodels and
its closed form."""

from __future__ import annotations

import warnings

import numpy as np
import pingouin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from statsmodels.stats.contingency_tables import cochrans_q

from robuststats.errors import InputError
from robuststats.glossary import TABLE_COLUMNS
from robuststats.stats import DegenerateDataWarning, cochran_q, mcnemar, mcnemar_stratified
from robuststats.stats._omnibus import q_statistic

# SAS/STAT User's Guide, PROC FREQ, example "Cochran's Q Test": responses (F favourable,
# U unfavourable) of 46 subjects to drugs A, B and C (data from Agresti 2002, Categorical
# Data Analysis). SAS: Cochran's Q 8.4706, DF 2, Pr > Q 0.0145 (p = 0.0145 in the text).
DRUG_PATTERNS = {"FFF": 6, "FFU": 16, "FUF": 2, "FUU": 4, "UFF": 2, "UFU": 4, "UUF": 6,
                 "UUU": 6}


def _drugs() -> np.ndarray:
    blocks = [[int(ch == "F") for ch in pattern]
              for pattern, count in DRUG_PATTERNS.items() for _ in range(count)]
    return np.array(blocks).T  # (3 conditions, 46 blocks)


def test_sas_drug_example_by_hand():
    # By hand: C = (28, 28, 16), N = 72, k = 3: k ΣC² − N² = 3·1824 − 5184 = 288.
    # Block totals R: 3 (6 blocks), 2 (16 + 2 + 2), 1 (4 + 4 + 6), 0 (6):
    # ΣR² = 9·6 + 4·20 + 1·14 = 148, kN − ΣR² = 216 − 148 = 68, Q = 2·288/68 = 8.470588.
    res = cochran_q(_drugs())
    assert res.statistic == pytest.approx(576 / 68, rel=1e-12)
    assert res.statistic == pytest.approx(8.4706, abs=5e-5)
    assert res.pvalue == pytest.approx(0.0145, abs=5e-5)
    assert (res.dof, res.n_blocks, res.n_conditions) == (2, 46, 3)


def test_pingouin_documented_example():
    # pingouin.cochran docstring: read_dataset("cochran"), dv "Energetic", within "Time",
    # subject "Subject" -> Q = 6.705882, p_unc = 0.034981
    df = pingouin.read_dataset("cochran")
    wide = df.pivot_table(index="Time", columns="Subject", values="Energetic")
    res = cochran_q(wide.to_numpy())
    assert res.statistic == pytest.approx(6.705882, abs=5e-7)
    assert res.pvalue == pytest.approx(0.034981, abs=5e-7)


def test_two_conditions_is_uncorrected_mcnemar():
    rng = np.random.default_rng(3)
    x = (rng.random((2, 200)) < [[0.7], [0.6]]).astype(int)
    ref = mcnemar(x[0], x[1], method="asymptotic")
    res = cochran_q(x)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-10)


@settings(max_examples=60, deadline=None)
@given(arrays(np.int8, st.tuples(st.integers(2, 5), st.integers(1, 40)),
              elements=st.integers(0, 1)))
def test_agrees_with_statsmodels_and_closed_form(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        res = cochran_q(x)
    closed = q_statistic(x.astype(float))
    if np.isnan(closed):  # no informative block: documented statistic 0, p = 1
        assert (res.statistic, res.pvalue) == (0.0, 1.0)
        return
    ref = cochrans_q(x.T)  # statsmodels takes (n_blocks, n_conditions)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-9, abs=1e-12)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)
    assert res.statistic == pytest.approx(closed, rel=1e-12, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(arrays(np.int8, st.tuples(st.just(2), st.integers(1, 4), st.integers(2, 15)),
              elements=st.integers(0, 1)))
def test_clustered_with_two_conditions_is_clustered_mcnemar(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        res = cochran_q(x, clustered=True)
        ref = mcnemar_stratified(x[0], x[1], method="clustered")
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-9, abs=1e-12)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)


def test_clustered_by_hand():
    # 3 conditions, 2 strata, 3 items. Totals over strata Y (condition x item):
    #   c0: [2, 1, 0], c1: [1, 1, 1], c2: [0, 1, 0]
    # item means [1, 1, 1/3]; D = Y − mean: c0 [1, 0, −1/3], c1 [0, 0, 2/3], c2 [−1, 0, −1/3]
    # T = (2/3, 2/3, −4/3); V = Σ_i D_i D_iᵀ = [[10/9, −2/9, −8/9], [−2/9, 4/9, −2/9],
    # [−8/9, −2/9, 10/9]]; on the contrasts L = [(1, −1, 0), (0, 1, −1)]: T' = L T = (0, 2),
    # V' = L V Lᵀ = [[2, 0], [0, 2]], Q = T'ᵀ V'⁻¹ T' = 2² / 2 = 2, on 2 df
    x = np.array([
        [[1, 1, 0], [1, 0, 0]],
        [[1, 0, 1], [0, 1, 0]],
        [[0, 1, 0], [0, 0, 0]],
    ])
    res = cochran_q(x, clustered=True)
    assert res.statistic == pytest.approx(2.0)
    assert res.dof == 2
    assert res.method == "item-clustered Cochran's Q (chi-squared)"
    assert res.n_blocks == 6


def test_clustered_without_item_level_differences_is_degenerate():
    # condition totals per item are equal although single blocks differ
    x = np.array([[[1, 0], [0, 1]], [[0, 1], [1, 0]]])
    with pytest.warns(DegenerateDataWarning, match="no item's outcomes differ"):
        res = cochran_q(x, clustered=True)
    assert (res.statistic, res.pvalue) == (0.0, 1.0)


def test_constant_blocks_do_not_change_q():
    x = _drugs()
    padded = np.hstack([x, np.ones((3, 50), int), np.zeros((3, 20), int)])
    res = cochran_q(padded)
    assert res.statistic == pytest.approx(cochran_q(x).statistic, rel=1e-12)
    assert res.n_blocks == 116


def test_three_dimensional_input_is_strata_by_items_blocks():
    rng = np.random.default_rng(0)
    x = (rng.random((4, 3, 50)) < 0.6).astype(int)  # (conditions, strata, items)
    assert cochran_q(x) == cochran_q(x.reshape(4, -1))


def test_all_blocks_constant_warns_and_gives_p_one():
    x = np.array([[1, 0, 1, 1], [1, 0, 1, 1], [1, 0, 1, 1]])
    with pytest.warns(DegenerateDataWarning, match="no block of the 4 differs"):
        res = cochran_q(x)
    assert (res.statistic, res.pvalue, res.dof) == (0.0, 1.0, 2)


def test_to_frame_uses_the_omnibus_columns():
    frame = cochran_q(_drugs()).to_frame()
    declared = [c for c in TABLE_COLUMNS["omnibus"] if c in frame.columns]
    assert list(frame.columns) == [*declared, "n_blocks"]
    assert declared == ["n_conditions", "question", "test", "statistic", "dof", "pvalue"]
    assert frame.loc[0, "test"] == "Cochran's Q (chi-squared)" == cochran_q(_drugs()).method


@pytest.mark.parametrize(
    ("x", "match"),
    [
        ([[1, 0, 1]], r"`x` must hold at least 2 conditions \(rows\), got 1\."),
        ([1, 0, 1], r"`x` must be 2-D \(n_conditions, n_blocks\) or 3-D "
                    r"\(n_conditions, n_strata, n_items\), got shape \(3,\)\."),
        ([[1, 0.5], [0, 1]], r"`x` must contain only 0/1 outcomes, got 0\.5\."),
        ([[1, 2], [0, 1]], r"`x` must contain values in \[0, 1\], got 2\.0\."),
        ([[1, np.nan], [0, 1]], r"`x` must not contain NaN or infinite values, got nan\."),
        (np.zeros((3, 0)), r"`x` must not be empty, got shape \(3, 0\)\."),
        ("abc", r"`x` must be an array of 0/1 outcomes, got 'abc'\."),
    ],
)
def test_bad_input(x, match):
    with pytest.raises(InputError, match=match):
        cochran_q(x)


def test_clustered_must_be_a_bool():
    with pytest.raises(InputError, match=r"`clustered` must be True or False, got 'yes'\."):
        cochran_q(_drugs(), clustered="yes")
