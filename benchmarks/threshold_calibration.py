"""Coverage of the critical-threshold intervals in a simulated noise sweep.

The question users ask of a sweep: "at which noise scale does accuracy fall by 10 % of its
clean value?", about the training procedure, over the population of training seeds and the
population of items. This benchmark simulates sweeps with item difficulty, seed skill,
seed-specific and item-specific noise sensitivity, and independent noisy evaluations:

    logit P(correct | scale x, seed s, item i) = a_i + u_s − λ (x/e)^h · exp(v_s + w_i)

with a_i ~ N(μ, 1.5²), u_s ~ N(0, σ_u²), v_s ~ N(0, σ_v²), w_i ~ N(0, 0.5²). The population
accuracy A(x) = E[expit(...)] over seeds and items is computed once by Monte Carlo
(400,000 draws, common random numbers), and the true threshold solves A(x) = 0.9 A(0).
Each replication draws k seeds and n items, fits LL.4 by binomial maximum likelihood and
computes :func:`robuststats.stats.critical_threshold` with the seed-random interval (the
default), the bootstrap (seeds × items) and the delta method (evaluations independent). Reported per design: coverage of the true
threshold, its Monte Carlo SE, the median interval width on the log scale, and the median
ratio estimate/truth.

    python benchmarks/threshold_calibration.py [--reps 100] [--n-resamples 200] [--model auto]
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

DOSES = np.array([0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08])
ITEM_SD, ITEM_SENS_SD, MU, LAM, ED, HILL = 1.5, 0.5, 1.5, 2.0, 0.03, 2.0
METHODS = ("seed-random", "bootstrap", "delta")
PRESETS = {"none": (0.0, 0.0), "moderate": (0.3, 0.3), "large": (0.5, 0.6)}
DESIGNS = [("none", 1, 300), ("none", 3, 300), ("moderate", 3, 300), ("moderate", 5, 300),
           ("large", 5, 300), ("moderate", 10, 300)]


def _logits(x: np.ndarray, a: np.ndarray, u: np.ndarray, v: np.ndarray,
            w: np.ndarray) -> np.ndarray:
    drop = LAM * (x / ED) ** HILL
    return a + u - drop * np.exp(v + w)


def true_threshold(preset: str, drop: float = 0.10, draws: int = 400_000) -> float:
    su, sv = PRESETS[preset]
    rng = np.random.default_rng(20261122)
    a = rng.normal(MU, ITEM_SD, draws)
    w = rng.normal(0, ITEM_SENS_SD, draws)
    u = rng.normal(0, su, draws)
    v = rng.normal(0, sv, draws)

    def acc(x: float) -> float:
        return float(np.mean(1 / (1 + np.exp(-_logits(np.asarray(x), a, u, v, w)))))

    target = (1 - drop) * acc(0.0)
    lo, hi = 1e-6, 1.0
    for _ in range(80):  # bisection on the log scale
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if acc(mid) > target else (lo, mid)
    return math.sqrt(lo * hi)


def _one(args: tuple[str, int, int, int, int, float, str]) -> dict:
    from robuststats.stats import critical_threshold

    preset, k, n, rep, n_resamples, truth, model = args
    su, sv = PRESETS[preset]
    rng = np.random.default_rng([k, n, rep, len(preset)])
    a = rng.normal(MU, ITEM_SD, n)[None, None, :]
    w = rng.normal(0, ITEM_SENS_SD, n)[None, None, :]
    u = rng.normal(0, su, k)[None, :, None]
    v = rng.normal(0, sv, k)[None, :, None]
    p = 1 / (1 + np.exp(-_logits(DOSES[:, None, None], a, u, v, w)))
    outcomes = (rng.random(p.shape) < p).astype(float)
    row = {"preset": preset, "k": k, "n": n}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in METHODS:
            try:
                res = critical_threshold(DOSES, outcomes, interval=method, model=model,
                                         n_resamples=n_resamples, rng=rep)
                row["model"] = res.model
                lo, hi = res.confidence_interval
                row[method] = (lo <= truth <= hi, math.log(hi / lo) if lo > 0 else math.inf)
                row["estimate"] = res.estimate
            except Exception as exc:  # a failed fit counts as a miss, and is reported
                row[method] = (False, math.nan)
                row["error"] = type(exc).__name__
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--n-resamples", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--model", default="auto", help="a drc model name, or auto (AIC)")
    args = p.parse_args()
    truths = {preset: true_threshold(preset) for preset in PRESETS}
    print("true thresholds:", {k: round(v, 5) for k, v in truths.items()})
    heads = " | ".join(f"{m} coverage | its log width" for m in METHODS)
    print(f"| seed effects | k | n | {heads} | estimate / truth (median), models chosen |")
    print("|---|---|---|" + "---|---|" * len(METHODS) + "---|")
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        for preset, k, n in DESIGNS:
            jobs = [(preset, k, n, r, args.n_resamples, truths[preset], args.model)
                    for r in range(args.reps)]
            rows = list(pool.map(_one, jobs))
            cells = []
            for method in METHODS:
                hits = np.array([r[method][0] for r in rows], dtype=float)
                widths = np.array([r[method][1] for r in rows])
                cov = hits.mean()
                se = math.sqrt(cov * (1 - cov) / len(hits))
                cells += [f"{cov:.3f} ± {se:.3f}", f"{np.nanmedian(widths):.2f}"]
            ratio = np.nanmedian([r.get("estimate", math.nan) / truths[preset] for r in rows])
            errors = sum("error" in r for r in rows)
            chosen = {m: sum(r.get("model") == m for r in rows) for m in
                      sorted({r.get("model") for r in rows if r.get("model")})}
            note = (f" ({errors} failed)" if errors else "") + f" {chosen}"
            print(f"| {preset} | {k} | {n} | {' | '.join(cells)} | {ratio:.3f}{note} |",
                  flush=True)
    print(f"\nmodel {args.model}; {args.reps} replications per design, {args.n_resamples} resamples; "
          f"{time.perf_counter() - start:.0f} s wall")


if __name__ == "__main__":
    main()
