"""Calibration: simulated power of McNemar tests against the predicted power (slow).

Each design draws many paired 2×2 tables from the multinomial (p11, p10, p01, p00) and
applies the test the prediction is for:

- ``method="exact"`` predicts the conditional exact (binomial) McNemar test; its
  prediction is exact, so the simulated rejection rate must match within Monte-Carlo error;
- ``method="connor"`` predicts the asymptotic McNemar z-test without continuity
  correction, ``z = (n_a_only − n_b_only)/√(n_a_only + n_b_only)``; an approximation,
  allowed 0.02 on top of the Monte-Carlo error.

Sign rule, first minus second: the effect is acc(a) − acc(b), and ``"greater"`` claims
that the first condition a is the more accurate.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from robuststats.stats import power_mcnemar

pytestmark = pytest.mark.slow

N_SIM = 20_000

DESIGNS = [
    # (n, π_D, δ, alternative)
    (200, 0.30, 0.10, "two-sided"),
    (521, 0.06, 0.03, "two-sided"),
    (1319, 0.15, 0.03, "two-sided"),
    (400, 0.20, 0.05, "greater"),
]


def _simulate_counts(
    n: int, discordance: float, effect: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(n_a_only, n_b_only) of N_SIM simulated studies with acc(a) − acc(b) = effect.

    n_a_only: a right, b wrong, probability p10 = (π_D + δ)/2; n_b_only: p01 = (π_D − δ)/2.
    """
    p10 = (discordance + effect) / 2
    p01 = (discordance - effect) / 2
    counts = rng.multinomial(n, [p10, p01, 1 - discordance], size=N_SIM)
    return counts[:, 0], counts[:, 1]


def _exact_rejects(
    b: np.ndarray, c: np.ndarray, alpha: float, alternative: str, *, mid: bool = False
) -> np.ndarray:
    """Binomial (or mid-p) McNemar test on each simulated table, written independently.

    ``b`` = n_a_only, ``c`` = n_b_only.
    """
    d = b + c

    def tail(k: np.ndarray) -> np.ndarray:
        lower = stats.binom.cdf(k, d, 0.5)
        return lower - 0.5 * stats.binom.pmf(k, d, 0.5) if mid else lower

    if alternative == "greater":  # H1: a more accurate, i.e. few n_b_only among the d
        p = tail(c)
    else:
        p = np.minimum(1.0, 2 * tail(np.minimum(b, c)))
    return (d > 0) & (p <= alpha)


def _asymptotic_rejects(
    b: np.ndarray, c: np.ndarray, alpha: float, alternative: str, *, cc: bool = False
) -> np.ndarray:
    d = b + c
    diff = (b - c) if alternative == "greater" else np.abs(b - c)
    z = np.where(d > 0, (diff - (1.0 if cc else 0.0)) / np.sqrt(np.maximum(d, 1)), 0.0)
    if alternative == "greater":
        return (d > 0) & (z >= stats.norm.isf(alpha))
    return (d > 0) & (z >= stats.norm.isf(alpha / 2))


@pytest.mark.parametrize(("n", "discordance", "effect", "alternative"), DESIGNS)
def test_exact_power_matches_simulation(
    n: int, discordance: float, effect: float, alternative: str
) -> None:
    rng = np.random.default_rng(20260106 + n)
    b, c = _simulate_counts(n, discordance, effect, rng)
    simulated = _exact_rejects(b, c, 0.05, alternative).mean()
    predicted = power_mcnemar(
        effect, n, None, discordance=discordance, alternative=alternative, method="exact"
    ).power
    se = np.sqrt(predicted * (1 - predicted) / N_SIM)
    assert abs(simulated - predicted) < 4 * se + 1e-3, (simulated, predicted)


@pytest.mark.parametrize(("n", "discordance", "effect", "alternative"), DESIGNS)
def test_connor_power_matches_simulation(
    n: int, discordance: float, effect: float, alternative: str
) -> None:
    rng = np.random.default_rng(19870301 + n)
    b, c = _simulate_counts(n, discordance, effect, rng)
    simulated = _asymptotic_rejects(b, c, 0.05, alternative).mean()
    predicted = power_mcnemar(
        effect, n, None, discordance=discordance, alternative=alternative, method="connor"
    ).power
    se = np.sqrt(predicted * (1 - predicted) / N_SIM)
    assert abs(simulated - predicted) < 4 * se + 0.02, (simulated, predicted)


def test_connor_misses_by_15_points_when_discordance_is_scarce() -> None:
    # π_D = δ = 0.03 at Connor's n = 260: Connor says 0.80, the asymptotic z-test it
    # approximates rejects 95 % of the time (docs/power.md; the exact sum says 0.954)
    n, discordance, effect = 260, 0.03, 0.03
    rng = np.random.default_rng(1987)
    b, c = _simulate_counts(n, discordance, effect, rng)
    simulated = _asymptotic_rejects(b, c, 0.05, "two-sided").mean()
    connor = power_mcnemar(effect, n, None, discordance=discordance, method="connor").power
    exact_sum = power_mcnemar(effect, n, None, discordance=discordance,
                              method="asymptotic").power
    assert connor == pytest.approx(0.801, abs=1e-3)
    assert exact_sum == pytest.approx(0.954, abs=1e-3)
    assert abs(simulated - exact_sum) < 4 * np.sqrt(exact_sum * (1 - exact_sum) / N_SIM)
    assert simulated - connor > 0.14


def test_sample_size_reaches_target_in_simulation() -> None:
    # the n solved for (exact method) gives ≥ 80 % simulated power, n − 5 % gives less
    rng = np.random.default_rng(1742)
    r = power_mcnemar(0.03, power=0.8, discordance=0.2, method="exact")
    b, c = _simulate_counts(r.n, 0.2, 0.03, rng)
    at_n = _exact_rejects(b, c, 0.05, "two-sided").mean()
    b, c = _simulate_counts(int(r.n * 0.95), 0.2, 0.03, rng)
    below = _exact_rejects(b, c, 0.05, "two-sided").mean()
    se = np.sqrt(0.8 * 0.2 / N_SIM)
    assert at_n > 0.8 - 4 * se
    assert below < 0.8


def test_design_effect_matches_clustered_simulation() -> None:
    # m repeats per item with intra-item correlation ICC: simulate a beta-binomial-like
    # item effect on the discordance direction and compare the variance inflation of
    # the per-item mean difference with Kish's 1 + (m − 1)·ICC.
    rng = np.random.default_rng(5)
    m, icc, n_items, reps = 4, 0.3, 400, 4000
    # per-item latent direction shared by its repeats with probability icc (a mixture
    # with exactly this intra-item correlation of the 0/1 indicators)
    shared = rng.random((reps, n_items)) < icc
    base = rng.random((reps, n_items, 1)) < 0.5
    own = rng.random((reps, n_items, m)) < 0.5
    outcome = np.where(shared[..., None], base, own).astype(float)
    var_clustered = outcome.mean(axis=(1, 2)).var()
    var_independent = 0.25 / (n_items * m)
    deff = 1 + (m - 1) * icc
    assert var_clustered / var_independent == pytest.approx(deff, rel=0.08)


@pytest.mark.parametrize("method", ["midp", "asymptotic", "asymptotic-cc"])
@pytest.mark.parametrize(("n", "discordance", "effect", "alternative"), DESIGNS[:3])
def test_exact_power_of_other_tests_matches_simulation(
    method: str, n: int, discordance: float, effect: float, alternative: str
) -> None:
    rng = np.random.default_rng(2013 + n)
    b, c = _simulate_counts(n, discordance, effect, rng)
    if method == "midp":
        rejects = _exact_rejects(b, c, 0.05, alternative, mid=True)
    else:
        rejects = _asymptotic_rejects(b, c, 0.05, alternative, cc=method == "asymptotic-cc")
    predicted = power_mcnemar(
        effect, n, None, discordance=discordance, alternative=alternative, method=method
    ).power
    se = np.sqrt(predicted * (1 - predicted) / N_SIM)
    assert abs(rejects.mean() - predicted) < 4 * se + 1e-3, (rejects.mean(), predicted)
