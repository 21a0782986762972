"""Bootstrap speed: robuststats vs scipy.stats.bootstrap on the same data, side by side.

GSM8K-sized problem: 1,319 items, 5 training seeds, 10,000 resamples. scipy has no
two-way (seeds x items) scheme, so the 2-D rows compare against scipy on the
seed-averaged items (an items-only bootstrap of the same estimate). Run:

    python benchmarks/bootstrap_speed.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from scipy import stats

from robuststats.stats import bootstrap_accuracy, bootstrap_difference, bootstrap_retention

N_ITEMS, N_SEEDS, B, REPEATS = 1319, 5, 10_000, 3


def best_of(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(0)
    clean = (rng.random((N_SEEDS, N_ITEMS)) < 0.70).astype(float)
    noisy = clean * (rng.random((N_SEEDS, N_ITEMS)) < 0.9)
    other = (rng.random((N_SEEDS, N_ITEMS)) < 0.65).astype(float)
    c1, n1 = clean[0], noisy[0]
    cbar, nbar = clean.mean(axis=0), noisy.mean(axis=0)

    def ratio(c, n, axis=-1):
        return n.mean(axis=axis) / c.mean(axis=axis)

    def diff(x, y, axis=-1):
        return x.mean(axis=axis) - y.mean(axis=axis)

    def scipy_boot(data, statistic, method, paired=False):
        return lambda: stats.bootstrap(data, statistic, n_resamples=B, method=method,
                                       paired=paired, vectorized=True,
                                       rng=np.random.default_rng(1))

    cases = [
        ("accuracy, 1,319 items, percentile",
         lambda: bootstrap_accuracy(c1, method="percentile", n_resamples=B, rng=1),
         scipy_boot((c1,), np.mean, "percentile")),
        ("accuracy, 1,319 items, BCa",
         lambda: bootstrap_accuracy(c1, method="bca", n_resamples=B, rng=1),
         scipy_boot((c1,), np.mean, "BCa")),
        ("retention, 1,319 items, BCa",
         lambda: bootstrap_retention(c1, n1, method="bca", n_resamples=B, rng=1),
         scipy_boot((c1, n1), ratio, "BCa", paired=True)),
        ("retention, 1,319 items, studentized",
         lambda: bootstrap_retention(c1, n1, method="studentized", n_resamples=B, rng=1),
         None),
        ("retention, 5 seeds x 1,319 items, BCa (scipy: seed means)",
         lambda: bootstrap_retention(clean, noisy, method="bca", n_resamples=B, rng=1),
         scipy_boot((cbar, nbar), ratio, "BCa", paired=True)),
        ("difference, 5 seeds x 1,319 items, BCa (scipy: seed means)",
         lambda: bootstrap_difference(clean, other, method="bca", n_resamples=B, rng=1),
         scipy_boot((cbar, other.mean(axis=0)), diff, "BCa", paired=True)),
    ]
    print(f"{B:,} resamples, best of {REPEATS}")
    print(f"{'case':60s} {'robuststats':>12s} {'scipy':>10s} {'scipy/ours':>11s}")
    for name, ours, theirs in cases:
        t_ours = best_of(ours)
        if theirs is None:
            print(f"{name:60s} {t_ours:11.3f}s {'-':>10s} {'-':>11s}")
            continue
        t_theirs = best_of(theirs)
        print(f"{name:60s} {t_ours:11.3f}s {t_theirs:9.3f}s {t_theirs / t_ours:10.1f}x")


if __name__ == "__main__":
    main()
