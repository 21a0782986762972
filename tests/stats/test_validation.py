"""The shared checkers, and a fuzz of every public statistics function: for any argument
(wrong types, strings, bools, NaN, inf, huge ints, empty or oddly shaped arrays) the only
exception that may come out is InputError; anything else must be a valid result."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from robuststats import _validation as iv
from robuststats.errors import InputError, did_you_mean
from robuststats.stats import (
    DegenerateDataWarning,
    adjust_pvalues,
    bootstrap_accuracy,
    bootstrap_difference,
    bootstrap_retention,
    bootstrap_retention_difference,
    cochran_q,
    estimate_discordance,
    estimate_icc,
    evaluate_hypotheses,
    mcnemar,
    mcnemar_stratified,
    power_curve,
    power_mcnemar,
    power_table,
    power_two_proportions,
)
from robuststats.stats._multiplicity import local_levels

# --- the checkers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: iv.check_choice("exakt", "method", ("exact", "midp")),
         r"^`method` must be one of 'exact', 'midp', got 'exakt' \(did you mean 'exact'\?\)\.$"),
        (lambda: iv.check_choice(3, "method", ("exact",)),
         r"^`method` must be one of 'exact', got 3\.$"),
        (lambda: iv.check_choice(["exact"], "method", ("exact",)),
         r"^`method` must be one of 'exact', got \['exact'\]\.$"),
        (lambda: iv.check_number("0.5", "alpha"), r"^`alpha` must be a number, got '0\.5'\.$"),
        (lambda: iv.check_number(True, "alpha"), r"^`alpha` must be a number, got True\.$"),
        (lambda: iv.check_number(10**400, "margin"), r"^`margin` must be a finite number, got 1000"),
        (lambda: iv.check_number(math.nan, "margin"), r"^`margin` must be a finite number, got nan\.$"),
        (lambda: iv.check_number(-1, "scale", low=0), r"^`scale` must be a number ≥ 0, got -1\.$"),
        (lambda: iv.check_number(2, "p", low=0, high=1, high_open=True),
         r"^`p` must be a number in \[0, 1\), got 2\.$"),
        (lambda: iv.check_confidence_level(95), r"^`confidence_level` must be a number in \(0, 1\), got 95\.$"),
        (lambda: iv.check_int(2.0, "n"), r"^`n` must be an integer, got 2\.0\.$"),
        (lambda: iv.check_int(5, "n", low=0, high=3), r"^`n` must be an integer in \[0, 3\], got 5\.$"),
        (lambda: iv.check_n_resamples(0), r"^`n_resamples` must be a positive integer, got 0\.$"),
        (lambda: iv.check_n_resamples(np.bool_(True)), r"^`n_resamples` must be a positive integer, got True\.$"),
        (lambda: iv.check_n_resamples(10**12), r"^`n_resamples` must be at most 100,000,000, got 1000000000000\.$"),
        (lambda: iv.check_rng(-1), r"^`rng` must be a numpy Generator, an int seed or None, got -1 \(an int seed must be ≥ 0\)\.$"),
        (lambda: iv.check_rng(1.5), r"^`rng` must be a numpy Generator, an int seed or None, got 1\.5\.$"),
        (lambda: iv.check_str("", "id"), r"^`id` must be a non-empty string, got ''\.$"),
        (lambda: iv.check_keys({"relaton": 1}, "hypothesis 'H'", ["relation", "id"]),
         r"^hypothesis 'H': unknown key 'relaton' \(did you mean 'relation'\?\); allowed keys: 'relation', 'id'\.$"),
        (lambda: iv.check_keys({"id": 1}, "hypothesis 'H'", ["id", "a"], required=["id", "a"]),
         r"^hypothesis 'H': missing required key\(s\) \['a'\]\.$"),
        (lambda: iv.check_keys([1], "hypothesis", ["id"]), r"^hypothesis must be a mapping, got list\.$"),
        (lambda: iv.as_outcomes([[[1]]], "x"),
         r"^`x` must be 1-D \(n_items,\) or 2-D \(n_seeds, n_items\), got shape \(1, 1, 1\)\.$"),
        (lambda: iv.as_outcomes(["1", "0"], "x"), r"^`x` must be an array of outcomes in \[0, 1\], got \['1', '0'\]\.$"),
        (lambda: iv.as_outcomes([1j], "x"), r"^`x` must be an array of outcomes in \[0, 1\], got \[1j\]\.$"),
        (lambda: iv.as_outcomes([[1, 0], [1]], "x"), r"^`x` must be an array of outcomes in \[0, 1\]"),
        (lambda: iv.as_outcomes([10**400], "x"), r"^`x` must be an array of outcomes in \[0, 1\]"),
        (lambda: iv.as_outcomes([], "x"), r"^`x` must not be empty, got shape \(0,\)\.$"),
        (lambda: iv.as_outcomes([0, np.inf], "x"), r"^`x` must not contain NaN or infinite values, got inf\.$"),
        (lambda: iv.as_outcomes([0, 0.5], "x", binary=True), r"^`x` must contain only 0/1 outcomes, got 0\.5\.$"),
        (lambda: iv.as_probabilities([0.1, -0.2], "pvalues"), r"^`pvalues` must contain values in \[0, 1\], got -0\.2\.$"),
    ],
)
def test_checker_messages(call, match):
    with pytest.raises(InputError, match=match):
        call()


def test_checkers_return_canonical_values():
    assert iv.check_number(np.float32(0.5), "x") == 0.5
    assert type(iv.check_int(np.int64(3), "n")) is int
    assert isinstance(iv.check_rng(np.int64(3)), np.random.Generator)
    assert iv.as_outcomes([True, False], "x").tolist() == [1.0, 0.0]
    assert iv.as_probabilities([], "p").shape == (0,)
    assert did_you_mean("holmm", ("holm", "fdr_bh")) == " (did you mean 'holm'?)"
    assert did_you_mean(3, ("holm",)) == ""


def test_checkers_live_in_one_module():
    from robuststats.stats import _common

    for name in ("check_choice", "check_confidence_level", "check_n_resamples", "check_rng",
                 "as_outcomes"):
        assert not hasattr(_common, name)  # every module imports robuststats._validation


# --- fuzz ------------------------------------------------------------------------------------

_huge = st.sampled_from([2**63, -(2**63) - 1, 10**30, 10**400, -(10**400)])
garbage = st.one_of(
    st.none(), st.booleans(), st.integers(), _huge, st.floats(), st.complex_numbers(),
    st.text(max_size=6), st.binary(max_size=4),
    st.lists(st.floats(), max_size=4),
    st.lists(st.one_of(st.integers(), st.booleans(), st.text(max_size=2)), max_size=4),
    st.lists(st.lists(st.integers(-1, 2), max_size=3), max_size=3),
    arrays(st.sampled_from([np.float64, np.float32, np.int64, np.uint8, np.bool_]),
           array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from([object(), pd.DataFrame(), np.array(["a", "b"]),
                     np.array([1, "a"], dtype=object), {1, 2}, (0.5,), np.random.default_rng(0)]),
)
# outcome-like arrays that reach the computations: 0/1 (sometimes 0.5), small shapes
outcomes = arrays(np.float64, array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=6),
                  elements=st.sampled_from([0.0, 1.0, 1.0, 0.5]))
binary = arrays(np.int64, st.tuples(st.integers(1, 3), st.integers(1, 8)),
                elements=st.integers(0, 1))
counts = st.one_of(st.integers(0, 50), st.integers(0, 2**60))
tables = st.lists(st.lists(counts, min_size=2, max_size=2), min_size=2, max_size=2)
levels = st.one_of(st.floats(0.01, 0.999), st.floats(0, 1, exclude_min=True, exclude_max=True),
                   st.sampled_from([1e-300, 1 - 1e-16, 0.5]), garbage)
resamples = st.one_of(st.integers(-3, 40), garbage.filter(
    lambda v: not (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 40 < v <= 10**8)))
rngs = st.one_of(st.integers(0, 2**70), st.none(), garbage)


def _arg(valid: st.SearchStrategy) -> st.SearchStrategy:
    # mostly valid, so that a bad value in one argument meets valid values in the others
    return st.one_of(valid, valid, garbage)


def _check_result(res) -> None:
    for name in ("pvalue", "pvalue_adjusted"):
        value = getattr(res, name, None)
        if value is not None:
            assert 0.0 <= value <= 1.0, (name, value)
    if hasattr(res, "statistic") and isinstance(res.statistic, float):
        assert not math.isnan(res.statistic)
    ci = getattr(res, "confidence_interval", None)
    if ci is not None and not math.isnan(getattr(res, "estimate", 0.0)):
        assert not (math.isnan(ci.low) or math.isnan(ci.high))
        assert ci.low <= ci.high
    if hasattr(res, "to_frame"):
        res.to_frame()


def _only_input_errors(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        try:
            res = func(*args, **kwargs)
        except InputError:
            return None
    _check_result(res)
    return res


_FUZZ = settings(max_examples=200, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@_FUZZ
@given(st.one_of(tables, binary, garbage), st.one_of(st.none(), binary, garbage),
       _arg(st.sampled_from(["exact", "midp", "asymptotic", "asymptotic-cc"])),
       _arg(st.sampled_from(["two-sided", "greater", "less"])), levels,
       _arg(st.sampled_from(["newcombe", "tango", "wald"])))
def test_fuzz_mcnemar(x, y, method, alternative, level, ci_method):
    _only_input_errors(mcnemar, x, y, method=method, alternative=alternative,
                       confidence_level=level, ci_method=ci_method)


@_FUZZ
@given(_arg(binary), _arg(binary), _arg(st.sampled_from(["mantel-haenszel", "clustered"])),
       levels)
def test_fuzz_mcnemar_stratified(x, y, method, level):
    _only_input_errors(mcnemar_stratified, x, y, method=method, confidence_level=level)


_boot_methods = _arg(st.sampled_from(["bca", "percentile", "log-ratio", "studentized"]))


@_FUZZ
@given(st.sampled_from(["accuracy", "difference", "retention", "retention_difference"]),
       st.lists(_arg(outcomes), min_size=4, max_size=4), levels, resamples, _boot_methods,
       rngs)
def test_fuzz_bootstrap(which, xs, level, n_resamples, method, rng):
    funcs = {"accuracy": (bootstrap_accuracy, 1), "difference": (bootstrap_difference, 2),
             "retention": (bootstrap_retention, 2),
             "retention_difference": (bootstrap_retention_difference, 4)}
    func, n_args = funcs[which]
    _only_input_errors(func, *xs[:n_args], confidence_level=level, n_resamples=n_resamples,
                       method=method, rng=rng)


@_FUZZ
@given(_arg(st.lists(st.floats(0, 1), max_size=6)),
       _arg(st.sampled_from(["holm", "fdr_bh", "bonferroni", "fdr_tsbh", "none"])), levels)
def test_fuzz_adjust_pvalues(pvalues, method, alpha):
    with warnings.catch_warnings():
        try:
            adjusted = adjust_pvalues(pvalues, method=method, alpha=alpha)
        except InputError:
            return
    assert adjusted.shape == np.shape(pvalues)
    assert np.all((adjusted >= 0) & (adjusted <= 1))
    with warnings.catch_warnings():
        try:
            t = local_levels(pvalues, adjusted, alpha=alpha)
        except InputError:
            return
    assert np.all((t >= 0) & (t <= alpha))


@_FUZZ
@given(st.one_of(arrays(np.int64, st.tuples(st.integers(1, 4), st.integers(1, 12)),
                        elements=st.integers(0, 1)),
                 arrays(np.int64, st.tuples(st.integers(1, 4), st.integers(1, 3),
                                            st.integers(1, 6)), elements=st.integers(0, 1)),
                 garbage),
       _arg(st.booleans()))
def test_fuzz_cochran_q(x, clustered):
    _only_input_errors(cochran_q, x, clustered=clustered)


def _small_outcomes() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [dict(condition=c, seed=s, eval_noise=lv, noise_seed=0, item_id=f"i{i}",
                 correct=int(rng.random() < 0.7))
            for c in ("A", "B") for s in (0, 1) for lv in (0.0, 0.05) for i in range(12)]
    return pd.DataFrame(rows)


_OUTCOMES = _small_outcomes()
_hypothesis = st.fixed_dictionaries(
    {"id": _arg(st.sampled_from(["H1", "H2"])),
     "metric": _arg(st.sampled_from(["accuracy", "retention"])),
     "a": _arg(st.just("A")), "b": _arg(st.just("B")),
     "eval_noise": _arg(st.sampled_from([0.0, 0.05])),
     "relation": _arg(st.sampled_from(["greater", "less", "equivalent"]))},
    optional={"margin": _arg(st.floats(0.001, 0.2)), "statement": _arg(st.just("s")),
              "extra": st.integers()},
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(_hypothesis, max_size=2), garbage),
       st.one_of(st.just(_OUTCOMES), st.just(_OUTCOMES), garbage), levels,
       st.one_of(st.integers(1, 30), garbage.filter(
           lambda v: not (isinstance(v, int) and not isinstance(v, bool) and 30 < v <= 10**8))),
       _arg(st.sampled_from(["holm", "fdr_bh", "none"])), _arg(st.just(0.0)))
def test_fuzz_evaluate_hypotheses(hypotheses, outcomes, level, n_resamples, multiplicity,
                                  clean_noise):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        try:
            table = evaluate_hypotheses(hypotheses, outcomes, confidence_level=level,
                                        n_resamples=n_resamples, rng=0,
                                        multiplicity=multiplicity, clean_noise=clean_noise)
        except InputError:
            return
    assert table["pvalue"].between(0, 1).all()
    assert table["pvalue_adjusted"].between(0, 1).all()


# --- the power functions -----------------------------------------------------------------

_prob = st.one_of(st.floats(0, 1), garbage)


@_FUZZ
@given(st.one_of(st.none(), _prob), st.one_of(st.none(), st.integers(1, 500), garbage),
       st.one_of(st.none(), _prob), _prob, _prob, _prob)
def test_fuzz_power(effect, n, power, baseline, discordance, alpha):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in (
            lambda: power_mcnemar(effect=effect, n=n, power=power, baseline=baseline,
                                  discordance=discordance, alpha=alpha),
            lambda: power_two_proportions(effect=effect, n=n, power=power, baseline=baseline,
                                          alpha=alpha),
            lambda: power_table(effect, discordances=[discordance], baseline=baseline,
                                alpha=alpha),
        ):
            try:
                call()
            except InputError:
                pass


@_FUZZ
@given(st.one_of(garbage, st.lists(st.integers(0, 1), min_size=1, max_size=6)),
       st.one_of(garbage, st.lists(st.integers(0, 1), min_size=1, max_size=6)))
def test_fuzz_estimate_discordance(x, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            estimate_discordance(x, y)
        except InputError:
            pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_prob, st.one_of(st.lists(st.floats(0, 1), max_size=3), garbage),
       st.one_of(st.lists(st.integers(1, 3000), max_size=3), garbage))
def test_fuzz_power_curve_and_icc(effect, discordances, n_values):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in (lambda: power_curve(effect, discordances=discordances, n_values=n_values),
                     lambda: estimate_icc(discordances, n_values)):
            try:
                call()
            except InputError:
                pass
