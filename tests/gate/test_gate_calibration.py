"""Calibration of the gate (slow): a candidate whose true retention sits exactly on the
margin must pass at most alpha of the time.

Outcomes come from the package's realistic simulator (``robuststats.stats._simulate``:
item difficulty, seed skill, seed × condition shifts, seed-specific robustness, seed ×
item interaction and noise re-evaluations, 0/1 outcomes). One draw of k_c + k_b seeds
gives the candidate (condition A, its first k_c seeds) and the baseline (condition B, the
other k_b seeds): the same items, independent training runs. The candidate's robustness
effect is solved so that the procedure-level truth (``true_effects``, by quadrature over
seeds and items) is exactly on the margin.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import optimize

from robuststats.gate import gate_test
from robuststats.stats import DegenerateDataWarning, true_effects
from robuststats.stats._simulate import seed_model, simulate_matrices

pytestmark = pytest.mark.slow

LEVELS = (0.0, 0.05)


def _on_margin(seed_effects: str, margin: float, margin_type: str,
               metric: str = "retention", levels: tuple[float, ...] = LEVELS,
               **model: float) -> float:
    """The robustness effect of A that puts A's metric vs B's on the margin (at the largest
    level)."""
    def gap(effect: float) -> float:
        row = true_effects(seed_effects, robustness_effect=effect, eval_noise=levels,
                           **model).iloc[-1]
        a, b = ((row["retention_a"], row["retention_b"]) if metric == "retention" else
                (row["accuracy_a"], row["accuracy_b"]))
        if margin_type == "relative":
            return a / b - (1.0 - margin)
        return a - b + margin
    return float(optimize.brentq(gap, -8.0, 0.0, xtol=1e-10))


@pytest.mark.parametrize(("seed_effects", "kc", "kb", "n", "margin", "margin_type"), [
    ("moderate", 1, 5, 300, 0.10, "relative"),     # one checkpoint against 5 seeds
    ("small", 3, 5, 300, 0.05, "absolute"),        # 3 candidate seeds, independent runs
    ("large", 1, 8, 500, 0.15, "relative"),
])
def test_false_pass_rate_at_the_margin_is_at_most_alpha(seed_effects, kc, kb, n, margin,
                                                        margin_type):
    effect = _on_margin(seed_effects, margin, margin_type)
    model = seed_model(seed_effects, robustness_effect=effect, eval_noise=LEVELS)
    rng = np.random.default_rng(2024)
    reps, passes = 1000, 0
    for _ in range(reps):
        sim = simulate_matrices(model, kc + kb, n, rng)  # (2, levels, seeds, items)
        r = gate_test(sim[0, 0, :kc], sim[0, 1, :kc], sim[1, 0, kc:], sim[1, 1, kc:],
                      max_degradation=margin, margin_type=margin_type, alpha=0.05)
        passes += r.passed
    rate = passes / reps
    mc_se = math.sqrt(0.05 * 0.95 / reps)
    # measured (rng 2024, 1,000 each): 0.047 (moderate, 1 vs 5), 0.037 (small, 3 vs 5),
    # 0.048 (large, 1 vs 8)
    assert rate <= 0.05 + 2.5 * mc_se, rate


@pytest.mark.parametrize(("seed_effects", "model", "kc", "kb", "n", "margin", "margin_type",
                          "metric", "paired"), [
    # one model each near an accuracy of 0 (baseline 5 % under noise, the candidate on the
    # margin at 0.2 %): the paired t over items passed 11.5 % here, Tango's score test 3.8 %
    ("none", {"intercept": -3.0, "seed_item_sd": 0.5}, 1, 1, 100, 0.05, "absolute",
     "accuracy", False),
    # paired seeds, 30 items, a relative margin (delta method on the log scale)
    ("moderate", {}, 3, 3, 30, 0.10, "relative", "retention", True),
    # one model each, retention, no seed-level effects (the models are the procedures)
    ("none", {"seed_item_sd": 0.5}, 1, 1, 100, 0.10, "relative", "retention", False),
    # clean accuracy 0.9, 3 candidate seeds against 5, absolute accuracy margin
    ("moderate", {"intercept": 3.0}, 3, 5, 100, 0.05, "absolute", "accuracy", False),
])
def test_false_pass_rate_in_more_designs(seed_effects, model, kc, kb, n, margin, margin_type,
                                         metric, paired):
    effect = _on_margin(seed_effects, margin, margin_type, metric, **model)
    sm = seed_model(seed_effects, robustness_effect=effect, eval_noise=LEVELS, **model)
    rng = np.random.default_rng(2025)
    reps, passes = 1000, 0
    for _ in range(reps):
        sim = simulate_matrices(sm, kc if paired else kc + kb, n, rng)
        rows_b = slice(0, kc) if paired else slice(kc, kc + kb)
        clean = metric == "retention"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateDataWarning)
            r = gate_test(sim[0, 0, :kc] if clean else None, sim[0, 1, :kc],
                          sim[1, 0, rows_b] if clean else None, sim[1, 1, rows_b],
                          max_degradation=margin, margin_type=margin_type, metric=metric,
                          pairing="paired" if paired else "independent")
        passes += r.passed
    rate = passes / reps
    # measured (rng 2025, 1,000 each): 0.038, 0.036, 0.053, 0.037
    assert rate <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / reps), rate


def test_every_level_must_pass_holds_alpha_without_adjustment():
    """Intersection–union (Berger 1982): the truth on the margin at the largest level and
    better at the smaller one; requiring both passes stays below alpha."""
    levels = (0.0, 0.025, 0.05)
    effect = _on_margin("moderate", 0.10, "relative", levels=levels)
    sm = seed_model("moderate", robustness_effect=effect, eval_noise=levels)
    rng = np.random.default_rng(3)
    reps, passes = 1000, 0
    for _ in range(reps):
        sim = simulate_matrices(sm, 1 + 5, 300, rng)
        passes += all(gate_test(sim[0, 0, :1], sim[0, j, :1], sim[1, 0, 1:], sim[1, j, 1:],
                                max_degradation=0.10).passed for j in (1, 2))
    # measured (rng 3): 0.016 (each level alone: 0.158 at 0.025, 0.037 at 0.05)
    assert passes / reps <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / reps)
