"""fit_dose_response, select_dose_response, effective doses and critical thresholds.

Reference values are drc's printed outputs in its own documentation (drc 3.x, the pkgdown
reference pages of github.com/DoseResponse/drc: ``ED.drc``, ``vcov.drc``, ``logLik.drc``,
``LL.3``, ``mselect``, ``W4``), and base R (``optim``/``optimHess``) where drc is not at
hand; each R call is pasted beside its values.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from robuststats.errors import InputError
from robuststats.stats import (
    DOSE_RESPONSE_MODELS,
    DegenerateDataWarning,
    critical_threshold,
    fit_dose_response,
    select_dose_response,
)

# drc's `ryegrass`: root length of perennial ryegrass vs ferulic acid (mM), Inderjit,
# Streibig & Olofsdotter (2002), Physiologia Plantarum 114:422-428 (published data; the
# values as printed to 8 significant digits)
RYE_CONC = np.repeat([0, 0.94, 1.88, 3.75, 7.5, 15, 30], [6, 3, 3, 3, 3, 3, 3])
RYE_ROOTL = np.array([7.58, 8.0, 8.3285714, 7.25, 7.375, 7.9625, 8.3555556, 6.9142857, 7.75,
                      6.8714286, 6.45, 5.9222222, 1.925, 2.8857143, 4.2333333, 1.1875,
                      0.8571429, 1.0571429, 0.6875, 0.525, 0.825, 0.25, 0.22, 0.44])

# drc's example from the BMDS software of the US EPA (Ritz 2009, Figure 3; drc's W4 page):
# bmds.ex1 <- data.frame(dose = c(0, 2.83, 5.67), num = c(6, 10, 19), total = c(50, 49, 50))
BMDS_DOSE = np.array([0, 2.83, 5.67])
BMDS_NUM = np.array([6, 10, 19])
BMDS_TOTAL = np.array([50, 49, 50])


@pytest.fixture(scope="module")
def rye_ll4():
    return fit_dose_response(RYE_CONC, RYE_ROOTL, model="LL.4")


def test_ryegrass_ll4_matches_drc_summary(rye_ll4):
    # drm(rootl ~ conc, data = ryegrass, fct = LL.4()); summary():
    # b 2.98222 (0.46506), c 0.48141 (0.21219), d 7.79296 (0.18857), e 3.05795 (0.18573)
    fit = rye_ll4
    want = {"b": (2.98222, 0.46506), "c": (0.48141, 0.21219), "d": (7.79296, 0.18857),
            "e": (3.05795, 0.18573)}
    # (printed to 5-6 digits, and the data above carry 8 significant digits: 2e-5)
    for name, (est, se) in want.items():
        assert fit.parameters[name] == pytest.approx(est, rel=2e-5)
        assert fit.standard_errors[name] == pytest.approx(se, rel=2e-5)
    # logLik(ryegrass.m1): 'log Lik.' -16.15514 (df=5)
    assert fit.loglik == pytest.approx(-16.15514, abs=6e-6)
    assert fit.df == 5
    assert fit.aic == pytest.approx(42.31029, abs=6e-6)
    assert fit.residual_variance == pytest.approx(0.2700107, abs=6e-8)
    assert fit.df_residual == 20 and fit.converged
    assert fit.control_response == pytest.approx(fit.parameters["d"])


def test_ryegrass_vcov_matches_drc(rye_ll4):
    # vcov(ryegrass.m1)
    want = np.array([[0.216282967, 0.04601511, -0.03504683, -0.003763692],
                     [0.046015113, 0.04502563, -0.00471192, -0.016918440],
                     [-0.035046835, -0.00471192, 0.03555759, -0.012868772],
                     [-0.003763692, -0.01691844, -0.01286877, 0.034496126]])
    np.testing.assert_allclose(rye_ll4.vcov, want, rtol=5e-5, atol=2e-8)


def test_ryegrass_effective_doses_match_drc(rye_ll4):
    # ED(ryegrass.m1, c(10, 50, 90), interval = "delta")
    #        Estimate Std. Error   Lower   Upper
    # e:1:10  1.46371    0.18677 1.07411 1.85330
    # e:1:50  3.05795    0.18573 2.67053 3.44538
    # e:1:90  6.38864    0.84510 4.62580 8.15148
    want = {10: (1.46371, 0.18677, 1.07411, 1.85330), 50: (3.05795, 0.18573, 2.67053, 3.44538),
            90: (6.38864, 0.84510, 4.62580, 8.15148)}
    for p, (est, se, low, high) in want.items():
        ed = rye_ll4.effective_dose(p)
        assert ed.estimate == pytest.approx(est, rel=2e-5)
        assert ed.standard_error == pytest.approx(se, rel=2e-5)
        assert ed.confidence_interval.low == pytest.approx(low, rel=1e-5)
        assert ed.confidence_interval.high == pytest.approx(high, rel=1e-5)
        assert ed.method == "delta (t)"


def test_absolute_effective_dose_inverts_the_curve(rye_ll4):
    ed = rye_ll4.effective_dose(4.0, type="absolute")
    assert rye_ll4.predict(ed.estimate) == pytest.approx(4.0, rel=1e-10)
    # the relative ED50 is the dose of the response halfway between c and d
    mid = (rye_ll4.parameters["c"] + rye_ll4.parameters["d"]) / 2
    assert rye_ll4.effective_dose(mid, type="absolute").estimate == pytest.approx(
        rye_ll4.effective_dose(50).estimate, rel=1e-9)


def test_ryegrass_ll3_matches_drc():
    # drm(rootl ~ conc, data = ryegrass, fct = LL.3()); summary():
    # b 2.47033 (0.34168), d 7.85543 (0.20438), e 3.26336 (0.19641); RSE 0.5615802 (21 df)
    fit = fit_dose_response(RYE_CONC, RYE_ROOTL, model="LL.3")
    for name, (est, se) in {"b": (2.47033, 0.34168), "d": (7.85543, 0.20438),
                            "e": (3.26336, 0.19641)}.items():
        assert fit.parameters[name] == pytest.approx(est, abs=6e-6)
        assert fit.standard_errors[name] == pytest.approx(se, abs=6e-6)
    assert fit.parameters["c"] == 0.0 and fit.standard_errors["c"] == 0.0
    assert fit.fixed == ("c",)
    assert math.sqrt(fit.residual_variance) == pytest.approx(0.5615802, abs=6e-8)


def test_mselect_matches_drc():
    # mselect(ryegrass.m1, list(LL.3(), LL.5(), W1.3(), W1.4(), W2.4(), baro5()))
    #          logLik       IC Lack of fit   Res var
    # W2.4  -15.91352 41.82703           0 0.2646283
    # LL.4  -16.15514 42.31029           0 0.2700107
    # LL.5  -15.87828 43.75656           0 0.2777393
    # W1.4  -17.46720 44.93439           0 0.3012075
    # LL.3  -18.60413 45.20827           0 0.3153724
    # W1.3  -22.22047 52.44094           0 0.4262881
    table = select_dose_response(RYE_CONC, RYE_ROOTL,
                                 models=["LL.4", "LL.3", "LL.5", "W1.3", "W1.4", "W2.4"])
    assert list(table["model"]) == ["W2.4", "LL.4", "LL.5", "W1.4", "LL.3", "W1.3"]
    np.testing.assert_allclose(table["loglik"], [-15.91352, -16.15514, -15.87828, -17.46720,
                                                 -18.60413, -22.22047], atol=6e-6)
    np.testing.assert_allclose(table["aic"], [41.82703, 42.31029, 43.75656, 44.93439,
                                              45.20827, 52.44094], atol=6e-6)
    np.testing.assert_allclose(table["residual_variance"],
                               [0.2646283, 0.2700107, 0.2777393, 0.3012075, 0.3153724,
                                0.4262881], atol=6e-8)


def test_binomial_weibull_with_fixed_parameters_matches_drc():
    # drm(num/total ~ dose, weights = total, data = bmds.ex1,
    #     fct = W2.4(fixed = c(1, NA, 1, NA)), type = "binomial"); summary():
    # c 0.111475 (0.041719), e 17.860515 (5.919727); logLik -6.179627 (df=2);
    # ED(bmds.ex1.m1, 10, ci = "delta"): 1.88179 (0.62371)
    fit = fit_dose_response(BMDS_DOSE, BMDS_NUM / BMDS_TOTAL, weights=BMDS_TOTAL,
                            type="binomial", model="W2.4", fixed={"b": 1, "d": 1})
    assert fit.free == ("c", "e") and fit.df == 2
    assert fit.loglik == pytest.approx(-6.179627, abs=6e-7)
    # drc's optimiser stops ~1e-4 short of the optimum on this flat likelihood, so its
    # digits agree to that; a tight optimum in base R agrees to 1e-5:
    # nll <- function(th) -sum(dbinom(num, total, th[1] + (1 - th[1]) *
    #            (1 - exp(-exp(log(dose) - log(th[2])))), log = TRUE))
    # optim(c(0.1, 15), nll, method = "BFGS", hessian = TRUE,
    #       control = list(reltol = 1e-15, maxit = 1000))
    # par 0.1114916622 17.8637089568; se 0.04172472314 5.92262158029; value 6.179626622
    assert fit.parameters["c"] == pytest.approx(0.111475, rel=6e-4)
    assert fit.parameters["e"] == pytest.approx(17.860515, rel=6e-4)
    assert fit.standard_errors["c"] == pytest.approx(0.041719, rel=6e-4)
    assert fit.standard_errors["e"] == pytest.approx(5.919727, rel=6e-4)
    assert fit.parameters["c"] == pytest.approx(0.1114916622, rel=5e-5)
    assert fit.parameters["e"] == pytest.approx(17.8637089568, rel=5e-5)
    assert fit.standard_errors["c"] == pytest.approx(0.04172472314, rel=1e-4)
    assert fit.standard_errors["e"] == pytest.approx(5.92262158029, rel=1e-4)
    ed = fit.effective_dose(10)
    assert ed.estimate == pytest.approx(1.88179, rel=6e-4)
    assert ed.standard_error == pytest.approx(0.62371, rel=6e-4)
    assert ed.method == "delta (normal)"


def test_binomial_weibull1_matches_drc():
    # drm(num/total ~ dose, weights = total, data = bmds.ex1,
    #     fct = W1.4(fixed = c(-1, NA, 1, NA)), type = "binomial"); summary():
    # c 0.121468 (0.044268), e 6.850273 (1.540986); ED(bmds.ex1.m2, 50): 9.8829 (2.2232)
    fit = fit_dose_response(BMDS_DOSE, BMDS_NUM / BMDS_TOTAL, weights=BMDS_TOTAL,
                            type="binomial", model="W1.4", fixed={"b": -1, "d": 1})
    assert fit.parameters["c"] == pytest.approx(0.121468, rel=3e-5)
    assert fit.parameters["e"] == pytest.approx(6.850273, rel=3e-5)
    assert fit.standard_errors["c"] == pytest.approx(0.044268, rel=3e-5)
    assert fit.standard_errors["e"] == pytest.approx(1.540986, rel=3e-5)
    ed = fit.effective_dose(50)  # drc's e is 7e-6 (relative) off the optimum: ED too
    assert ed.estimate == pytest.approx(9.8829, rel=2e-5)
    assert ed.standard_error == pytest.approx(2.2232, abs=6e-5)


# an accuracy sweep: correct answers out of 300 at each noise scale
SWEEP_DOSE = np.array([0, 0.001, 0.003, 0.01, 0.03, 0.1])
SWEEP_CORRECT = np.array([230, 228, 221, 190, 120, 70])


def test_binomial_ll4_matches_r_optim():
    # dose <- c(0, 0.001, 0.003, 0.01, 0.03, 0.1); correct <- c(230, 228, 221, 190, 120, 70)
    # total <- rep(300, 6)
    # f <- function(th, x) th[2] + (th[3] - th[2]) / (1 + exp(th[1] * (log(x) - log(th[4]))))
    # nll <- function(th) -sum(dbinom(correct, total, f(th, dose), log = TRUE))
    # fit <- optim(c(1, 0.2, 0.77, 0.02), nll, method = "BFGS", hessian = TRUE,
    #   control = list(reltol = 1e-15, maxit = 5000, parscale = c(1, 0.1, 0.1, 0.01)))
    # fit$par: 1.57569221612 0.18591665709 0.76468668486 0.02149535377; -fit$value -17.81065502
    # standard errors from optimHess(fit$par, nll, gr, control = list(ndeps = 1e-6 *
    #   abs(fit$par))) with the analytic score gr: 0.401177329285 0.054390379740
    #   0.017661158333 0.004125982929
    fit = fit_dose_response(SWEEP_DOSE, SWEEP_CORRECT / 300, weights=np.full(6, 300),
                            type="binomial")
    got = [fit.parameters[k] for k in "bcde"]
    np.testing.assert_allclose(got, [1.57569221612, 0.18591665709, 0.76468668486,
                                     0.02149535377], rtol=2e-6)
    assert fit.loglik == pytest.approx(-17.81065502, abs=1e-7)
    np.testing.assert_allclose([fit.standard_errors[k] for k in "bcde"],
                               [0.401177329285, 0.054390379740, 0.017661158333,
                                0.004125982929], rtol=1e-5)


def test_threshold_is_a_drop_of_clean_accuracy_not_drc_ed10():
    fit = fit_dose_response(SWEEP_DOSE, SWEEP_CORRECT / 300, weights=np.full(6, 300),
                            type="binomial")
    th = fit.critical_threshold(0.10)
    d, c = fit.parameters["d"], fit.parameters["c"]
    assert fit.predict(th.estimate) == pytest.approx(0.9 * d, rel=1e-10)
    ed10 = fit.effective_dose(10)
    assert fit.predict(ed10.estimate) == pytest.approx(d - 0.1 * (d - c), rel=1e-10)
    assert th.estimate > ed10.estimate  # c > 0: 10 % of d − c comes sooner than 10 % of d
    # with the floor fixed at 0 (LL.3) the two coincide
    fit3 = fit_dose_response(SWEEP_DOSE, SWEEP_CORRECT / 300, weights=np.full(6, 300),
                             type="binomial", model="LL.3")
    assert fit3.critical_threshold(0.1).estimate == pytest.approx(
        fit3.effective_dose(10).estimate, rel=1e-12)


def test_chance_floor_as_fixed_lower_limit():
    fit = fit_dose_response(SWEEP_DOSE, SWEEP_CORRECT / 300, weights=np.full(6, 300),
                            type="binomial", model="LL.3", fixed={"c": 0.25})
    assert fit.parameters["c"] == 0.25 and fit.free == ("b", "d", "e")
    assert fit.predict(1e6) == pytest.approx(0.25, abs=1e-6)


def test_unreached_threshold_is_infinite_with_a_warning():
    # accuracy levels off at 95 % of clean: a 10 % drop is never reached
    y = np.array([0.80, 0.80, 0.79, 0.77, 0.765, 0.762, 0.761])
    x = np.array([0, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3])
    fit = fit_dose_response(x, y, weights=np.full(7, 1000), type="binomial")
    with pytest.warns(DegenerateDataWarning, match="never reaches"):
        th = fit.critical_threshold(0.10)
    assert th.estimate == math.inf and math.isnan(th.confidence_interval.low)


def test_predict_interval_table(rye_ll4):
    table = rye_ll4.predict([0.0, 3.0, 30.0], interval="confidence")
    assert list(table.columns) == ["dose", "estimate", "standard_error", "ci_low", "ci_high"]
    # at dose 0 the response is d, with d's standard error
    assert table["estimate"][0] == pytest.approx(rye_ll4.parameters["d"])
    assert table["standard_error"][0] == pytest.approx(rye_ll4.standard_errors["d"], rel=1e-6)
    assert (table["ci_low"] < table["estimate"]).all()


@pytest.mark.parametrize("model", DOSE_RESPONSE_MODELS)
def test_every_model_recovers_its_own_curve(model):
    from robuststats.stats.dose._models import MODELS

    curve = MODELS[model]
    true = {"b": 1.5, "c": 0.1, "d": 0.8, "e": 0.02, "f": 1.0}
    if curve.family == "W2":
        true["b"] = -1.5  # decreasing
    if model == "LL.5":
        true["f"] = 2.0
    true.update(curve.fixed)
    x = np.repeat([0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.3], 3)
    y = curve.response(x, true)
    with warnings.catch_warnings():  # RSS ≈ 0: σ² ≈ 0, the information is singular
        warnings.simplefilter("ignore", DegenerateDataWarning)
        exact = fit_dose_response(x, y, model=model)
    for name in exact.free:  # exact data: the curve itself
        assert exact.parameters[name] == pytest.approx(true[name], rel=1e-5, abs=1e-7), name
    noisy = y + np.random.default_rng(0).normal(0, 0.005, y.size)
    fit = fit_dose_response(x, noisy, model=model)
    for name in fit.free:  # noisy data: within 4 standard errors, finite errors
        err = fit.standard_errors[name]
        assert 0 < err < math.inf
        assert abs(fit.parameters[name] - true[name]) < 4 * err, name


def test_critical_threshold_bootstrap_and_delta():
    rng = np.random.default_rng(3)
    dose = np.array([0, 3e-3, 1e-2, 3e-2, 0.1])
    p = np.array([0.8, 0.78, 0.7, 0.45, 0.2])
    seed_skill = rng.normal(0, 0.2, 3)
    item = rng.normal(0, 1.0, 200)
    logit = np.log(p / (1 - p))[:, None, None] + seed_skill[None, :, None] + item
    outcomes = (rng.random((5, 3, 200)) < 1 / (1 + np.exp(-logit))).astype(float)
    boot = critical_threshold(dose, outcomes, interval="bootstrap", n_resamples=200, rng=1)
    again = critical_threshold(dose, outcomes, interval="bootstrap", n_resamples=200, rng=1)
    assert boot.estimate == again.estimate
    assert boot.confidence_interval == again.confidence_interval
    assert boot.confidence_interval.low < boot.estimate < boot.confidence_interval.high
    assert boot.method == "bootstrap percentile (seeds x items)"
    assert boot.n_seeds == 3 and boot.n_items == 200 and boot.n_failed == 0
    assert boot.fit.predict(boot.estimate) == pytest.approx(0.9 * boot.clean_accuracy)
    delta = critical_threshold(dose, outcomes, interval="delta")
    assert delta.estimate == boot.estimate and delta.n_resamples == 0
    assert "items independent" in delta.method
    frame = boot.to_frame()
    assert list(frame.columns[:6]) == ["drop", "estimate", "ci_low", "ci_high", "ci_level",
                                       "ci_method"]
    one_seed = critical_threshold(dose, outcomes[:, 0, :], interval="bootstrap",
                                  n_resamples=50, rng=0)
    assert one_seed.method == "bootstrap percentile (items)"
    # the default: seed-random t on the log scale, the same point estimate
    seed_random = critical_threshold(dose, outcomes)
    assert seed_random.estimate == boot.estimate
    assert seed_random.method == "seed-random t (log scale, seeds x items)"
    lo, hi = seed_random.confidence_interval
    assert lo < seed_random.estimate < hi
    assert math.log(seed_random.estimate) == pytest.approx(math.log(lo * hi) / 2)
    # wider than the binomial delta, which ignores that items and seeds recur at every dose
    assert hi / lo > delta.confidence_interval.high / delta.confidence_interval.low


def test_auto_picks_the_curve_by_aic_and_fixes_a_wrong_shape():
    # accuracy of a population that falls like W1.4 (Weibull type 1), read at 7 scales;
    # LL.4 misplaces the 10 % threshold, the AIC choice recovers it
    dose = np.array([0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08])
    b, c, d, e = 2.0, 0.0, 0.75, 0.025
    acc = c + (d - c) * np.exp(-np.exp(b * (np.log(np.maximum(dose, 1e-300)) - np.log(e))))
    acc[0] = d
    truth = e * (-np.log(0.9)) ** (1 / b)  # W1.4 at 90 % of d (c = 0)
    outcomes = np.repeat(acc[:, None, None], 4, axis=1) * np.ones((1, 4, 2000))
    auto = critical_threshold(dose, outcomes, interval="delta")
    assert auto.model == "W1.4"
    assert auto.estimate == pytest.approx(truth, rel=1e-3)
    ll4 = critical_threshold(dose, outcomes, interval="delta", model="LL.4")
    assert ll4.model == "LL.4" and abs(ll4.estimate / truth - 1) > 0.05


@pytest.mark.parametrize("kwargs, match", [
    (dict(model="LL4"), r"`model` must be one of .*did you mean 'LL.4'"),
    (dict(type="binomal"), r"`type` must be one of .*did you mean 'binomial'"),
    (dict(fixed={"g": 1}), r"`fixed` must be one of 'b', 'c', 'd', 'e'"),
    (dict(fixed={"e": -1}), r"`fixed\['e'\]` must be a number > 0"),
    (dict(fixed={"b": 1, "c": 0, "d": 1, "e": 1}), r"fixes every parameter"),
    (dict(weights=[1, 1]), r"`weights` must have the shape of `dose`"),
    (dict(weights=np.zeros(6)), r"`weights` must be positive"),
    (dict(start={"q": 1}), r"`start` must be one of"),
])
def test_bad_fit_arguments(kwargs, match):
    with pytest.raises(InputError, match=match):
        fit_dose_response(SWEEP_DOSE, SWEEP_CORRECT / 300, **kwargs)


def test_bad_data():
    with pytest.raises(InputError, match=r"`response` must have the shape of `dose`"):
        fit_dose_response([0, 1, 2], [1, 2])
    with pytest.raises(InputError, match=r"`dose` must"):
        fit_dose_response([-1, 1, 2, 3, 4], [1, 2, 3, 4, 5])
    with pytest.raises(InputError, match=r"two distinct positive doses"):
        fit_dose_response([0, 0, 1, 1, 1], [1, 1, 0.5, 0.4, 0.6])
    with pytest.raises(InputError, match=r"proportions in \[0, 1\]"):
        fit_dose_response(SWEEP_DOSE, SWEEP_CORRECT, type="binomial")
    with pytest.raises(InputError, match=r"needs at least 5 observations"):
        fit_dose_response([0, 1, 2, 3], [1, 0.9, 0.5, 0.2])
    with pytest.raises(InputError, match=r"`p` must be a number in \(0, 100\)"):
        fit_dose_response(RYE_CONC, RYE_ROOTL).effective_dose(0.0)
    with pytest.raises(InputError, match=r"`drop` must be a number in \(0, 1\)"):
        fit_dose_response(RYE_CONC, RYE_ROOTL).critical_threshold(10)
    with pytest.raises(InputError, match=r"`outcomes` must have one row per dose"):
        critical_threshold([0, 1, 2], np.ones((2, 10)))
    with pytest.raises(InputError, match=r"`interval` must be one of 'seed-random', 'bootstrap', 'delta'"):
        critical_threshold([0, 1, 2], np.ones((3, 10)), interval="fieller")
    with pytest.raises(InputError, match=r"`models` must be a non-empty list"):
        select_dose_response(RYE_CONC, RYE_ROOTL, models="LL.4")
