"""Stage-wise ordering p-values after a group-sequential study, against rpact 3.3.4."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr

from robuststats.stats import Hypothesis
from robuststats.stats._evidence import normal_evidence
from robuststats.stats.sequential import SequentialOptions, decide_look
from robuststats.stats.sequential._ordering import stagewise_pvalue

INF = math.inf


@pytest.mark.parametrize(("fractions", "upper", "lower", "look", "z", "expected"), [
    # d <- getDesignGroupSequential(kMax = 3, alpha = 0.025, sided = 1, typeOfDesign = "asOF",
    #   informationRates = c(1/3, 2/3, 1))
    # ds <- getDataset(n = c(1000, 1000), means = c(0.05, 0.09), stDevs = c(1, 1))
    # getAnalysisResults(design = d, dataInput = ds, normalApproximation = TRUE)$finalPValues
    #   NA 0.000942494 NA  (overall z 1.581139, 3.130652)
    ((1 / 3, 2 / 3, 1), (3.710303, 2.511427, 1.993047), (-INF,) * 3, 2, 3.130652,
     0.000942494),
    # typeOfDesign = "asP", informationRates = c(3/8, 5/8, 1);
    # getDataset(n = c(3000, 2000, 3000), means = c(0.02, 0.03, 0.06), stDevs = c(1, 1, 1))
    #   finalPValues NA NA 0.01830785419  (overall z 3.353986661 at stage 3)
    ((3 / 8, 5 / 8, 1), (2.243455889, 2.340809353, 2.279233404), (-INF,) * 3, 3, 3.353986661,
     0.01830785419),
    # asOF with futilityBounds = c(0, 0.5), bindingFutility = TRUE;
    # getDataset(n = c(1000, 1000), means = c(0.05, 0.10), stDevs = c(1, 1))
    #   finalPValues NA 0.0004791574746 NA  (overall z 3.35389225 at stage 2)
    ((1 / 3, 2 / 3, 1), (3.710302873, 2.510358103, 1.964951955), (0.0, 0.5, 1.964951955), 2,
     3.35389225, 0.0004791574746),
])
def test_agrees_with_rpact(fractions, upper, lower, look, z, expected) -> None:
    got = stagewise_pvalue(fractions, upper, lower, look, float(ndtr(-z)))
    assert got == pytest.approx(expected, rel=1e-6)


def test_first_look_is_the_one_look_p_and_later_looks_add_the_spent_alpha() -> None:
    f, up, lo = (1 / 3, 2 / 3, 1), (3.710303, 2.511427, 1.993047), (-INF,) * 3
    assert stagewise_pvalue(f, up, lo, 1, 0.0123) == 0.0123
    # at the bound of look 2 the p-value is the α spent by look 2 (one tail of asOF, 0.025)
    spent2 = 2 - 2 * ndtr(float(-ndtr_inv(0.0125)) / math.sqrt(2 / 3))
    assert stagewise_pvalue(f, up, lo, 2, float(ndtr(-2.511427))) == \
        pytest.approx(spent2, rel=1e-5)
    # never below the one-look p-value; p = 1 leaves the probability of continuing
    for p in (1e-6, 0.01, 0.3, 0.9):
        assert stagewise_pvalue(f, up, lo, 3, p) >= p - 1e-9
    assert stagewise_pvalue(f, up, lo, 3, 1.0) == pytest.approx(1.0, abs=1e-6)


def ndtr_inv(p: float) -> float:
    from scipy.special import ndtri
    return float(ndtri(p))


@pytest.mark.parametrize("relation", ["greater", "less", "equivalent"])
def test_a_decision_at_a_look_has_a_stagewise_p_at_most_alpha(relation) -> None:
    options = SequentialOptions(looks=(3, 5, 8), alpha=0.05, spending="obf")
    equivalence = relation == "equivalent"
    h = Hypothesis("H", "accuracy", "A", "B", 0.05, relation, 0.05 if equivalence else 0.02)
    seen, seen_looks = set(), set()
    for look in (1, 2, 3):
        for est in np.linspace(-0.2, 0.2, 41):
            ev = normal_evidence(est, 0.02 if equivalence else 0.05, 0.95, "normal", "")
            d = decide_look(h, ev, look, options)
            if d.decision == "CONTINUE":  # defined only where the study stops
                assert math.isnan(d.pvalue)
                continue
            assert 0.0 <= d.pvalue <= 1.0
            decided = d.decision in ("VERIFIED", "FALSIFIED")
            if decided:
                seen_looks.add(look)
            seen.add(decided)
            # deciding at a look ⇔ the stage-wise p is at most α (up to the bounds' 1e-10)
            assert decided == (d.pvalue <= 0.05 + 1e-7), (look, est, d)
    assert seen == {True, False}
    assert len(seen_looks) == 3


def test_median_unbiased_estimate_and_stagewise_bounds_agree_with_rpact() -> None:
    # d <- getDesignGroupSequential(kMax = 3, alpha = 0.025, sided = 1, typeOfDesign = "asOF",
    #   informationRates = c(1/3, 2/3, 1))
    # ds <- getDataset(n = c(1000, 1000), means = c(0.05, 0.09), stDevs = c(1, 1))
    # r <- getAnalysisResults(design = d, dataInput = ds, normalApproximation = TRUE)
    # r$medianUnbiasedEstimates: NA 0.06987329619 NA
    # r$finalConfidenceIntervalLowerBounds / UpperBounds: NA 0.0259132837 / 0.1137438618 NA
    # (stage 2: overall mean 0.07, overall sd 0.9999499737, z 3.130652 on n = 2000)
    from robuststats.stats.sequential._ordering import median_unbiased_ratio, stagewise_drift

    f, up, lo = (1 / 3, 2 / 3, 1), (3.710303, 2.511427, 1.993047), (-INF,) * 3
    se = 0.9999499737 / math.sqrt(2000)
    z = 0.07 / se
    scale = math.sqrt(2 / 3) * se
    assert stagewise_drift(f, up, lo, 2, z) * scale == pytest.approx(0.06987329619, rel=2e-5)
    assert stagewise_drift(f, up, lo, 2, z, 0.025) * scale == pytest.approx(0.0259132837,
                                                                             rel=2e-5)
    assert stagewise_drift(f, up, lo, 2, z, 0.975) * scale == pytest.approx(0.1137438618,
                                                                             rel=2e-5)
    assert 0.07 * median_unbiased_ratio(f, up, lo, 2, z) == pytest.approx(0.06987329619,
                                                                           rel=2e-5)
    assert median_unbiased_ratio(f, up, lo, 1, 4.0) == 1.0  # the first look: unbiased as is


def test_an_early_stop_is_pulled_back_and_a_late_one_barely() -> None:
    options = SequentialOptions(looks=(3, 5, 8), alpha=0.05, spending="pocock")
    h = Hypothesis("H", "accuracy", "A", "B", 0.05, "greater", 0.0)
    ev = normal_evidence(0.12, 0.06, 0.95, "normal", "")  # z ≈ 3.9
    first, second = decide_look(h, ev, 1, options), decide_look(h, ev, 2, options)
    assert first.decision == second.decision == "VERIFIED"
    assert first.median_unbiased == pytest.approx(0.12)
    assert 0.0 < second.median_unbiased < 0.12
    less = Hypothesis("H", "accuracy", "A", "B", 0.05, "less", 0.0)
    mirrored = decide_look(less, normal_evidence(-0.12, 0.06, 0.95, "normal", ""), 2, options)
    assert mirrored.median_unbiased == pytest.approx(-second.median_unbiased)


@pytest.mark.parametrize("futility", ["binding", "non_binding"])
@pytest.mark.parametrize("relation", ["greater", "less"])
def test_with_futility_a_futile_stop_is_never_significant(futility, relation) -> None:
    # a futility stop decides nothing about the other side: its p-value is the verifying
    # tail's, above α, and it has no median-unbiased estimate
    options = SequentialOptions(looks=(3, 5, 8), alpha=0.05, spending="obf",
                                futility=futility, drift=3.0)
    h = Hypothesis("H", "accuracy", "A", "B", 0.05, relation, 0.02)
    kinds = set()
    for look in (1, 2):
        for est in np.linspace(-0.15, 0.15, 31):
            d = decide_look(h, normal_evidence(est, 0.05, 0.95, "normal", ""), look, options)
            kinds.add(d.decision)
            if d.decision == "FUTILE":
                assert d.pvalue > 0.05 and math.isnan(d.median_unbiased)
            elif d.decision in ("VERIFIED", "FALSIFIED"):
                assert d.pvalue <= 0.05 + 1e-7
                # on the side the estimate lies: a stop overshoots, never undershoots
                assert abs(d.median_unbiased - h.margin) <= abs(est - h.margin) + 1e-12
    assert {"FUTILE", "CONTINUE", "VERIFIED"} <= kinds
