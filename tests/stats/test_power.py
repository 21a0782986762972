"""Tests of power_mcnemar / power_two_proportions against published values.

Sources are named at each test; R calls are pasted where the value comes from R.
"""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robuststats.errors import InputError
from robuststats.stats import (
    PoolSizeWarning,
    PowerResult,
    power_mcnemar,
    power_two_proportions,
)
from robuststats.stats.power._design import discordance_from_correlation
from robuststats.stats.power._exact import exact_power

# ---------------------------------------------------------------- Connor (1987) / MESS


@pytest.mark.parametrize(("discordance", "expected"), [(0.06, 521), (0.20, 1742)])
def test_connor_project_reference(discordance: float, expected: int) -> None:
    # ../shared/ARCHITECTURE.md "Statistical facts": δ = 0.03, power 0.8, α = .05:
    # n ≈ 521 at π_D = .06 and 1742 at π_D = .20 (Connor 1987 formula).
    r = power_mcnemar(0.03, power=0.8, discordance=discordance, method="connor")
    assert r.n == expected
    assert r.solved_for == "n"
    assert r.achieved_power >= 0.8


def test_connor_matches_mess_documentation_example() -> None:
    # R: MESS::power_mcnemar_test(n = NULL, paid = .1, psi = 2, power = .8)
    #    n = 233.0945   (issue 3; MESS's default method = "normal")
    # paid = smaller discordant probability, psi = ratio: π_D = paid(1 + psi) = .3,
    # δ = paid(psi − 1) = .1.
    r = power_mcnemar(0.1, power=0.8, discordance=0.3, method="connor")
    assert r.n_unrounded == pytest.approx(233.0945, abs=1e-4)
    assert r.n == 234


@pytest.mark.parametrize(
    ("alternative", "expected"), [("two-sided", 22), ("greater", 17), ("less", 17)]
)
def test_connor_matches_mess_unit_tests(alternative: str, expected: int) -> None:
    # MESS tests/testthat/test_power_mcnemar_test.R ("Produces validated results"):
    #   round(power_mcnemar_test(paid=0.05, psi=45/5, power=.8)$n) == 22
    #   round(power_mcnemar_test(paid=0.05, psi=45/5, power=.8, alternative="one.sided")$n) == 17
    # π_D = .05·10 = .5, δ = .05·8 = .4
    r = power_mcnemar(0.4, power=0.8, discordance=0.5, alternative=alternative,
                      method="connor")
    assert round(r.n_unrounded) == expected


def test_connor_matches_powerandsamplesize_calculators() -> None:
    # powerandsamplesize.com, "Compare Paired Proportions: McNemar's Z-test" (Connor 1987):
    # 2-sided, p01 = .45, p10 = .05, α = .05, β = .20  ->  ceiling(n) = 23
    assert power_mcnemar(0.4, power=0.8, discordance=0.5, method="connor").n == 23
    # 1-sided, p01 = .45, p10 = .05, α = .05, β = .10  ->  ceiling(n) = 23
    assert power_mcnemar(0.4, power=0.9, discordance=0.5, alternative="greater",
                         method="connor").n == 23


def test_exact_unconditional_matches_mess() -> None:
    # MESS tests/testthat/test_power_mcnemar_test.R:
    #   round(power_mcnemar_test(144, paid=0.25, psi=45/25, method="exact",
    #                            alternative="one.sided", sig.level=0.025)$power, 2) == 0.80
    # π_D = .25·2.8 = .7, δ = .25·0.8 = .2
    r = power_mcnemar(
        0.2, 144, None, discordance=0.7, alpha=0.025, alternative="greater", method="exact"
    )
    assert round(r.power, 2) == 0.80
    # the two-sided exact test at α = .05 rejects on the same counts (Binomial(d, ½) is
    # symmetric) plus a negligible far tail
    two = power_mcnemar(0.2, 144, None, discordance=0.7, alpha=0.05, method="exact")
    assert two.power == pytest.approx(r.power, abs=1e-5)


def test_exact_test_size_never_exceeds_alpha() -> None:
    # Property of the conditional exact test (Fagerland, Lydersen & Laake 2013): under
    # H0 (δ = 0) its rejection rate is at most α, whatever n and π_D.
    for n in (20, 57, 200, 1319):
        for pi_d in (0.05, 0.2, 0.6):
            assert exact_power(n, pi_d, 0.0, 0.05, 2) <= 0.05
            assert exact_power(n, pi_d, 0.0, 0.05, 1) <= 0.05


def test_exact_needs_more_items_than_connor_and_stays_close() -> None:
    # The exact test is conservative, so its n is larger, but for n in the hundreds the
    # two agree within a few percent (Fagerland et al. 2013, Table 3 pattern).
    for pi_d in (0.06, 0.2):
        normal = power_mcnemar(0.03, power=0.8, discordance=pi_d, method="connor")
        exact = power_mcnemar(0.03, power=0.8, discordance=pi_d, method="exact")
        assert normal.n <= exact.n <= 1.1 * normal.n
        assert exact.achieved_power >= 0.8
        below = power_mcnemar(0.03, exact.n - 1, None, discordance=pi_d, method="exact")
        assert below.power < 0.8


# ------------------------------------------------------------------- correlation input


def test_correlation_conversion_matches_powertools_example() -> None:
    # R powertools::pss.mcnemar.test, Example 6.10 (two equivalent calls):
    #   pss.mcnemar.test(N = NULL, p1 = 0.8, p2 = 0.9, phi = 0, power = 0.9)
    #   pss.mcnemar.test(N = NULL, paid = 0.08, psi = 0.18 / 0.08, power = 0.9)
    # i.e. φ = 0 at p1 = .8, p2 = .9 gives discordant probabilities .08 and .18.
    assert discordance_from_correlation(0.8, 0.9, 0.0) == pytest.approx(0.26)
    via_phi = power_mcnemar(0.1, power=0.9, baseline=0.8, correlation=0.0)
    via_paid = power_mcnemar(0.1, power=0.9, discordance=0.08 + 0.18)
    assert via_phi.n == via_paid.n
    assert via_phi.correlation == 0.0


def test_correlation_one_with_equal_margins_has_no_discordance_left() -> None:
    # φ = 1 is only reachable when p1 = p2; with δ > 0 it is outside the allowed range
    with pytest.raises(InputError, match=r"impossible: `correlation` = 1.0 is outside"):
        power_mcnemar(0.05, power=0.8, baseline=0.6, correlation=1.0)


def test_correlation_needs_baseline_and_excludes_discordance() -> None:
    with pytest.raises(InputError, match=r"`correlation` needs `baseline`"):
        power_mcnemar(0.03, power=0.8, correlation=0.5)
    with pytest.raises(InputError, match=r"either `discordance` or `correlation`"):
        power_mcnemar(0.03, power=0.8, discordance=0.1, correlation=0.5, baseline=0.6)


# --------------------------------------------------------------------- solving / trips


def test_round_trip_n_power_effect() -> None:
    r = power_mcnemar(0.03, power=0.8, discordance=0.15)
    back = power_mcnemar(0.03, r.n, None, discordance=0.15)
    assert back.power == pytest.approx(r.achieved_power)
    assert back.power >= 0.8
    mde = power_mcnemar(None, r.n, 0.8, discordance=0.15)
    assert mde.solved_for == "effect"
    assert mde.effect <= 0.03
    assert mde.effect == pytest.approx(0.03, rel=2e-3)
    mde_exact = power_mcnemar(None, r.n, 0.8, discordance=0.15, method="exact")
    assert power_mcnemar(
        mde_exact.effect, r.n, None, discordance=0.15, method="exact"
    ).power == pytest.approx(0.8, abs=1e-6)


def test_effect_solved_with_correlation_input() -> None:
    r = power_mcnemar(None, 800, 0.8, baseline=0.64, correlation=0.5)
    check = power_mcnemar(r.effect, 800, None, baseline=0.64, correlation=0.5)
    assert check.power == pytest.approx(0.8, abs=1e-6)


def test_unreachable_power_for_effect_is_an_error() -> None:
    # with 10 items and π_D = .02 even δ = π_D cannot reach 99 % power
    with pytest.raises(InputError, match=r"no effect up to 0.02 reaches power 0.99"):
        power_mcnemar(None, 10, 0.99, discordance=0.02)


def test_result_is_frozen_and_tabulates() -> None:
    r = power_mcnemar(0.03, power=0.8, discordance=0.2)
    assert isinstance(r, PowerResult)
    with pytest.raises(AttributeError):
        r.n = 3  # type: ignore[misc]
    frame = r.to_frame()
    assert frame.shape[0] == 1
    # the default is the exact test that `mcnemar` and `analyze` run (docs/power.md table)
    assert frame.loc[0, "n"] == 1800 and r.method == "exact"
    assert "exact McNemar test" in frame.loc[0, "method_description"]
    assert r.to_dict()["n"] == 1800
    connor = power_mcnemar(0.03, power=0.8, discordance=0.2, method="connor")
    assert "Connor" in connor.to_frame().loc[0, "method_description"]


# ------------------------------------------------------------- repeats / item pool


def test_design_effect_with_repeats() -> None:
    # Kish: deff = 1 + (m − 1)·ICC = 1 + 2·0.3 = 1.6; 3 repeats of an item are worth
    # 3/1.6 items, so items = ceil(1741.84 · 1.6 / 3) = ceil(928.98) = 929.
    r = power_mcnemar(0.03, power=0.8, discordance=0.2, repeats=3, icc=0.3, method="connor")
    assert r.design_effect == pytest.approx(1.6)
    assert r.n == 929
    assert r.n_evaluations == 929 * 3
    assert r.n_effective == pytest.approx(929 * 3 / 1.6)
    assert r.n_effective >= 1741.84


def test_repeats_with_icc_one_add_nothing() -> None:
    r = power_mcnemar(0.03, power=0.8, discordance=0.2, repeats=5, icc=1.0)
    assert r.n == power_mcnemar(0.03, power=0.8, discordance=0.2).n == 1800


def test_pool_warning_and_fewest_repeats() -> None:
    with pytest.warns(PoolSizeWarning, match=r"n = 1742 items exceeds the item pool of 1319"):
        r = power_mcnemar(0.03, power=0.8, discordance=0.2, pool_size=1319, method="connor")
    assert r.exceeds_pool
    assert r.min_repeats == 2  # 1319·2 ≥ 1742 when repeats count as new items (ICC 0)
    # ICC 0.2: m·1319/(1 + 0.2(m − 1)) ≥ 1741.84  ⇔  m ≥ 1741.84·0.8/(1319 − 348.37) = 1.436
    with pytest.warns(PoolSizeWarning, match=r"2 repeats of all 1319 items reach it"):
        r = power_mcnemar(0.03, power=0.8, discordance=0.2, pool_size=1319, icc=0.2,
                          method="connor")
    assert r.min_repeats == 2
    # ICC 0.8: repeats of 1319 items are worth at most 1319/0.8 = 1649 < 1742 items
    with pytest.warns(PoolSizeWarning, match=r"no number of repeats reaches it"):
        r = power_mcnemar(0.03, power=0.8, discordance=0.2, pool_size=1319, icc=0.8,
                          method="connor")
    assert r.min_repeats is None


def test_no_pool_warning_when_it_fits() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = power_mcnemar(0.03, power=0.8, discordance=0.06, pool_size=1319)
    assert not r.exceeds_pool


# ---------------------------------------------------------------------- unpaired design


def test_unpaired_project_reference_is_the_unpooled_formula() -> None:
    # ../shared/ARCHITECTURE.md: "3938 if unpaired" for δ = .03, power .8, α = .05. It is
    # n = (z_{α/2} + z_β)²(p1q1 + p2q2)/δ² at the seed's accuracies p1 = .64, p2 = .67
    # (= 3937.52 -> 3938). Fleiss' pooled-variance formula gives 3941 and the
    # continuity-corrected one (Fleiss, Tytun & Ury 1980) 4007.
    assert power_two_proportions(0.03, power=0.8, baseline=0.64, method="unpooled").n == 3938
    assert power_two_proportions(0.03, power=0.8, baseline=0.64).n == 3941
    assert power_two_proportions(0.03, power=0.8, baseline=0.64, method="pooled-cc").n == 4007


def test_unpaired_arcsine_matches_statsmodels() -> None:
    # statsmodels: NormalIndPower().solve_power(proportion_effectsize(.67, .64),
    #              alpha=.05, power=.8, ratio=1)  -> nobs1 = 3939.71 (both tails counted)
    from statsmodels.stats.power import NormalIndPower
    from statsmodels.stats.proportion import proportion_effectsize

    expected = NormalIndPower().solve_power(
        proportion_effectsize(0.67, 0.64), alpha=0.05, power=0.8, ratio=1.0
    )
    r = power_two_proportions(0.03, power=0.8, baseline=0.64, method="arcsine")
    assert r.n_unrounded == pytest.approx(expected, rel=1e-4)
    power_sm = NormalIndPower().power(proportion_effectsize(0.67, 0.64), 2000, 0.05)
    assert power_two_proportions(
        0.03, 2000, None, baseline=0.64, method="arcsine"
    ).power == pytest.approx(power_sm, abs=1e-4)


def test_unpaired_continuity_correction_round_trip() -> None:
    r = power_two_proportions(0.05, power=0.9, baseline=0.5, method="pooled-cc")
    assert power_two_proportions(0.05, r.n, None, baseline=0.5, method="pooled-cc").power >= 0.9
    mde = power_two_proportions(None, r.n, 0.9, baseline=0.5, method="pooled-cc")
    assert mde.effect == pytest.approx(0.05, rel=1e-2)


def test_paired_design_needs_fewer_items_than_unpaired() -> None:
    # π_D = .2 is far below p1q1 + p2q2 ≈ .45 at accuracies .64/.67 (Connor 1987 §1)
    paired = power_mcnemar(0.03, power=0.8, discordance=0.2, baseline=0.64)
    unpaired = power_two_proportions(0.03, power=0.8, baseline=0.64)
    assert paired.n < unpaired.n / 2


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"effect": 0.03, "n": 100, "power": 0.8},
            r"Exactly one of `effect`, `n`, `power` must be None",
        ),
        ({"effect": None, "n": None, "power": 0.8}, r"Exactly one of .* got 2 None"),
        ({"effect": -0.03, "power": 0.8}, r"`effect` must be > 0 .* got -0.03"),
        ({"effect": 0.0, "power": 0.8}, r"`effect` must be > 0 .* got 0.0"),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.02},
            r"impossible: π_D must be ≥ \|δ\|: `discordance` = 0.02 is below `effect` = 0.03",
        ),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 1.2},
            r"`discordance` must be a number in \(0, 1\), got 1.2",
        ),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.1, "baseline": 0.99},
            r"impossible: `baseline` \+ `effect` = 0.99 \+ 0.03 = 1.02",
        ),
        (
            {
                "effect": 0.03,
                "power": 0.8,
                "discordance": 0.1,
                "baseline": 0.02,
                "alternative": "less",
            },
            r"impossible: `baseline` − `effect` = 0.02 − 0.03 = -0.01",
        ),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.1, "baseline": -0.1},
            r"`baseline` must be a number in \(0, 1\), got -0.1",
        ),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.5, "baseline": 0.1},
            r"impossible: `discordance` = 0.5 with `baseline` = 0.1",
        ),
        (
            {"effect": 0.03, "power": 1.0, "discordance": 0.1},
            r"`power` must be a number in \(0, 1\), got 1.0",
        ),
        (
            {"effect": 0.03, "power": 0.01, "discordance": 0.1},
            r"`power` must exceed the test's size alpha/sides = 0.025, got 0.01",
        ),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.1, "alpha": 0.0},
            r"`alpha` must be a number in \(0, 1\), got 0.0",
        ),
        ({"effect": 0.03, "n": 0, "discordance": 0.1}, r"`n` must be a positive integer, got 0"),
        (
            {"effect": 0.03, "n": 2.5, "discordance": 0.1},
            r"`n` must be a positive integer, got 2.5",
        ),
        ({"effect": 0.03, "power": 0.8}, r"`discordance` \(π_D, .*\) or `correlation` is required"),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.1, "method": "exakt"},
            r"`method` must be one of 'connor', 'exact', 'midp', 'asymptotic', 'asymptotic-cc', "
            r"got 'exakt' \(did you mean 'exact'\?\)\.",
        ),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.1, "alternative": "two.sided"},
            r"`alternative` must be one of 'two-sided', 'greater', 'less', got 'two.sided' "
            r"\(did you mean 'two-sided'\?\)",
        ),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.1, "repeats": 0},
            r"`repeats` must be a positive integer, got 0",
        ),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.1, "icc": 1.5},
            r"`icc` must be a number in \[0, 1\], got 1.5",
        ),
        (
            {"effect": 0.03, "power": 0.8, "discordance": 0.1, "pool_size": -3},
            r"`pool_size` must be a positive integer, got -3",
        ),
        (
            {"effect": 0.03, "power": 0.8, "baseline": 0.6, "correlation": 1.5},
            r"`correlation` must be a number in \[-1, 1\], got 1.5",
        ),
    ],
)
def test_invalid_inputs(kwargs: dict, message: str) -> None:
    kwargs = {"effect": None, "n": None, "power": None, **kwargs}
    with pytest.raises(InputError, match=message):
        power_mcnemar(**kwargs)


def test_unpaired_invalid_inputs() -> None:
    with pytest.raises(InputError, match=r"`effect` must be > 0 \(the size of the accuracy difference; .*\), got -0.1"):
        power_two_proportions(-0.1, power=0.8)
    with pytest.raises(InputError, match=r"impossible: `baseline` ± `effect` = 1.05"):
        power_two_proportions(0.1, power=0.8, baseline=0.95)
    with pytest.raises(InputError, match=r"`method` must be one of 'pooled', 'pooled-cc', 'unpooled', 'arcsine', got 'fleiss'"):
        power_two_proportions(0.1, power=0.8, method="fleiss")


def test_errors_are_value_errors() -> None:
    # InputError subclasses ValueError so generic callers can catch it
    with pytest.raises(ValueError):
        power_mcnemar(-1.0, power=0.8, discordance=0.1)
    assert math.isfinite(power_mcnemar(0.03, 100, None, discordance=0.1).power)


# -------------------------------------------- rejection regions vs robuststats.stats.mcnemar


@pytest.mark.parametrize("method", ["exact", "midp", "asymptotic", "asymptotic-cc"])
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_critical_counts_agree_with_mcnemar_test(method: str, alternative: str) -> None:
    # The power computation must reject exactly where the test the user runs rejects.
    # mcnemar's table is [[both, n_a_only], [n_b_only, neither]] (n_a_only: x right, y
    # wrong); "greater" = acc_x > acc_y, the direction in which power_mcnemar's
    # "greater" claims the first condition is better: the worse condition's count is
    # n_b_only. For "less" it is n_a_only.
    import numpy as np

    from robuststats.stats import mcnemar
    from robuststats.stats.power._exact import critical_counts

    sides = 2 if alternative == "two-sided" else 1
    for n_disc in (*range(1, 31), 45, 73, 100):
        bound = critical_counts(np.array([n_disc]), 0.05, sides, method)[0]
        for a_only in range(n_disc + 1):
            b_only = n_disc - a_only
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = mcnemar([[10, a_only], [b_only, 10]], method=method,
                            alternative=alternative).pvalue
            worse = a_only if alternative == "less" else b_only
            better = b_only if alternative == "less" else a_only
            expected = worse <= bound or (sides == 2 and better <= bound)
            assert (p <= 0.05) == expected, (method, alternative, a_only, b_only, p, bound)


# ------------------------------------------------------------------ property-based checks


@settings(max_examples=60, deadline=None)
@given(
    effect=st.floats(0.01, 0.3),
    extra=st.floats(0.0, 0.5),
    target=st.floats(0.5, 0.95),
    alternative=st.sampled_from(["two-sided", "greater"]),
)
def test_solved_n_is_the_smallest_reaching_the_target(
    effect: float, extra: float, target: float, alternative: str
) -> None:
    # Connor's power is increasing in n, so n must be the first integer reaching it
    discordance = min(effect + extra, 0.99)
    r = power_mcnemar(effect, power=target, discordance=discordance, alternative=alternative,
                      method="connor")
    assert r.achieved_power >= target - 1e-12
    if r.n > 1:
        before = power_mcnemar(
            effect, r.n - 1, None, discordance=discordance, alternative=alternative,
            method="connor"
        )
        assert before.power < target
    # and more discordance never needs fewer items
    if discordance + 0.05 < 1:
        assert (
            power_mcnemar(
                effect, power=target, discordance=discordance + 0.05, alternative=alternative,
                method="connor"
            ).n
            >= r.n
        )
    # the exact test (the default): its n is a crossing of the target, power(n − 1) below it
    e = power_mcnemar(effect, power=target, discordance=discordance, alternative=alternative)
    assert e.method == "exact" and e.achieved_power >= target
    if e.n > 1:
        assert power_mcnemar(effect, e.n - 1, None, discordance=discordance,
                             alternative=alternative).power < target


def test_minimum_detectable_effect_below_the_search_grid() -> None:
    # n = 10⁸ pairs at π_D = .5 detect δ ≈ 2.8·√.5/10⁴ ≈ 0.000198 (Connor), far below
    # the first grid point π_D/400 = 0.00125: the solver must refine, not stop there
    r = power_mcnemar(None, 10**8, 0.8, discordance=0.5)
    expected = (1.959964 + 0.841621) * (0.5**0.5) / 10**4  # δ² ≪ π_D
    assert r.effect == pytest.approx(expected, rel=1e-4)
    assert r.achieved_power == pytest.approx(0.8, abs=1e-9)


def test_minimum_detectable_effect_at_the_edge_of_feasibility() -> None:
    # π_D = .1 with baseline .02: P(A right, B wrong) = (π_D − δ)/2 ≤ .02 needs δ ≥ .06,
    # and with 10⁵ items every feasible δ has power > .8: the answer is that edge
    r = power_mcnemar(None, 100_000, 0.8, discordance=0.1, baseline=0.02)
    assert r.effect == pytest.approx(0.06, rel=1e-9)
    assert r.achieved_power > 0.8


# ---------------------------------------------------------------- sign rule: a − b


def test_sign_rule_is_first_minus_second_everywhere() -> None:
    # mcnemar(x, y).estimate, estimate_discordance(x, y).effect and power_mcnemar's
    # "greater" all read a − b with a = x, the first condition
    import numpy as np

    from robuststats.stats import estimate_discordance, mcnemar

    x = np.repeat([1, 1, 0, 0], [500, 90, 30, 380])  # a right, b wrong: 90; b only: 30
    y = np.repeat([1, 0, 1, 0], [500, 90, 30, 380])
    test = mcnemar(x, y, method="exact", alternative="greater")
    est = estimate_discordance(x, y)
    assert test.estimate == pytest.approx(0.06)
    assert est.effect == pytest.approx(test.estimate)
    assert (est.n_a_only, est.n_b_only) == (90, 30)
    assert est.baseline == est.accuracy_b == pytest.approx(0.53)
    assert est.accuracy_a - est.accuracy_b == pytest.approx(est.effect)
    assert test.pvalue < 1e-6  # "greater": a better, as the data say
    # power_mcnemar's baseline is acc(b): "greater" puts acc(a) = 0.98 + 0.03 above 1 ...
    with pytest.raises(InputError, match=r"`baseline` \+ `effect` = 0.98 \+ 0.03 = 1.01"):
        power_mcnemar(0.03, power=0.8, discordance=0.1, baseline=0.98, alternative="greater")
    # ... while "less" (a worse than b) is possible there
    r = power_mcnemar(0.03, power=0.8, discordance=0.05, baseline=0.98, alternative="less")
    assert r.baseline == 0.98 and r.n == power_mcnemar(0.03, power=0.8, discordance=0.05,
                                                       alternative="greater").n


def test_discordance_margins_are_named_by_condition() -> None:
    # acc(b) = 0.1, acc(a) = 0.13: P(a right, b wrong) = (0.5 + 0.03)/2 = 0.265 > acc(a)
    with pytest.raises(InputError, match=r"needs P\(a correct, b wrong\) = 0.265 ≤ 0.13"):
        power_mcnemar(0.03, power=0.8, discordance=0.5, baseline=0.1)


# ------------------------------------------------------------------ edge inputs


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"effect": 1.0, "power": 0.8, "discordance": 0.2}, r"`effect` must be a number in \(0, 1\), got 1.0"),
        ({"effect": 1.5, "power": 0.8, "discordance": 0.2}, r"`effect` must be a number in \(0, 1\), got 1.5"),
        ({"effect": float("nan"), "power": 0.8, "discordance": 0.2},
         r"`effect` must be a finite number, got nan"),
        ({"effect": "0.03", "power": 0.8, "discordance": 0.2},
         r"`effect` must be a number, got '0.03'"),
        ({"effect": 1e-320, "power": 0.8, "discordance": 0.2},
         r"`effect` = .* is too small to detect: it needs more than 1e\+12 items"),
        ({"effect": 1e-5, "power": 0.8, "discordance": 0.5, "method": "exact"},
         r"needs more than 1e\+07 independent pairs, more than the exact computation handles"),
        ({"effect": 0.03, "n": 10**8, "discordance": 0.2, "method": "midp"},
         r"`n` = 100000000 is worth 1e\+08 independent pairs, more than the exact"),
        ({"effect": 0.03, "power": 0.8, "discordance": 0.2, "pool_size": True},
         r"`pool_size` must be a positive integer, got True"),
        ({"effect": 0.03, "power": 0.8, "discordance": float("inf")},
         r"`discordance` must be a finite number, got inf"),
        ({"effect": 0.03, "power": 0.8, "discordance": 0.2, "alpha": "0.05"},
         r"`alpha` must be a number, got '0.05'"),
        ({"effect": 0.03, "power": 0.8, "discordance": 0.2, "icc": None},
         r"`icc` must be a number, got None"),
        ({"effect": 0.03, "power": 0.8, "baseline": 1.0, "correlation": 0.0},
         r"`baseline` must be a number in \(0, 1\), got 1.0"),
    ],
)
def test_edge_inputs_are_input_errors(kwargs: dict, message: str) -> None:
    kwargs = {"effect": None, "n": None, "power": None, **kwargs}
    with pytest.raises(InputError, match=message):
        power_mcnemar(**kwargs)


def test_extreme_but_legal_inputs_stay_finite() -> None:
    # a tiny alpha or effect is legal: no OverflowError, ZeroDivisionError or NaN
    assert power_mcnemar(0.03, power=0.8, discordance=0.2, alpha=1e-300).n > 1800
    tiny = power_mcnemar(1e-320, 100, None, discordance=0.2)
    assert 0 <= tiny.power <= 0.05  # the exact test's size, both tails
    tiny = power_mcnemar(1e-320, 100, None, discordance=0.2, method="connor")
    assert 0 <= tiny.power <= 0.025 + 1e-12  # Connor counts the near tail only
    assert power_two_proportions(0.03, power=0.8, alpha=1e-300).n > 4360
    with pytest.raises(InputError, match=r"too small to detect"):
        power_two_proportions(1e-320, power=0.8)
    big = power_mcnemar(0.03, 10**15, None, discordance=0.2, repeats=10**6, icc=0.5)
    assert big.power == pytest.approx(1.0)


# ------------------------------------------------------------------ power_table / curve


def test_power_table_is_the_pi_d_sweep() -> None:
    from robuststats.stats import power_table
    from robuststats.stats.power._table import POWER_TABLE_COLUMNS

    table = power_table(0.03, power=0.8, pool_size=1319)
    assert tuple(table.columns) == POWER_TABLE_COLUMNS
    paired = table[table.design == "paired"]
    assert paired.discordance.tolist() == [0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4]
    assert (paired.method == "exact").all()  # the test the analysis runs
    assert paired.n.tolist()[:2] == [263, 463]
    assert paired.loc[paired.discordance == 0.2, "n"].item() == 1800
    connor = power_table(0.03, power=0.8, method="connor", unpaired=False)
    assert connor.n.tolist()[:2] == [260, 434]
    assert connor.loc[connor.discordance == 0.2, "n"].item() == 1742
    for row in paired.itertuples():
        assert row.n == power_mcnemar(0.03, power=0.8, discordance=row.discordance).n
        assert row.exceeds_pool == (row.n > 1319)
    assert "every discordant item favours the better condition" in paired.note.iloc[0]
    unpaired = table[table.design == "unpaired"]
    assert len(unpaired) == 1 and unpaired.n.item() == 4360 and unpaired.method.item() == "pooled"
    assert unpaired.discordance.isna().all()
    # records carry the same values and keys, in the declared order, without pandas
    records = power_table(0.03, power=0.8, pool_size=1319, as_frame=False)
    assert [list(r) for r in records] == [list(POWER_TABLE_COLUMNS)] * len(records)
    assert [r["n"] for r in records] == table.n.tolist()


def test_power_table_power_at_n_and_options() -> None:
    from robuststats.stats import power_table

    table = power_table(0.03, 500, discordances=[0.05, 0.15], method="exact", unpaired=False)
    assert table.solved_for.tolist() == ["power", "power"]
    expected = power_mcnemar(0.03, 500, None, discordance=0.15, method="exact").power
    assert table.power.iloc[1] == pytest.approx(expected)
    assert table.power.iloc[0] > table.power.iloc[1]
    with pytest.raises(InputError, match=r"Exactly one of `n`, `power` must be None"):
        power_table(0.03, 500, 0.8)
    with pytest.raises(InputError, match=r"`effect` must be a number in \(0, 1\), got 1"):
        power_table(1, power=0.8)
    with pytest.raises(InputError, match=r"impossible: π_D must be ≥ \|δ\|"):
        power_table(0.03, power=0.8, discordances=[0.02, 0.1])
    with pytest.raises(InputError, match=r"`discordances` must be a number in \(0, 1\), got 1.2"):
        power_table(0.03, power=0.8, discordances=[1.2])
    # the default grid skips π_D the baseline makes impossible, and says so if none is left
    feasible = power_table(0.03, power=0.8, baseline=0.05, unpaired=False)
    assert feasible.discordance.max() <= 0.13 + 1e-12
    with pytest.raises(InputError, match=r"impossible: `baseline` \+ `effect` = 0.6 \+ 0.5"):
        power_table(0.5, power=0.8, baseline=0.6)


def test_power_curve_is_tidy_and_increasing() -> None:
    from robuststats.stats import power_curve

    curve = power_curve(0.03, discordances=[0.02, 0.1, 0.2], n_values=[100, 500, 1000])
    assert list(curve.columns) == ["discordance", "n", "power"]
    assert sorted(set(curve.discordance)) == [0.1, 0.2]  # π_D < δ is left out
    for _, part in curve.groupby("discordance"):
        assert part.power.is_monotonic_increasing
    with pytest.raises(InputError, match=r"`n_values` must be a positive integer, got 0"):
        power_curve(0.03, discordances=[0.1], n_values=[0])
    with pytest.raises(InputError, match=r"`discordances` must be a number in \(0, 1\), got 1.5"):
        power_curve(0.03, discordances=[0.1, 1.5], n_values=[10])
    with pytest.raises(InputError, match=r"`n_values` and `discordances` must not be empty"):
        power_curve(0.03, discordances=[], n_values=[10])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"effect": 1.0, "power": 0.8}, r"`effect` must be a number in \(0, 1\), got 1.0"),
        ({"effect": 0.03, "n": 500.0}, r"`n` must be a positive integer, got 500.0"),
        ({"effect": 0.03, "power": 0.8, "alpha": "0.05"}, r"`alpha` must be a number, got '0.05'"),
        ({"effect": 0.03, "power": 0.8, "baseline": float("nan")},
         r"`baseline` must be a finite number, got nan"),
        ({"effect": 0.03, "power": 0.8, "alternative": "larger"},
         r"`alternative` must be one of 'two-sided', 'greater', 'less', got 'larger'"),
        ({"effect": 0.03, "power": 0.8, "pool_size": 0}, r"`pool_size` must be a positive integer"),
        ({"effect": None, "n": 10, "power": 0.99, "baseline": 0.999},
         r"no effect up to 0.001 reaches power 0.99"),
    ],
)
def test_unpaired_validation(kwargs: dict, message: str) -> None:
    kwargs = {"effect": None, "n": None, "power": None, **kwargs}
    with pytest.raises(InputError, match=message):
        power_two_proportions(**kwargs)


def test_unpaired_sign_rule() -> None:
    # baseline = acc(b); "greater": acc(a) = acc(b) + δ, "less": acc(a) = acc(b) − δ
    up = power_two_proportions(0.1, power=0.8, baseline=0.3, alternative="greater")
    down = power_two_proportions(0.1, power=0.8, baseline=0.4, alternative="less")
    assert up.baseline == 0.3 and down.baseline == 0.4
    assert up.n == down.n  # the same two accuracies, 0.3 and 0.4, in either role
    centred = power_two_proportions(0.03, power=0.8, alternative="less")
    assert centred.baseline == pytest.approx(0.515)  # a = 0.485 below b
