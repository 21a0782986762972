"""From an outcomes table to the :class:`Evidence` that decides one hypothesis."""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from robuststats.errors import InputError
from robuststats.outcomes import align, align_by_condition, align_series, seed_pairing
from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning
from robuststats.stats._estimability import retention_estimability
from robuststats.stats._evidence import (
    Evidence,
    bootstrap_evidence,
    normal_evidence,
    tango_evidence,
)
from robuststats.stats._mcnemar import paired_table
from robuststats.stats._mcnemar_stratified import mcnemar_stratified
from robuststats.stats._seed_random import (
    independent_seeds_retention_test,
    independent_seeds_test,
    seed_random_evidence,
    seed_random_retention_test,
    seed_random_test,
)
from robuststats.stats.resampling import degenerate_interval, fit_bootstrap

if TYPE_CHECKING:
    from robuststats.stats._hypotheses import Hypothesis

__all__ = ["gather_evidence"]


def _is_binary(arr: np.ndarray) -> bool:
    return bool(np.all((arr == 0) | (arr == 1)))


def _bootstrap(statistic: str, matrices: list[np.ndarray], *, n_resamples: int,
               rng: np.random.Generator, level: float, label: str) -> Evidence:
    k, n = matrices[0].shape
    fit, scheme = fit_bootstrap(statistic, matrices, method="bca", n_resamples=n_resamples,
                                rng=rng)
    detail = f"{label}; {k} seed(s) x {n} items; {scheme} bootstrap, {fit.boot.size} resamples"
    if fit.boot.size < 2 or np.ptp(fit.boot) == 0.0:
        warnings.warn(
            f"{label}: the bootstrap distribution has no spread (identical outcomes); "
            "using a score-type interval for no discordant pairs.",
            DegenerateDataWarning,
            stacklevel=4,
        )
        ci = degenerate_interval(statistic, matrices, fit.estimate, level)
        half = max(ci.high - fit.estimate, fit.estimate - ci.low)
        return normal_evidence(fit.estimate, half, level,
                               "score-type interval (degenerate data)", detail)
    return bootstrap_evidence(fit, "BCa bootstrap interval", detail)


def _accuracy_evidence(h: Hypothesis, outcomes: pd.DataFrame, *, n_resamples: int,
                       rng: np.random.Generator, level: float) -> Evidence:
    label = f"acc({h.a}) − acc({h.b}) at eval_noise {h.eval_noise:g}"
    outcomes, pairing, independent = seed_pairing(outcomes, h.a, h.b, [h.eval_noise])
    if independent:
        values, items = align_by_condition(outcomes, [(h.a, h.eval_noise),
                                                      (h.b, h.eval_noise)])
        res = _quiet(independent_seeds_test, values[(h.a, h.eval_noise)],
                     values[(h.b, h.eval_noise)])
        detail = (f"{label}; {res.n_seeds} seeds x {len(items)} items{pairing}; "
                  f"{res.method} on {res.dof:.3g} df")
        return seed_random_evidence(res, detail)
    aligned = align(outcomes, [h.a, h.b], h.eval_noise, by="seed")
    xa, xb = aligned.values[h.a], aligned.values[h.b]
    label += pairing
    if xa.shape[0] == 1 and _is_binary(xa) and _is_binary(xb):
        a, b, c, d = paired_table(xa[0], xb[0])
        detail = (f"{label}; 1 seed x {xa.shape[1]} items; discordant pairs b = {b} "
                  f"({h.a} only), c = {c} ({h.b} only)")
        if b + c == 0:
            warnings.warn(f"{label}: no discordant pairs.", DegenerateDataWarning, stacklevel=4)
        return tango_evidence(a, b, c, d, detail)
    # several seeds: seeds and items random; one seed with means over noise seeds: the paired
    # t over items. Either way |t| <= 1 when the pooled discordant pairs differ by at most
    # one, so such data never decides (see ._seed_random).
    k, n = xa.shape
    res = _quiet(seed_random_test, xa, xb)
    scope = "seeds and items random" if k > 1 else "items random"
    detail = (f"{label}; {k} seed(s) x {n} items, {scope}; {res.method} on {res.dof:.3g} df"
              + _two_seeds(k))
    evidence = seed_random_evidence(res, detail)
    return replace(evidence, detail=evidence.detail + _clustered_mcnemar(h, outcomes))


def _two_seeds(k: int) -> str:
    """What two seeds can support, said where the verdict is (docs/statistics.md §9)."""
    if k != 2:
        return ""
    return ("; 2 seeds: the seed variance rests on 1 df, so the interval holds its level "
            "for any seed share and is wide; a procedure-level claim needs a large effect "
            "(a third seed narrows it most)")


def _quiet(test, *mats: np.ndarray):  # type: ignore[no-untyped-def]
    """The seed-random test; constant differences (no spread) fall back with a warning that
    the verdict's ``ci_method`` already records."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        return test(*mats)


def _clustered_mcnemar(h: Hypothesis, outcomes: pd.DataFrame) -> str:
    """Item-clustered McNemar test of δ = 0 over (seed, noise_seed) strata, for the record."""
    try:
        strata = align(outcomes, [h.a, h.b], h.eval_noise, by="stratum")
    except InputError:
        return "; clustered McNemar: strata not aligned"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        res = mcnemar_stratified(strata.values[h.a], strata.values[h.b], method="clustered")
    return (f"; diagnostic, models fixed: clustered McNemar over {len(strata.rows)} strata "
            f"(δ = 0): chi2 = {res.statistic:.3g}, p = {res.pvalue:.3g}")


def _retention_evidence(h: Hypothesis, outcomes: pd.DataFrame, *, n_resamples: int,
                        rng: np.random.Generator, level: float, clean_noise: float) -> Evidence:
    series = [(h.a, clean_noise), (h.a, h.eval_noise), (h.b, clean_noise),
              (h.b, h.eval_noise)]
    label = f"retention({h.a}) − retention({h.b}) at eval_noise {h.eval_noise:g}"
    outcomes, pairing, independent = seed_pairing(outcomes, h.a, h.b,
                                              [clean_noise, h.eval_noise])
    if independent:
        values, _ = align_by_condition(outcomes, series)
        mats = [values[key] for key in series]
    else:
        aligned = align_series(outcomes, series, by="seed")
        mats = [aligned.values[key] for key in series]  # clean a, noisy a, clean b, noisy b
    label += pairing
    for cond, mat in ((h.a, mats[0]), (h.b, mats[2])):
        judged = retention_estimability(mat, confidence_level=level)
        if not judged.estimable:
            # no bounded interval for this retention: none can decide, INCONCLUSIVE
            undefined = judged.clean_accuracy == 0.0
            why = (f"clean accuracy of {cond!r} is 0, retention is undefined" if undefined
                   else f"retention of {cond!r} is not estimable: {judged.reason}")
            warnings.warn(f"hypothesis {h.id!r}: {why}; the verdict is INCONCLUSIVE.",
                          DegenerateDataWarning, stacklevel=4)
            return Evidence(
                float("nan"),
                lambda _level: ConfidenceInterval(-np.inf, np.inf),
                lambda _value: (1.0, 1.0),
                "none (retention undefined)" if undefined
                else "none (retention not estimable)",
                f"{label}; {why}",
                missing=why,
            )
    k, n = mats[0].shape
    if independent:
        res = _quiet(independent_seeds_retention_test, *mats)
        detail = (f"{label}; {res.n_seeds} seeds x {n} items; {res.method} (delta method) "
                  f"on {res.dof:.3g} df")
        return seed_random_evidence(res, detail)
    if k == 1:
        return _bootstrap("retention_difference", mats, n_resamples=n_resamples, rng=rng,
                          level=level, label=label)
    res = _quiet(seed_random_retention_test, *mats)
    detail = (f"{label}; {k} seed(s) x {n} items, seeds and items random; {res.method} "
              f"(delta method) on {res.dof:.3g} df" + _two_seeds(k))
    return seed_random_evidence(res, detail)


def gather_evidence(h: Hypothesis, outcomes: pd.DataFrame, *, n_resamples: int,
                    rng: np.random.Generator, clean_noise: float,
                    confidence_level: float) -> Evidence:
    """Evidence for ``h`` from the outcomes table (see :mod:`._hypotheses` for the choice)."""
    try:
        if h.metric == "accuracy":
            return _accuracy_evidence(h, outcomes, n_resamples=n_resamples, rng=rng,
                                      level=confidence_level)
        return _retention_evidence(h, outcomes, n_resamples=n_resamples, rng=rng,
                                   level=confidence_level, clean_noise=clean_noise)
    except InputError as err:
        msg = str(err)
        if not msg.startswith(f"hypothesis {h.id!r}"):
            msg = f"hypothesis {h.id!r}: {msg}"
        raise InputError(msg) from None

