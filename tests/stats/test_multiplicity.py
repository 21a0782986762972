"""Holm and Benjamini–Hochberg adjustment against R p.adjust (hand-checked)."""

from __future__ import annotations

import numpy as np
import pytest

from robuststats.errors import InputError
from robuststats.stats import adjust_pvalues
from robuststats.stats._multiplicity import local_levels

P = [0.01, 0.04, 0.03, 0.005]


def test_holm_matches_r_p_adjust():
    # R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm")  ->  0.03 0.06 0.06 0.02
    # by hand: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04,
    # then the running maximum: 0.02, 0.03, 0.06, 0.06
    np.testing.assert_allclose(adjust_pvalues(P, method="holm"), [0.03, 0.06, 0.06, 0.02])


def test_bh_matches_r_p_adjust():
    # R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "BH")  ->  0.02 0.04 0.04 0.02
    # by hand: p * 4 / rank = 0.02, 0.02, 0.04, 0.04 (sorted), running minimum from the top
    np.testing.assert_allclose(adjust_pvalues(P, method="fdr_bh"), [0.02, 0.04, 0.04, 0.02])


def test_bonferroni_caps_at_one():
    # R: p.adjust(c(0.3, 0.01), "bonferroni")  ->  0.6 0.02
    np.testing.assert_allclose(adjust_pvalues([0.3, 0.01], method="bonferroni"), [0.6, 0.02])
    np.testing.assert_allclose(adjust_pvalues([0.7, 0.9], method="bonferroni"), [1.0, 1.0])


def test_method_must_be_named():
    with pytest.raises(TypeError):
        adjust_pvalues(P)  # no silent Holm–Šidák default
    with pytest.raises(InputError, match="`method` must be one of 'holm', 'fdr_bh'"):
        adjust_pvalues(P, method="hs")


def test_bad_pvalues():
    with pytest.raises(InputError, match=r"`pvalues` must contain values in \[0, 1\], got 1.5"):
        adjust_pvalues([0.1, 1.5], method="holm")
    with pytest.raises(InputError, match="must be 1-D"):
        adjust_pvalues([[0.1]], method="holm")
    assert adjust_pvalues([], method="holm").size == 0


def test_local_levels_follow_holm_steps():
    adjusted = adjust_pvalues(P, method="holm")
    levels = local_levels(P, adjusted, alpha=0.05)
    # rejected at α = 0.05: p = 0.005 (step 1, α/4) and p = 0.01 (step 2, α/3)
    assert levels[3] == pytest.approx(0.05 / 4)
    assert levels[0] == pytest.approx(0.05 / 3)
    # a raw p-value is below its local level exactly when the adjusted one is below α
    np.testing.assert_array_equal(np.asarray(P) < levels, adjusted < 0.05)


def test_local_levels_bh_are_fcr_levels():
    adjusted = adjust_pvalues(P, method="fdr_bh")
    levels = local_levels(P, adjusted, alpha=0.05)
    # all four rejected at α = 0.05 (largest p 0.04 <= 4 · 0.05 / 4): R = 4, level R α / m
    assert adjusted.max() < 0.05
    np.testing.assert_array_equal(np.asarray(P) < levels, adjusted < 0.05)
