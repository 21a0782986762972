"""Bootstrap speed: robuststats vs its previous implementation and scipy.stats.bootstrap.

GSM8K-sized problem: 1,319 items, 10,000 resamples, 95 % BCa intervals. Every case runs
side by side in one process on the same data, so the ratios are what to read (absolute
times move with the machine's load):

* one seed: robuststats against ``scipy.stats.bootstrap(method="BCa", paired=True)`` on the
  same statistic, and against the previous implementation;
* 5 seeds x 1,319 items (two-way bootstrap): robuststats against the previous
  implementation (scipy has no two-way scheme), on independent outcomes (the most distinct
  item patterns, the slowest case for robuststats) and on a simulated study with item
  difficulty and seed effects.

The previous implementation (``old_interval`` below, a copy of the algorithm before the
pattern/packed-table engine) drew item indices with ``rng.integers``, gathered outcome
vectors (one seed) or built count matrices with ``np.bincount`` and multiplied (several
seeds), and computed statistics from float means.

Times are the best of ``REPEATS`` runs in CPU seconds of this process (``time.process_time``)
with BLAS and OpenMP held to one thread: on a shared machine other jobs inflate wall time
far more than CPU time. ``--wall`` reports wall-clock time instead. Run:

    python benchmarks/bootstrap_speed.py [--wall]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from robuststats._validation import as_aligned_outcomes  # noqa: E402
from robuststats.stats import (  # noqa: E402
    bootstrap_accuracy,
    bootstrap_difference,
    bootstrap_retention,
    bootstrap_retention_difference,
)
from robuststats.stats._simulate import seed_model, simulate_matrices  # noqa: E402
from robuststats.stats.resampling._bootstrap import _gradient  # noqa: E402
from robuststats.stats.resampling._bootstrap_ci import BootstrapFit, acceleration  # noqa: E402
from robuststats.stats.resampling._resample import crossed_variance_ratio, jackknife_influence  # noqa: E402

N_ITEMS, N_SEEDS, B, REPEATS = 1319, 5, 10_000, 3
CLOCK = time.process_time

# --- the previous implementation, kept for the comparison ---

_OLD_STATISTICS = {
    "accuracy": lambda m: m[..., 0],
    "difference": lambda m: m[..., 0] - m[..., 1],
    "retention": lambda m: m[..., 1] / m[..., 0],
    "retention_difference": lambda m: m[..., 1] / m[..., 0] - m[..., 3] / m[..., 2],
}


def _old_counts(rng: np.random.Generator, size: int, n: int) -> np.ndarray:
    idx = rng.integers(0, n, size=(size, n))
    idx += (np.arange(size) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=size * n).reshape(size, n).astype(np.float64)


def _old_resampled_means(matrices, n_resamples, rng, block=1024):
    k, n = matrices[0].shape
    m = len(matrices)
    flat = np.stack(matrices).reshape(m * k, n)
    means = np.empty((n_resamples, m))
    for start in range(0, n_resamples, block):
        size = min(block, n_resamples - start)
        rows = slice(start, start + size)
        if k == 1:
            idx = rng.integers(0, n, size=(size, n))
            for j in range(m):
                means[rows, j] = flat[j][idx].sum(axis=1) / n
            continue
        w = _old_counts(rng, size, n)
        s = _old_counts(rng, size, k)
        row_sums = (w @ flat.T).reshape(size, m, k)
        means[rows] = np.einsum("bmk,bk->bm", row_sums, s) / (k * n)
    return means


def old_interval(quantity: str, arrays: dict, n_resamples: int, seed: int):
    """BCa interval as the previous implementation computed it."""
    matrices = as_aligned_outcomes(arrays)
    rng = np.random.default_rng(seed)
    k = matrices[0].shape[0]
    func = _OLD_STATISTICS[quantity]
    observed = np.array([mat.mean() for mat in matrices])
    estimate = float(func(observed))
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = func(_old_resampled_means(matrices, n_resamples, rng))
    if k > 1:
        linear = np.tensordot(_gradient(func, observed), np.stack(matrices), axes=1)
        boot = estimate + (boot - estimate) * crossed_variance_ratio(linear)
    boot = boot[np.isfinite(boot)]
    u_items, u_seeds = jackknife_influence(matrices, func)
    fit = BootstrapFit(estimate=estimate, boot=boot, method="bca",
                       acceleration=acceleration(u_items, u_seeds))
    return fit.interval(0.95)


# --- timing ---

def best_of(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = CLOCK()
        fn()
        times.append(CLOCK() - start)
    return min(times)


def _simulated(rng: np.random.Generator, k: int) -> dict[str, np.ndarray]:
    """A study as users run it: item difficulty, seed effects (robuststats.stats._simulate,
    moderate preset); conditions share items, so item patterns are far fewer."""
    sim = simulate_matrices(seed_model("moderate"), k, N_ITEMS, rng)  # (cond, level, k, n)
    return {"clean_a": sim[0, 0], "noisy_a": sim[0, 1], "clean_b": sim[1, 0],
            "noisy_b": sim[1, 1]}


def _data(rng: np.random.Generator, k: int) -> dict[str, np.ndarray]:
    """Independent outcomes (no item effects): the most item patterns, the slowest case."""
    clean_a = (rng.random((k, N_ITEMS)) < 0.70).astype(float)
    noisy_a = clean_a * (rng.random((k, N_ITEMS)) < 0.90)
    clean_b = (rng.random((k, N_ITEMS)) < 0.65).astype(float)
    noisy_b = clean_b * (rng.random((k, N_ITEMS)) < 0.85)
    return {"clean_a": clean_a, "noisy_a": noisy_a, "clean_b": clean_b, "noisy_b": noisy_b}


def _cases(d: dict[str, np.ndarray], with_scipy: bool):
    ca, na, cb, nb = d["clean_a"], d["noisy_a"], d["clean_b"], d["noisy_b"]
    one = ca.shape[0] == 1
    v = (lambda a: a[0]) if one else (lambda a: a)

    def scipy_boot(data, statistic):
        if not with_scipy:
            return None
        return lambda: stats.bootstrap(data, statistic, n_resamples=B, method="BCa",
                                       paired=True, vectorized=True,
                                       rng=np.random.default_rng(1))

    def mean(x, axis):
        return x.mean(axis=axis)

    return [
        ("accuracy", {"x": v(ca)},
         lambda: bootstrap_accuracy(v(ca), n_resamples=B, rng=1),
         scipy_boot((v(ca),), lambda x, axis=-1: mean(x, axis))),
        ("difference", {"x": v(ca), "y": v(cb)},
         lambda: bootstrap_difference(v(ca), v(cb), n_resamples=B, rng=1),
         scipy_boot((v(ca), v(cb)), lambda x, y, axis=-1: mean(x, axis) - mean(y, axis))),
        ("retention", {"clean": v(ca), "noisy": v(na)},
         lambda: bootstrap_retention(v(ca), v(na), n_resamples=B, rng=1),
         scipy_boot((v(ca), v(na)), lambda c, z, axis=-1: mean(z, axis) / mean(c, axis))),
        ("retention_difference", {"clean_a": v(ca), "noisy_a": v(na), "clean_b": v(cb),
                                  "noisy_b": v(nb)},
         lambda: bootstrap_retention_difference(v(ca), v(na), v(cb), v(nb), n_resamples=B,
                                                rng=1),
         scipy_boot((v(ca), v(na), v(cb), v(nb)),
                    lambda c1, z1, c2, z2, axis=-1: (mean(z1, axis) / mean(c1, axis)
                                                     - mean(z2, axis) / mean(c2, axis)))),
    ]


def main(argv: list[str] | None = None) -> None:
    global CLOCK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    if parser.parse_args(argv).wall:
        CLOCK = time.perf_counter
    rng = np.random.default_rng(0)
    clock = "wall-clock" if CLOCK is time.perf_counter else "CPU"
    print(f"95 % BCa, {N_ITEMS:,} items, {B:,} resamples, best of {REPEATS} in {clock} "
          "seconds; ratios = their time / ours")
    head = (f"{'case':52s} {'ours':>8s} {'previous':>9s} {'scipy':>8s} "
            f"{'previous/ours':>14s} {'scipy/ours':>11s}")
    print(head)
    blocks = ((1, "1 seed", _data), (N_SEEDS, f"{N_SEEDS} seeds", _data),
              (N_SEEDS, f"{N_SEEDS} seeds, simulated", _simulated))
    for k, label, make in blocks:
        data = make(rng, k)
        for quantity, arrays, ours, theirs in _cases(data, with_scipy=k == 1):
            t_ours = best_of(ours)
            t_old = best_of(lambda q=quantity, a=arrays: old_interval(q, a, B, 1))
            name = f"{quantity}, {label}"
            if theirs is None:
                print(f"{name:52s} {t_ours:7.3f}s {t_old:8.3f}s {'-':>8s} "
                      f"{t_old / t_ours:13.1f}x {'-':>11s}")
                continue
            t_scipy = best_of(theirs)
            print(f"{name:52s} {t_ours:7.3f}s {t_old:8.3f}s {t_scipy:7.3f}s "
                  f"{t_old / t_ours:13.1f}x {t_scipy / t_ours:10.1f}x")
    c1, n1 = data["clean_a"][0], data["noisy_a"][0]  # one seed of the simulated study
    t_stud = best_of(lambda: bootstrap_retention(c1, n1, method="studentized", n_resamples=B,
                                                 rng=1))
    print(f"{'retention, 1 seed, studentized':52s} {t_stud:7.3f}s")


if __name__ == "__main__":
    main()
