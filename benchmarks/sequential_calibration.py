"""Calibration of sequential studies over training seeds in the realistic simulator.

Simulator (``simulate_matrices``, the arrays of ``simulate_outcomes``): two conditions,
seed, item, seed × item, seed × condition and item × condition effects
(``seed_effects="moderate"``, ``item_condition_sd=0.3``), 300 items, 8 seeds, looks after
3, 5 and 8 seeds, one evaluation per item at noise 0.05. Hypothesis: acc(A) − acc(B) > 0 at noise 0.05, two-sided
α = 0.05 as a study's hypotheses (VERIFIED or FALSIFIED is a rejection). Each replication
is decided at every look by :func:`robuststats.stats.sequential.decide_look` (what a study's
``analyse_look`` runs after gathering the evidence from its outcomes table) on the
seed-random t of the first ``n_k`` seeds' outcome matrices; tests/stats/test_sequential.py
checks that the two paths decide alike.

The plan (``power_sequential``) takes δ from the simulator's truth and π_D, σ_seed and the
ICC from a pilot of 400 seeds × 3,000 items of the same simulator.

    python benchmarks/sequential_calibration.py --reps 2000 --workers 16 \\
        --out benchmarks/sequential_calibration.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from robuststats.stats import (
    Hypothesis,
    estimate_seed_components,
    seed_random_test,
    true_effects,
)
from robuststats.stats._seed_random import seed_random_evidence
from robuststats.stats._simulate import seed_model, simulate_matrices
from robuststats.stats.sequential import SequentialOptions, decide_look, power_sequential

ROOT = 20261127
LOOKS = (3, 5, 8)
N_ITEMS = 300
LEVEL = 0.05
BASE = dict(seed_effects="moderate", n_noise_seeds=1, eval_noise=(0.0, LEVEL),
            item_condition_sd=0.3)
SCENARIOS = {"null": 0.0, "effect": 0.30}  # logit shift of A over B
H = Hypothesis("H", "accuracy", "A", "B", LEVEL, "greater", 0.0)


def plan_inputs(shift: float) -> dict[str, float]:
    """δ from the simulator's truth (``true_effects``); π_D, σ_seed and the ICC from a pilot
    of 400 seeds × 3,000 items (a pilot of 40 × 2,000 put σ_seed at 0.031 against 0.038,
    and the plan 16 pp above the simulated power of the fixed test)."""
    params = {k: v for k, v in BASE.items() if k != "n_noise_seeds"}
    truth = true_effects(**params, accuracy_effect=shift)
    delta = float(truth.loc[truth["eval_noise"] == LEVEL, "estimate"].iloc[0])
    mats = simulate_matrices(seed_model(**params, accuracy_effect=shift), 400, 3000,
                             np.random.default_rng(ROOT + 1))
    c = estimate_seed_components(mats[0, 1], mats[1, 1])
    return {"effect": delta, "discordance": c.discordance, "seed_sd": c.seed_sd,
            "icc": c.icc}


def designs(effect: float) -> dict[str, SequentialOptions]:
    return {"obf": SequentialOptions(LOOKS, spending="obf"),
            "pocock": SequentialOptions(LOOKS, spending="pocock"),
            "obf + non-binding futility": SequentialOptions(
                LOOKS, spending="obf", futility="non_binding", beta=0.2, effect=effect)}


def _replicate(job: tuple[int, str, float, float]) -> list[dict]:
    index, scenario, shift, effect = job
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(np.random.SeedSequence(ROOT).spawn(index + 1)[index])
    model = seed_model(**{k: v for k, v in BASE.items() if k != "n_noise_seeds"},
                       accuracy_effect=shift)
    mats = simulate_matrices(model, LOOKS[-1], N_ITEMS, rng)
    x, y = mats[0, 1], mats[1, 1]  # A and B at noise LEVEL, (seeds, items)
    opts = designs(effect)
    outcome: dict[str, tuple[str, int]] = {}
    for look, n in enumerate(LOOKS, start=1):
        ev = seed_random_evidence(seed_random_test(x[:n], y[:n]), "")
        for name, o in opts.items():
            if name not in outcome:
                d = decide_look(H, ev, look, o)
                if d.stops:
                    outcome[name] = (d.decision, n)
        if len(outcome) == len(opts):
            break
    return [{"scenario": scenario, "design": name, "decision": outcome[name][0],
             "seeds": outcome[name][1]} for name in opts]


def run(reps: int, workers: int) -> tuple[pd.DataFrame, dict]:
    plans = {s: plan_inputs(shift) for s, shift in SCENARIOS.items()}
    effect = plans["effect"]["effect"]
    jobs = [(i, s, shift, effect) for s, shift in SCENARIOS.items()
            for i in range(reps * list(SCENARIOS).index(s), reps * (list(SCENARIOS).index(s) + 1))]
    rows: list[dict] = []
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for i, cell in enumerate(pool.map(_replicate, jobs, chunksize=8)):
            rows += cell
            if i % 500 == 0:
                print(f"{i}/{len(jobs)} {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    return pd.DataFrame(rows), plans


def table(raw: pd.DataFrame, plans: dict) -> pd.DataFrame:
    p = plans["effect"]
    out = []
    for (scenario, name), g in raw.groupby(["scenario", "design"], sort=False):
        opts = designs(p["effect"])[name]
        plan = power_sequential(p["effect"], LOOKS, N_ITEMS, discordance=p["discordance"],
                                seed_sd=p["seed_sd"], icc=p["icc"], alpha=0.05,
                                spending=opts.spending, futility=opts.futility, beta=0.2)
        if scenario == "null":
            rate = g["decision"].isin(["VERIFIED", "FALSIFIED"]).mean()
            planned, e_plan = plan.type1_error, plan.expected_seeds_null
        else:
            rate = (g["decision"] == "VERIFIED").mean()
            planned, e_plan = plan.power, plan.expected_seeds_effect
        se = np.sqrt(rate * (1 - rate) / len(g))
        out.append({"scenario": scenario, "design": name, "reps": len(g),
                    "rejection rate": round(rate, 4), "MC SE": round(se, 4),
                    "planned": round(planned, 4), "mean seeds": round(g["seeds"].mean(), 3),
                    "planned mean seeds": round(e_plan, 3),
                    "fixed seeds, equal power": plan.fixed_seeds,
                    "seeds saved vs fixed": round(1 - g["seeds"].mean() / plan.fixed_seeds, 3)
                    if scenario == "effect" else None})
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    t0 = time.time()
    raw, plans = run(args.reps, args.workers)
    tab = table(raw, plans)
    text = (f"plan inputs (true δ; pilot 400 seeds x 3000 items): {plans}\n\n"
            + tab.to_markdown(index=False)
            + f"\n\n{args.reps} replications per scenario; {time.time() - t0:.0f} s with "
              f"{args.workers} workers\n")
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
