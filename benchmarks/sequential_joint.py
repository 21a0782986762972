"""The joint law of a sequential plan's looks: the few-df seed-random t's at nested seeds
against the normal recursion, in the realistic simulator of docs/statistics.md §11.

For each design the study's look statistics (the z-equivalent of the calibrated one-sided
p-value, ``decide_look``'s ``statistic_z``) are simulated at every look of ``reps``
replications under the planned effect (logit shift 0.35, 300 items, the simulator and plan
inputs of ``sequential_calibration.py``). The simulated power (first crossing of the plan's
bounds, futility obeyed) is then compared with two computations that are given the
*simulated* marginal crossing probabilities of each look, so that only the joint law
differs: the normal recursion with each bound moved to its marginal (the planner before),
and the nested t's of :func:`robuststats.stats.sequential.nested_t_paths` (the planner
now). The plan's own power (``power_sequential``, marginals from ``power_seeds``) is shown
beside them.

    python benchmarks/sequential_joint.py --reps 3000 --out benchmarks/sequential_joint.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
from scipy import special

from robuststats.stats import power_seeds, seed_random_test
from robuststats.stats._seed_random import seed_random_evidence
from robuststats.stats._simulate import seed_model, simulate_matrices
from robuststats.stats.sequential import (
    SequentialOptions,
    decide_look,
    nested_t_paths,
    power_sequential,
)
from robuststats.stats.sequential._power import _first_crossings
from robuststats.stats.sequential._recursion import crossing

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import sequential_calibration as cal

PLAN = {"discordance": 0.374, "seed_sd": 0.0353, "icc": 0.0162}
EFFECT = 0.0574
#: (spending, looks, futility): the 80 % designs of the calibration with early looks
DESIGNS = (("pocock", (3, 6, 8, 11), "none"), ("hsd(-1)", (3, 5, 8, 10), "non_binding"),
           ("obf", (3, 6, 9), "non_binding"), ("obf", (3, 6, 9), "none"))


def simulate(reps: int, n_max: int) -> dict[int, np.ndarray]:
    """``statistic_z`` at every seed count 2..n_max of ``reps`` replications, (reps,) each."""
    warnings.simplefilter("ignore")
    h = cal.H
    out = {n: np.empty(reps) for n in range(2, n_max + 1)}
    opts = SequentialOptions((n_max - 1, n_max))
    for i in range(reps):
        rng = np.random.default_rng(np.random.SeedSequence(cal.ROOT).spawn(i + 1)[i])
        mats = simulate_matrices(seed_model(**cal.BASE, accuracy_effect=cal.SHIFT), n_max,
                                 cal.N_ITEMS, rng)
        x, y = mats[0, 1], mats[1, 1]
        for n in out:
            ev = seed_random_evidence(seed_random_test(x[:n], y[:n]), "")
            out[n][i] = decide_look(h, ev, 1, opts).statistic_z
    return out


def check(z: dict[int, np.ndarray], spending: str, looks: tuple[int, ...], futility: str
          ) -> dict[str, float]:
    """Simulated power against the recursion and the nested t's given the simulated
    marginals, and the plan."""
    r = power_sequential(EFFECT, looks, cal.N_ITEMS, spending=spending, futility=futility,
                         beta=0.2, **PLAN)
    b = r.efficacy_bound
    a = np.where(np.isnan(r.futility_bound), -np.inf, r.futility_bound)
    a[-1] = -np.inf
    zs = np.column_stack([z[n] for n in looks])
    alive, hit = np.ones(len(zs), dtype=bool), np.zeros(len(zs), dtype=bool)
    for k in range(len(looks)):
        up = alive & (zs[:, k] >= b[k])
        hit |= up
        alive &= ~up & (zs[:, k] > a[k])
    m_up = (zs >= b).mean(axis=0)
    m_fut = np.array([(zs[:, k] > a[k]).mean() if np.isfinite(a[k]) else np.nan
                      for k in range(len(looks))])
    fixed = [power_seeds(EFFECT, cal.N_ITEMS, n, None, **PLAN) for n in looks]
    se = np.array([f.standard_error for f in fixed])
    t = (1 / se**2) / (1 / se[-1] ** 2)
    eta = EFFECT / se[-1]

    def moved(m):  # type: ignore[no-untyped-def]
        return eta * np.sqrt(t) - special.ndtri(np.clip(m, 1e-12, 1 - 1e-12))

    low = np.where(np.isnan(m_fut), -np.inf, moved(np.nan_to_num(m_fut, nan=0.5)))
    low[-1] = -np.inf
    rec = float(crossing(t, moved(m_up), low, eta).upper.sum())
    nested, _ = _first_crossings(nested_t_paths(fixed[-1], looks, cal.N_ITEMS, EFFECT),
                                 m_up, m_fut)
    return {"simulated": float(hit.mean()),
            "se": float(np.sqrt(hit.mean() * (1 - hit.mean()) / len(zs))),
            "recursion": rec, "nested_t": nested, "plan": r.power}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3000)
    ap.add_argument("--out")
    args = ap.parse_args()
    t0 = time.time()
    z = simulate(args.reps, max(max(d[1]) for d in DESIGNS))
    lines = ["| design | looks | simulated power % (MC SE) | normal recursion, simulated "
             "marginals % | nested t's, simulated marginals % | plan % |",
             "|:--|:--|--:|--:|--:|--:|"]
    for spending, looks, futility in DESIGNS:
        c = check(z, spending, looks, futility)
        fut = " + non-binding futility" if futility != "none" else ""
        lines.append(f"| {spending}{fut} | {','.join(map(str, looks))} | "
                     f"{100 * c['simulated']:.1f} ({100 * c['se']:.1f}) | "
                     f"{100 * c['recursion']:.1f} | {100 * c['nested_t']:.1f} | "
                     f"{100 * c['plan']:.1f} |")
    text = "\n".join(lines) + (f"\n\n{args.reps} replications, {time.time() - t0:.0f} s.\n")
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
