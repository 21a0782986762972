"""Tied seed sums: how often the seed-random t claims certainty on a true null.

Two measurements (docs/statistics.md §9, "Tied seed sums"):

* ``--simulator``: null studies from the package's simulator (item difficulty, item ×
  condition, seed × condition and seed × item effects; the procedures equal), k seeds ×
  n items: the share of studies whose seeds' sums of ``x − y`` all tie, the size at 5 %, and
  p-values below 0.001 among the tied studies and among all.
* ``--tied``: random small designs (k = 2–4 seeds, n = 2–50 items, 0/1 outcomes) drawn from a
  logistic null of random seed and item × condition spread, with every seed's sum moved to a
  common value (:func:`tie_seed_sums`): the share of p-values below 0.001, with its Monte
  Carlo SE (tests/stats/test_tied_seed_sums.py runs 3,000 of them).

    python benchmarks/seed_ties.py --simulator --reps 4000
    python benchmarks/seed_ties.py --tied --reps 40000
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
from scipy import special

from robuststats.stats import DegenerateDataWarning, seed_random_test
from robuststats.stats._simulate import seed_model, simulate_matrices

ROOT = 20261128


def outcomes_from(d: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """0/1 outcomes x, y with ``x − y = d``; where d = 0 both are 1 or 0 at random."""
    same = (rng.random(d.shape) < 0.5).astype(float)
    x = np.where(d == 1, 1.0, np.where(d == -1, 0.0, same))
    return x, x - d


def tie_seed_sums(d: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Move every seed's sum of ``d`` (values in {−1, 0, 1}) to a common value by changing
    as few entries as possible (+1 → 0 → −1 to lower a sum, the reverse to raise it), at
    random items.

    The rule is odd in ``d`` (``tie(−d) = −tie(d)`` for the same draws), so a null whose
    distribution is symmetric under swapping the conditions stays one."""
    d = d.copy()
    sums = d.sum(axis=1)
    target = float(np.round(np.mean(sums)))  # round half to even: odd in d
    for s in range(d.shape[0]):
        step = -1.0 if sums[s] > target else 1.0
        for _ in range(int(abs(sums[s] - target))):
            movable = np.flatnonzero(d[s] != step)
            gap = np.abs(d[s, movable] - step)
            d[s, rng.choice(movable[gap == gap.max()])] += step  # a +1 before a 0 to lower
    return d


def null_differences(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    """Per-item differences ``x − y`` of a true null: item difficulty (SD 1.5), seed ×
    condition and item × condition effects of random spread (SD 0, 0.3 or 1 and 0, 0.5 or
    1.5 on the logit scale, split between a and b), seed × item noise (SD 0.5); symmetric in
    a and b."""
    item = rng.normal(0.0, 1.5, n)[None, :]
    seed_sd, item_sd = rng.choice([0.0, 0.3, 1.0]), rng.choice([0.0, 0.5, 1.5])
    u = rng.normal(0.0, seed_sd, k)[:, None] / 2.0
    v = rng.normal(0.0, item_sd, n)[None, :] / 2.0
    base = item + rng.normal(0.0, 0.5, (k, n))
    x = rng.random((k, n)) < special.expit(base + u + v)
    y = rng.random((k, n)) < special.expit(base - u - v)
    return x.astype(float) - y.astype(float)


def tied_null_pvalues(reps: int, rng: np.random.Generator, *, seeds: tuple[int, int] = (2, 4),
                      items: tuple[int, int] = (2, 50)) -> tuple[np.ndarray, np.ndarray]:
    """``(k, p-value)`` of ``seed_random_test`` on ``reps`` tied true nulls (k and n uniform
    in the ranges; a study whose differences are all 0 after the tie is drawn again)."""
    ks, ps = np.empty(reps, dtype=int), np.empty(reps)
    done = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        while done < reps:
            k = int(rng.integers(seeds[0], seeds[1] + 1))
            n = int(rng.integers(items[0], items[1] + 1))
            d = tie_seed_sums(null_differences(rng, k, n), rng)
            if not np.ptp(d) > 0:
                continue
            x, y = outcomes_from(d, rng)
            ks[done], ps[done] = k, seed_random_test(x, y).pvalue
            done += 1
    return ks, ps


def _rate(hits: int, reps: int) -> str:
    if reps == 0:
        return "—"
    p = hits / reps
    se = math.sqrt(p * (1 - p) / reps)
    return f"{hits}/{reps} = {100 * p:.3f} % (SE {100 * se:.3f})"


def tied(reps: int) -> str:
    ks, ps = tied_null_pvalues(reps, np.random.default_rng(ROOT))
    lines = ["| seeds | tied studies | p < 0.001 | p < 1e-6 | smallest p |", "|---|---|---|---|---|"]
    for k in (2, 3, 4, None):
        sel = ps if k is None else ps[ks == k]
        lines.append(f"| {'all' if k is None else k} | {sel.size} | "
                     f"{_rate(int(np.sum(sel < 1e-3)), sel.size)} | {int(np.sum(sel < 1e-6))} | "
                     f"{sel.min():.3g} |")
    return "\n".join(lines)


def simulator(reps: int, n: int) -> str:
    lines = ["| seed effects | item × condition SD | k | ties | size at 5 % | p < 0.001 among "
             "ties | p < 0.001 among all | smallest p among ties |", "|---|---|---|---|---|---|---|---|"]
    cells = [(pre, icsd, k) for pre in ("none", "small", "moderate") for icsd in (0.0, 1.0)
             for k in (2, 3, 5)]
    streams = np.random.SeedSequence(ROOT + 1).spawn(len(cells))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for (pre, icsd, k), ss in zip(cells, streams):
            rng = np.random.default_rng(ss)
            model = seed_model(pre, item_condition_sd=icsd)
            ties = tie_hits = hits = small = 0
            smallest = math.inf
            for _ in range(reps):
                sim = simulate_matrices(model, k, n, rng)
                x, y = sim[0, 1], sim[1, 1]
                sums = (x - y).sum(axis=1)
                p = seed_random_test(x, y).pvalue
                hits += p < 0.05
                small += p < 1e-3
                if np.all(sums == sums[0]):
                    ties += 1
                    tie_hits += p < 1e-3
                    smallest = min(smallest, p)
            lines.append(f"| {pre} | {icsd:g} | {k} | {ties} ({100 * ties / reps:.2f} %) | "
                         f"{hits / reps:.4f} | {tie_hits}/{ties} | {_rate(small, reps)} | "
                         f"{smallest:.3g} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=4000)
    p.add_argument("--items", type=int, default=500, help="items (--simulator)")
    p.add_argument("--simulator", action="store_true")
    p.add_argument("--tied", action="store_true")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    if args.simulator:
        print(f"null studies from the simulator, n = {args.items}, {args.reps} each\n")
        print(simulator(args.reps, args.items))
    if args.tied:
        print(f"tied true nulls, k = 2–4, n = 2–50, {args.reps} studies\n")
        print(tied(args.reps))
    print(f"\nwall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
