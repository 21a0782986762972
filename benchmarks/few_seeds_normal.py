"""The seed-random t's few-seed calibration under normal theory (docs/statistics.md §9).

Size at a nominal 5 % of the shipped test and of its plug-in (Satterthwaite's ν, no
calibration), ``L_si = a_s + b_i + e_si`` with σ_e = 1 and n items, through
``crossed_variance(...).reference``; and what the calibration costs: a* and the 95 %
critical values at MS_resid = 1, MS_item = 1 + 0.49k.

    python benchmarks/few_seeds_normal.py --reps 2500
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import special

from robuststats.stats import crossed_variance
from robuststats.stats._few_seeds import SeedReference

ROOT = 20261129
#: (σ_a, σ_b): seed × condition and item × condition SD of the difference
DESIGNS = ((0.0, 0.7), (0.06, 0.7), (0.1, 0.7), (0.03, 1.2), (0.3, 0.2), (0.0, 0.0))
SEEDS = (2, 3, 5, 10)


def size_cell(k: int, n: int, seed_sd: float, item_sd: float, reps: int,
              rng: np.random.Generator) -> tuple[float, float]:
    """(calibrated, plug-in) rejection rates at 5 % under H0."""
    cal = plug = 0
    for _ in range(reps):
        values = (rng.normal(0.0, seed_sd, k)[:, None] + rng.normal(0.0, item_sd, n)[None, :]
                  + rng.normal(0.0, 1.0, (k, n)))
        cv = crossed_variance(values)
        t = values.mean() / math.sqrt(cv.variance)
        cal += cv.reference.pvalue(t) < 0.05
        plug += 2.0 * special.stdtr(cv.dof, -abs(t)) < 0.05
    return cal / reps, plug / reps


def cost_table(n: int) -> str:
    lines = ["| k | calibrated a* | MS_seed = 1 (no seed excess seen) | MS_seed = 3 | "
             "MS_seed = 10 |", "|---|---|---|---|---|"]
    for k in (2, 3, 5):
        rest = 1.0 + 0.49 * k
        rest_var = rest**2 / (n - 1) + 1.0 / ((k - 1) * (n - 1))
        cells = []
        for seed_ms in (1.0, 3.0, 10.0):
            ref = SeedReference(seed_ms, k - 1.0, 1.0, rest, rest_var, float(k * n))
            plug = float(special.stdtrit(ref.dof, 0.975))
            cells.append(f"{ref.critical(0.95):.3g} ({plug:.3g})")
        a = SeedReference(1.0, k - 1.0, 1.0, rest, rest_var, float(k * n)).nominal(0.05)
        lines.append(f"| {k} | {a:.4f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=2500)
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    head = ["k"] + [f"σ_a = {a:g}, σ_b = {b:g}" for a, b in DESIGNS]
    sizes = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    plugs = list(sizes)
    streams = iter(np.random.SeedSequence(ROOT).spawn(len(SEEDS) * len(DESIGNS)))
    for k in SEEDS:
        row_c, row_p = [str(k)], [str(k)]
        for a, b in DESIGNS:
            rng = np.random.default_rng(next(streams))
            if k not in args.seeds:
                continue
            c, q = size_cell(k, args.items, a, b, args.reps, rng)
            row_c.append(f"{c:.3f}")
            row_p.append(f"{q:.3f}")
        if k in args.seeds:
            sizes.append("| " + " | ".join(row_c) + " |")
            plugs.append("| " + " | ".join(row_p) + " |")
            print(f"k = {k} done", flush=True)
    print(f"\nsize of the shipped test at 5 %, n = {args.items}, {args.reps} replications\n")
    print("\n".join(sizes))
    print("\nthe plug-in (Satterthwaite's ν, not calibrated)\n")
    print("\n".join(plugs))
    print(f"\ncritical values of the 95 % interval, n = {args.items} (plug-in in brackets)\n")
    print(cost_table(args.items))
    print(f"\nwall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
