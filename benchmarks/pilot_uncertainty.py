"""Planning from a pilot that is an estimate: the seeds a plan asks for, and the power they
really have, with the pilot's point estimate of the seed SD and with its one-sided upper
confidence bound (``power --pilot-bound Q``, ``SeedComponents.upper_seed_sd``).

Each replication draws a pilot of ``k`` seeds × 300 items (k = 3, 5, 10, 40) from the
realistic simulator of docs/statistics.md §11 (moderate seed effects, item × condition SD
0.3, logit shift 0.35, noise 0.05), estimates π_D, σ_seed and the ICC from it
(``estimate_seed_components``), and sizes the seeds for 80 % power at the true planned
effect δ = 0.0574 over 300 items (``power_seeds``), once with σ̂_seed and once with its
``Q`` upper bound. The power each plan really has is ``power_seeds`` at the truth (π_D
0.374, σ_seed 0.0353, ICC 0.0162 from a pilot of 400 seeds × 3,000 items). A plan that
cannot reach 80 % with any number of seeds up to 60 counts as "none".

    python benchmarks/pilot_uncertainty.py --reps 400 --out benchmarks/pilot_uncertainty.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

from robuststats.errors import InputError
from robuststats.stats import estimate_seed_components, power_seeds
from robuststats.stats._simulate import seed_model, simulate_matrices

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sequential_calibration as cal

TRUTH = {"discordance": 0.374, "seed_sd": 0.0353, "icc": 0.0162}
EFFECT, TARGET, N_ITEMS, MAX_SEEDS = 0.0574, 0.8, 300, 60
PILOTS = (3, 5, 10, 40)


def _seeds(sd: float, comps) -> int | None:  # type: ignore[no-untyped-def]
    try:
        n = power_seeds(EFFECT, N_ITEMS, None, TARGET, discordance=comps.discordance,
                        seed_sd=sd, icc=comps.icc).n_seeds
    except InputError:
        return None
    return n if n <= MAX_SEEDS else None


def run(reps: int, bound: float) -> pd.DataFrame:
    warnings.simplefilter("ignore")
    model = seed_model(**cal.BASE, accuracy_effect=cal.SHIFT)
    rows = []
    for k in PILOTS:
        rng = np.random.default_rng(np.random.SeedSequence([cal.ROOT, k]))
        for _ in range(reps):
            m = simulate_matrices(model, k, N_ITEMS, rng)
            comps = estimate_seed_components(m[0, 1], m[1, 1])
            for rule, sd in (("estimate", comps.seed_sd),
                             (f"upper {bound:g}", comps.upper_seed_sd(bound))):
                n = _seeds(sd, comps)
                power = np.nan if n is None else power_seeds(
                    EFFECT, N_ITEMS, n, None, **TRUTH).achieved_power
                rows.append({"pilot seeds": k, "plan": rule, "seeds": n, "power": power,
                             "variance ratio": (sd / TRUTH["seed_sd"]) ** 2})
    return pd.DataFrame(rows)


def table(raw: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (k, rule), g in raw.groupby(["pilot seeds", "plan"], sort=False):
        ok = g.dropna(subset=["power"])
        out.append({"pilot seeds": k, "plan": rule, "reps": len(g),
                    "median σ²_seed / truth": round(float(g["variance ratio"].median()), 2),
                    "no plan (> 60 seeds) %": round(100 * g["power"].isna().mean(), 1),
                    "median seeds": float(ok["seeds"].median()) if len(ok) else np.nan,
                    "mean power %": round(100 * float(ok["power"].mean()), 1),
                    "power ≥ 80 % share %": round(100 * float((ok["power"] >= TARGET).mean()), 1),
                    "power < 75 % share %": round(100 * float((ok["power"] < 0.75).mean()), 1)})
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--bound", type=float, default=0.8)
    ap.add_argument("--out")
    args = ap.parse_args()
    t0, load = time.time(), os.getloadavg()[0]
    fixed = power_seeds(EFFECT, N_ITEMS, None, TARGET, **TRUTH)
    text = (f"truth: {TRUTH}, δ = {EFFECT}, {N_ITEMS} items: the fixed design needs "
            f"{fixed.n_seeds} seeds (power {fixed.achieved_power:.3f})\n\n"
            + table(run(args.reps, args.bound)).to_markdown(index=False)
            + f"\n\n{args.reps} pilots per size; {time.time() - t0:.0f} s, load average "
              f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
