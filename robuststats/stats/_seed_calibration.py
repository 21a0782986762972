"""Calibration of seed-random intervals and tests by simulation (crossed design).

Candidates compared on the same simulated studies (:mod:`._simulate`), for the accuracy
difference ``a − b`` and the retention difference at the noisy level:

* ``satterthwaite``: the crossed-ANOVA t interval of :mod:`._seed_random`;
* ``seed-boot-t``: a bootstrap-t over seeds: seeds resampled with replacement (items kept),
  each resample studentized by its own crossed standard error, the interval
  ``θ̂ − q*_{1−α/2}·se, θ̂ − q*_{α/2}·se`` (Efron & Tibshirani 1993, ch. 12);
* ``two-way-bca``: the package's current interval, ``bootstrap_difference`` /
  ``bootstrap_retention_difference`` (Owen's two-way bootstrap with the crossed variance
  correction and BCa, normal-quantile calibration).

Tests of H0: a − b = 0 (procedures equal): the seed-random t test, and the fixed-model
clustered McNemar test (``mcnemar_stratified(method="clustered")``) for the accuracy
difference.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd

from robuststats.stats._common import DegenerateDataWarning, SeedBootstrapWarning
from robuststats.stats._mcnemar_stratified import mcnemar_stratified
from robuststats.stats._seed_random import seed_random_retention_test, seed_random_test
from robuststats.stats._simulate import seed_model, simulate_matrices, true_effects
from robuststats.stats.resampling import bootstrap_difference, bootstrap_retention_difference

__all__ = ["calibrate_cell", "calibrate_verdicts", "calibration_table", "seed_bootstrap_t"]

#: effects of the non-null model used for coverage and power (logit scale)
ALTERNATIVE_EFFECTS = dict(accuracy_effect=0.2, robustness_effect=0.2)


def seed_bootstrap_t(matrices: list[np.ndarray], statistic: str, *, confidence_level: float,
                     n_resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    """Bootstrap-t interval over seeds for ``"difference"`` (x, y) or
    ``"retention_difference"`` (clean_a, noisy_a, clean_b, noisy_b); needs k ≥ 2."""
    x = np.stack(matrices)  # (M, k, n)
    _, k, n = x.shape

    def stat_grad(means):  # means (..., M) -> θ (...), gradient (..., M)
        if statistic == "difference":
            g = np.broadcast_to(np.array([1.0, -1.0]), means.shape)
            return means[..., 0] - means[..., 1], g
        c0, z0, c1, z1 = (means[..., j] for j in range(4))
        g = np.stack([-z0 / c0**2, 1 / c0, z1 / c1**2, -1 / c1], axis=-1)
        return z0 / c0 - z1 / c1, g

    row_means = x.mean(axis=2)  # (M, k)
    cross = np.einsum("asi,bsi->sab", x, x)  # (k, M, M): Σ_i X_a X_b per seed

    def se_of(weights):  # weights (B, k) seed counts summing to k
        means = weights @ row_means.T / k  # (B, M)
        theta, g = stat_grad(means)
        lin_rows = np.einsum("bm,mk->bk", g, row_means)  # per-seed mean of L (B, k)
        grand = np.einsum("bk,bk->b", weights, lin_rows) / k
        col = np.einsum("bm,bk,mki->bi", g, weights, x)  # Σ_s S_s L_si (B, n)
        total_sq = np.einsum("bk,kac,ba,bc->b", weights, cross, g, g)  # Σ_s S_s Σ_i L_si²
        dev = lin_rows - grand[:, None]
        ss_seed = n * np.einsum("bk,bk->b", weights, dev**2)
        kn = k * n
        ss_item = np.sum(col**2, axis=1) / k - kn * grand**2
        ss_tot = total_sq - kn * grand**2
        ms_seed = ss_seed / (k - 1)
        ms_item = ss_item / (n - 1)
        ms_resid = (ss_tot - ss_seed - ss_item) / ((k - 1) * (n - 1))
        v = np.maximum.reduce([ms_seed + ms_item - ms_resid, ms_seed, ms_item, ms_resid]) / kn
        return theta, np.sqrt(np.maximum(v, 0.0))

    ones = np.ones((1, k))
    theta_hat, se_hat = (float(a[0]) for a in se_of(ones))
    idx = rng.integers(0, k, size=(n_resamples, k))
    weights = np.zeros((n_resamples, k))
    np.add.at(weights, (np.arange(n_resamples)[:, None], idx), 1.0)
    theta, se = se_of(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (theta - theta_hat) / se
    t = t[np.isfinite(t)]
    alpha = 1.0 - confidence_level
    if t.size < 2 or se_hat == 0.0:
        return theta_hat, theta_hat
    q_low, q_high = np.quantile(t, [alpha / 2, 1 - alpha / 2])
    return theta_hat - q_high * se_hat, theta_hat - q_low * se_hat


def calibrate_cell(seed_effects: str, k: int, n: int, *, reps: int, rng: np.random.Generator,
                   methods: Iterable[str] = ("satterthwaite", "seed-boot-t", "two-way-bca"),
                   n_resamples: int = 1000, confidence_level: float = 0.95,
                   boot_reps: int | None = None, item_condition_sd: float = 0.0,
                   item_robustness_sd: float = 0.0) -> list[dict]:
    """Coverage, width, size and power of every method in one cell of the grid.

    ``item_condition_sd`` and ``item_robustness_sd`` add the item × condition components
    of :mod:`._simulate` (items that favour one procedure; item-specific noise sensitivity).

    Coverage and width are measured in the non-null model (:data:`ALTERNATIVE_EFFECTS`),
    where the rejection rate of H0: a − b = 0 is the power; size in the null model (same
    seed components, no effects). The resampling methods run on the first ``boot_reps``
    replications only (default: all). Returns one row per (quantity, method).
    """
    boot_reps = reps if boot_reps is None else min(boot_reps, reps)
    methods = tuple(methods)
    alpha = 1.0 - confidence_level
    items = dict(item_condition_sd=item_condition_sd, item_robustness_sd=item_robustness_sd)
    alt = seed_model(seed_effects, **ALTERNATIVE_EFFECTS, **items)
    null = seed_model(seed_effects, **items)
    truth = true_effects(seed_effects, **ALTERNATIVE_EFFECTS, **items).iloc[-1]
    targets = {"difference": float(truth["estimate"]),
               "retention_difference": float(truth["retention_difference"])}
    tally: dict[tuple[str, str], dict[str, list[float]]] = {}

    def add(quantity, method, key, value):
        tally.setdefault((quantity, method), {}).setdefault(key, []).append(float(value))

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for rep in range(reps):
            for model, kind in ((alt, "alt"), (null, "null")):
                sim = simulate_matrices(model, k, n, rng)  # (2, 2, k, n)
                inputs = {
                    "difference": [sim[0, 1], sim[1, 1]],
                    "retention_difference": [sim[0, 0], sim[0, 1], sim[1, 0], sim[1, 1]],
                }
                for quantity, mats in inputs.items():
                    target = targets[quantity] if kind == "alt" else 0.0
                    for method in methods:
                        if method != "satterthwaite" and rep >= boot_reps:
                            continue
                        low, high, _ = _interval(method, quantity, mats, confidence_level,
                                                 n_resamples, rng)
                        if kind == "alt":
                            add(quantity, method, "cover", low <= target <= high)
                            add(quantity, method, "width", high - low)
                            add(quantity, method, "power", not low <= 0.0 <= high)
                        else:
                            add(quantity, method, "size", not low <= 0.0 <= high)
                    if quantity == "difference" and k > 1:
                        for_alt = mcnemar_stratified(mats[0], mats[1], method="clustered")
                        add(quantity, "clustered-mcnemar",
                            "power" if kind == "alt" else "size", for_alt.pvalue < alpha)
    seconds = time.perf_counter() - t0
    rows = []
    for (quantity, method), vals in tally.items():
        counted = vals.get("cover", vals.get("size", []))
        row = dict(seed_effects=seed_effects, n_seeds=k, n_items=n, quantity=quantity,
                   method=method, reps=len(counted))
        for key in ("cover", "width", "size", "power"):
            v = vals.get(key)
            row[{"cover": "coverage", "width": "mean_width"}.get(key, key)] = (
                float(np.mean(v)) if v else math.nan)
        rows.append(row)
    for row in rows:
        row["seconds"] = seconds
    return rows


def _interval(method, quantity, mats, level, n_resamples, rng):
    """(low, high, pvalue or nan) of one method on one simulated study."""
    if method == "satterthwaite":
        if quantity == "difference":
            res = seed_random_test(mats[0], mats[1], confidence_level=level)
        else:
            res = seed_random_retention_test(*mats, confidence_level=level)
        return res.confidence_interval.low, res.confidence_interval.high, res.pvalue
    if method == "seed-boot-t":
        low, high = seed_bootstrap_t(mats, quantity, confidence_level=level,
                                     n_resamples=n_resamples, rng=rng)
        return low, high, math.nan
    if method == "two-way-bca":
        func = bootstrap_difference if quantity == "difference" else \
            bootstrap_retention_difference
        with warnings.catch_warnings():  # measured here on purpose
            warnings.simplefilter("ignore", SeedBootstrapWarning)
            res = func(*mats, confidence_level=level, n_resamples=n_resamples, rng=rng,
                       seeds="bootstrap")
        return res.confidence_interval.low, res.confidence_interval.high, math.nan
    raise ValueError(method)


def calibration_table(rows: list[dict]) -> pd.DataFrame:
    """Rows of :func:`calibrate_cell` as a table with Monte Carlo standard errors."""
    df = pd.DataFrame(rows)
    df["coverage_se"] = np.sqrt(df["coverage"] * (1 - df["coverage"]) / df["reps"])
    df["size_se"] = np.sqrt(df["size"] * (1 - df["size"]) / df["reps"])
    return df


#: verdict scenarios: (name, relation, model, margin rule, the verdict that is wrong there)
#: margins sit on the boundary of the claim, where a wrong decision is most likely
VERDICT_SCENARIOS = (
    ("greater, margin = truth", "greater", "alt", "truth", ("VERIFIED", "FALSIFIED")),
    ("less, margin = 0, procedures equal", "less", "null", "zero", ("VERIFIED", "FALSIFIED")),
    ("equivalent, margin = |truth|", "equivalent", "alt", "abs-truth", ("VERIFIED",)),
    ("equivalent, margin 0.02, procedures equal", "equivalent", "null", "0.02",
     ("FALSIFIED",)),
)


def calibrate_verdicts(seed_effects: str, k: int, n: int, *, reps: int,
                       rng: np.random.Generator, confidence_level: float = 0.95
                       ) -> list[dict]:
    """Wrong-decision rate of the hypothesis verdicts with the seed-random t (k ≥ 2).

    For each scenario of :data:`VERDICT_SCENARIOS` and each quantity (accuracy difference,
    retention difference at the noisy level), the verdict rule of
    :mod:`robuststats.stats._hypotheses` is applied to the seed-random interval of one
    simulated study; a verdict listed as wrong for the scenario counts as a wrong decision.
    At a boundary margin both a VERIFIED and a FALSIFIED greater/less verdict are wrong, so
    the rate is bounded by α; an equivalence verdict is TOST at α/2 per side.
    """
    from robuststats.stats._hypotheses import Hypothesis, _verdict

    models = {"alt": seed_model(seed_effects, **ALTERNATIVE_EFFECTS),
              "null": seed_model(seed_effects)}
    truth_row = true_effects(seed_effects, **ALTERNATIVE_EFFECTS).iloc[-1]
    truths = {"difference": float(truth_row["estimate"]),
              "retention_difference": float(truth_row["retention_difference"])}
    wrong: dict[tuple[str, str], list[bool]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for _ in range(reps):
            sims = {kind: simulate_matrices(model, k, n, rng) for kind, model in models.items()}
            for name, relation, kind, rule, bad in VERDICT_SCENARIOS:
                sim = sims[kind]
                for quantity in ("difference", "retention_difference"):
                    truth = truths[quantity] if kind == "alt" else 0.0
                    margin = {"truth": truth, "abs-truth": abs(truth), "zero": 0.0,
                              "0.02": 0.02}[rule]
                    if quantity == "difference":
                        res = seed_random_test(sim[0, 1], sim[1, 1],
                                               confidence_level=confidence_level)
                    else:
                        res = seed_random_retention_test(sim[0, 0], sim[0, 1], sim[1, 0],
                                                         sim[1, 1],
                                                         confidence_level=confidence_level)
                    h = Hypothesis(id="H", metric="accuracy", a="A", b="B", eval_noise=0.05,
                                   relation=relation, margin=margin)
                    verdict = _verdict(h, res.confidence_interval)
                    wrong.setdefault((name, quantity), []).append(verdict in bad)
    rows = []
    for (name, quantity), flags in wrong.items():
        rate = float(np.mean(flags))
        rows.append(dict(seed_effects=seed_effects, n_seeds=k, n_items=n, scenario=name,
                         quantity=quantity, reps=len(flags), wrong_rate=rate,
                         wrong_rate_se=math.sqrt(max(rate * (1 - rate), 1e-12) / len(flags))))
    return rows
