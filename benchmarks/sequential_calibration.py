"""Calibration of sequential studies over training seeds in the realistic simulator, with the
designs sized the way a user plans them.

Simulator (``simulate_matrices``, the arrays of ``simulate_outcomes``): two conditions,
seed, item, seed × item, seed × condition and item × condition effects
(``seed_effects="moderate"``, ``item_condition_sd=0.3``), 300 items, one evaluation per item
at noise 0.05. Hypothesis: acc(A) − acc(B) > 0 at noise 0.05, two-sided α = 0.05 as a
study's hypotheses (VERIFIED or FALSIFIED is a rejection).

Planning. The planned effect is the logit shift 0.35 of A over B (δ = 0.057): the fixed
seed-random t needs 9 seeds for 80 % power and 11 for 90 %. For each target power and each
design family (spending function, number of looks, futility) ``size_sequential`` finds the
smallest maximum number of seeds whose equally spaced looks reach the target; the fixed
design beside it is the one sized to the same target. Everything is planned from δ (the
simulator's truth) and π_D, σ_seed and the ICC from a pilot of 400 seeds × 3,000 items of
the same simulator, before any replication is drawn; the replications' seeds are fixed
(``ROOT``, one ``SeedSequence`` child per replication).

Each replication draws the outcome matrices of the largest design's seeds once; every
design analyses their first ``n_k`` seeds at its looks with
:func:`robuststats.stats.sequential.decide_look` (what a study's ``analyse_look`` runs after
gathering the evidence from its outcomes table; tests/stats/test_sequential.py checks that
the two paths decide alike), and each fixed design its ``n_fix`` seeds with the seed-random
t at 95 %.

    python benchmarks/sequential_calibration.py --reps 2000 --workers 1 \\
        --out benchmarks/sequential_calibration.md

``--plan-from truth`` plans from the simulator's exact components (``true_components``)
instead of the pilot, whose σ_seed (0.0353 against 0.0378) and π_D (0.3737 against 0.3691)
made every plan 1.5–3 pp optimistic; ``--seed-dist t3`` (or ``laplace``) draws the
replications' seed effects heavy-tailed at the same SDs, the plan unchanged (the normal
simulator's); ``--spendings obf,hsd(-1)`` keeps only those families:

    python benchmarks/sequential_calibration.py --every --reps 300 --workers 2 \\
        --spendings 'obf,hsd(-1)' --seed-dist t3 --plan-from truth
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from robuststats.stats import (
    Hypothesis,
    estimate_seed_components,
    power_seeds,
    seed_random_test,
    true_effects,
)
from robuststats.stats._seed_random import seed_random_evidence
from robuststats.stats._simulate import SEED_DISTRIBUTIONS, seed_model, simulate_matrices
from robuststats.stats._simulate_truth import true_components
from robuststats.stats.sequential import SequentialOptions, decide_look, size_sequential

ROOT = 20261127
N_ITEMS = 300
LEVEL = 0.05
BASE = dict(seed_effects="moderate", eval_noise=(0.0, LEVEL), item_condition_sd=0.3)
SHIFT = 0.35  # logit shift of A over B under the planned effect
TARGETS = (0.8, 0.9)
#: (spending, looks, futility, first look or None for equal steps), sized to each target
FAMILIES = (("obf", 3, "none", None), ("pocock", 3, "none", None), ("obf", 4, "none", None),
            ("pocock", 4, "none", None), ("hsd(-1)", 4, "none", None),
            ("hsd(-1)", 3, "none", 5), ("obf", 3, "non_binding", None),
            ("obf", 4, "non_binding", None), ("hsd(-1)", 4, "non_binding", None))
#: looks after every seed from the third (``--every``; ``size_sequential(n_looks="every")``)
EVERY_FAMILIES = tuple((spending, "every", futility, 3)
                       for futility in ("none", "non_binding")
                       for spending in ("obf", "hsd(-2)", "hsd(-1)", "pocock"))
H = Hypothesis("H", "accuracy", "A", "B", LEVEL, "greater", 0.0)


def plan_inputs(shift: float, seed_dist: str = "normal", source: str = "pilot"
                ) -> dict[str, float]:
    """δ from the simulator's truth (``true_effects``); π_D, σ_seed and the ICC from a pilot
    of 400 seeds × 3,000 items (``source="pilot"``: a pilot of 40 × 2,000 put σ_seed at 0.031
    against 0.035, and a plan 16 pp above the simulated power of the fixed test), or the
    simulator's exact components (``source="truth"``, ``true_components``: the 400 × 3,000
    pilot put σ_seed at 0.0353 and π_D at 0.3737 where they are 0.0378 and 0.3691, and its
    plans 1.5–3 pp above the simulated power)."""
    if source == "truth":
        c = true_components(**BASE, accuracy_effect=shift, seed_dist=seed_dist,
                            eval_noise_level=LEVEL)
        return c.plan_inputs()
    truth = true_effects(**BASE, accuracy_effect=shift, seed_dist=seed_dist)
    delta = float(truth.loc[truth["eval_noise"] == LEVEL, "estimate"].iloc[0])
    mats = simulate_matrices(seed_model(**BASE, accuracy_effect=shift, seed_dist=seed_dist),
                             400, 3000, np.random.default_rng(ROOT + 1))
    c = estimate_seed_components(mats[0, 1], mats[1, 1])
    return {"effect": delta, "discordance": c.discordance, "seed_sd": c.seed_sd,
            "icc": c.icc}


def _name(target: float, spending: str, n_looks: int, futility: str, first: int | None
          ) -> str:
    fut = " + non-binding futility" if futility == "non_binding" else ""
    start = "" if first is None else f" from {first}"
    looks = "every seed" if n_looks == "every" else f"{n_looks} looks"
    return f"{target:.0%}: {spending}, {looks}{start}{fut}"


def normal_theory(spending: str, n_looks: int, futility: str, target: float,
                  fractions: np.ndarray | None = None) -> tuple[float, float]:
    """E[information | effect] and E[information | 0] over the fixed design's, for the same
    spending at equal information steps with a z statistic (known variance, continuous
    information: the convention of rpact's ``getDesignCharacteristics``): the saving the
    design would have without the few-df penalty. The drift ``η`` reaches ``target``; with
    futility, β = 1 − target is spent under that same ``η`` (the bounds meet at the last
    look)."""
    from scipy import special
    from scipy.optimize import brentq

    from robuststats.stats.sequential import group_sequential_design

    t = np.arange(1, n_looks + 1) / n_looks if fractions is None else fractions
    kw = dict(spending=spending) if futility == "none" else dict(
        spending=spending, sides=1, alpha=0.025, futility=futility, beta=1.0 - target)

    def design(eta: float):  # type: ignore[no-untyped-def]
        extra = {} if futility == "none" else {"drift": eta}
        return group_sequential_design(t, **kw, **extra)

    eta = brentq(lambda e: design(e).operating(e).reject - target, 1.0, 8.0, xtol=1e-8)
    d = design(eta)
    ratio = (eta / (special.ndtri(0.975) + special.ndtri(target))) ** 2
    return (d.operating(eta).expected_fraction * ratio,
            d.operating(0.0).expected_fraction * ratio)


def plan(p: dict[str, float], targets: tuple[float, ...] = TARGETS,
         families: tuple = FAMILIES) -> dict[str, dict]:
    """Every design sized to its target power (``size_sequential``), and the fixed designs."""
    comps = dict(discordance=p["discordance"], seed_sd=p["seed_sd"], icc=p["icc"])
    out: dict[str, dict] = {}
    for target in targets:
        fixed = power_seeds(p["effect"], N_ITEMS, None, target, **comps)
        out[f"{target:.0%}: fixed"] = {"fixed": fixed.n_seeds, "target": target,
                                       "power": fixed.achieved_power, "result": None}
        for spending, n_looks, futility, first in families:
            beta = round(1.0 - target, 6)
            r = size_sequential(p["effect"], N_ITEMS, target, n_looks=n_looks,
                                first_look=first, spending=spending, futility=futility,
                                beta=beta, **comps)
            # with futility, the study file a user writes from the plan: `drift` as printed
            opts = SequentialOptions(r.looks, spending=spending, futility=futility, beta=beta,
                                     effect=p["effect"] if futility != "none" else None,
                                     drift=r.drift)
            out[_name(target, spending, n_looks, futility, first)] = {
                "options": opts, "fixed": r.fixed_seeds, "target": target,
                "power": r.power, "result": r,
                "normal": normal_theory(spending, len(r.looks), futility, target,
                                        np.asarray(r.looks, float) / r.looks[-1]
                                        if n_looks == "every" else None)}
    return out


def _replicate(job: tuple[int, str, float, dict[str, SequentialOptions], dict[str, int], str]
               ) -> list[dict]:
    index, scenario, shift, designs, fixed, seed_dist = job
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(np.random.SeedSequence(ROOT).spawn(index + 1)[index])
    n_max = max([o.looks[-1] for o in designs.values()] + list(fixed.values()))
    model = seed_model(**BASE, accuracy_effect=shift, seed_dist=seed_dist)
    mats = simulate_matrices(model, n_max, N_ITEMS, rng)
    x, y = mats[0, 1], mats[1, 1]  # A and B at noise LEVEL, (seeds, items)
    cache: dict[int, object] = {}

    def evidence(n: int):  # type: ignore[no-untyped-def]
        if n not in cache:
            cache[n] = seed_random_evidence(seed_random_test(x[:n], y[:n]), "")
        return cache[n]

    rows = []
    for name, o in designs.items():
        for look, n in enumerate(o.looks, start=1):
            d = decide_look(H, evidence(n), look, o)
            if d.stops:
                rows.append({"scenario": scenario, "design": name, "decision": d.decision,
                             "seeds": n})
                break
    for name, n in fixed.items():
        ci = evidence(n).interval(0.95)
        decision = "VERIFIED" if ci.low > 0 else "FALSIFIED" if ci.high < 0 else "INCONCLUSIVE"
        rows.append({"scenario": scenario, "design": name, "decision": decision, "seeds": n})
    return rows


def run(reps: int, workers: int, shift: float = SHIFT,
        targets: tuple[float, ...] = TARGETS, true_shift: float | None = None,
        families: tuple = FAMILIES, seed_dist: str = "normal", source: str = "pilot",
        null_only: bool = False, offset: int = 0) -> tuple[pd.DataFrame, dict, dict]:
    """Raw outcomes of ``reps`` replications per scenario, the plan inputs and the designs
    (the null and the planned effect at logit ``shift``; with ``true_shift``, only an effect
    at that logit shift, the designs still planned for ``shift``). ``seed_dist`` draws the
    replications' seed effects from a heavy-tailed law of the same SD; the plan is always
    the normal simulator's, as a user would plan from the same σ_seed; ``source`` is
    :func:`plan_inputs`'. ``null_only`` simulates the null alone, with replications
    ``offset``, ``offset + 1``, ... (a stream of its own beside the first run's)."""
    p = plan_inputs(shift, source=source)
    designs = plan(p, targets, families)
    seq = {k: v["options"] for k, v in designs.items() if v["result"] is not None}
    fixed = {k: v["fixed"] for k, v in designs.items() if v["result"] is None}
    scenarios = {"null": 0.0, "effect": shift} if true_shift is None else \
        {f"effect at logit {true_shift:g}": true_shift}
    if null_only:
        scenarios = {"null": 0.0}
    jobs = [(i, s, value, seq, fixed, seed_dist)
            for j, (s, value) in enumerate(scenarios.items())
            for i in range(offset + reps * j, offset + reps * (j + 1))]
    rows: list[dict] = []
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for i, cell in enumerate(pool.map(_replicate, jobs, chunksize=16)):
            rows += cell
            if i % 500 == 0:
                print(f"{i}/{len(jobs)} {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    return pd.DataFrame(rows), p, designs


def table(raw: pd.DataFrame, designs: dict) -> pd.DataFrame:
    out = []
    for (scenario, name), g in raw.groupby(["scenario", "design"], sort=False):
        d = designs[name]
        r = d["result"]
        if scenario == "null":
            rate = g["decision"].isin(["VERIFIED", "FALSIFIED"]).mean()
            planned = 0.05 if r is None else r.type1_error
            e_plan = d["fixed"] if r is None else r.expected_seeds_null
        else:
            rate = (g["decision"] == "VERIFIED").mean()
            planned = d["power"]
            e_plan = d["fixed"] if r is None else r.expected_seeds_effect
        mean = g["seeds"].mean()
        out.append({"scenario": scenario, "design": name,
                    "looks": "-" if r is None else ",".join(map(str, r.looks)),
                    "reps": len(g), "rejection rate": round(rate, 4),
                    "MC SE": round(float(np.sqrt(rate * (1 - rate) / len(g))), 4),
                    "planned": round(planned, 4), "mean seeds": round(mean, 3),
                    "planned mean seeds": round(e_plan, 3), "fixed seeds": d["fixed"],
                    "seeds saved": round(1 - mean / d["fixed"], 3),
                    "planned saved": round(1 - e_plan / d["fixed"], 3),
                    "normal-theory saved": None if r is None else
                    round(1 - d["normal"][scenario == "null"], 3)})
    return pd.DataFrame(out)


def futility_check(reps: int) -> str:
    """Why the futility designs' power falls short of the plan: the 80 % O'Brien–Fleming-like
    3-look design under the planned effect. Per look before the last: the chance of a
    statistic at or below the plan's futility bound (held fixed) against the plan's marginal
    (the seed-random t's, ``power_seeds``), and at or below the bound the study recomputes
    from the look's standard error, with their correlation. Then the power of the same
    simulated statistics with the study's bounds, with the plan's bounds held fixed, and
    without futility, beside the planner's."""
    from scipy import special

    from robuststats.stats.sequential import power_sequential

    p = plan_inputs(SHIFT)
    comps = dict(discordance=p["discordance"], seed_sd=p["seed_sd"], icc=p["icc"])
    name = _name(0.8, "obf", 3, "non_binding", None)
    d = plan(p, (0.8,))[name]
    r = d["result"]
    # the rule of a study file without `drift`: futility bounds projected from each look's
    # standard error
    opts = dataclasses.replace(d["options"], drift=None)
    k_max = len(opts.looks)
    model = seed_model(**BASE, accuracy_effect=SHIFT)
    rng = np.random.default_rng(ROOT + 2)  # a stream of its own
    z = np.zeros((reps, k_max))
    bound = np.zeros((reps, k_max))
    upper = np.zeros(k_max)
    warnings.simplefilter("ignore")
    for i in range(reps):
        mats = simulate_matrices(model, opts.looks[-1], N_ITEMS, rng)
        for k, n in enumerate(opts.looks):
            ev = seed_random_evidence(seed_random_test(mats[0, 1][:n], mats[1, 1][:n]), "")
            look = decide_look(H, ev, k + 1, opts)
            z[i, k], bound[i, k], upper[k] = (look.statistic_z, look.futility_bound,
                                              look.efficacy_bound)
    lines = [f"{name}, looks {opts.looks}, {reps} replications under the planned effect"]
    for k in range(k_max - 1):
        a = float(r.futility_bound[k])
        planned = 1.0 - power_seeds(p["effect"], N_ITEMS, opts.looks[k], None,
                                    alpha=float(special.ndtr(-a)), alternative="greater",
                                    **comps).achieved_power
        lines.append(
            f"look {k + 1} ({opts.looks[k]} seeds): P(z <= plan's bound {a:.3f}) simulated "
            f"{(z[:, k] <= a).mean():.4f}, planned {planned:.4f}; P(z <= the study's bound) "
            f"{(z[:, k] <= bound[:, k]).mean():.4f}, the study's bound mean "
            f"{bound[:, k].mean():.3f}, correlation with z "
            f"{np.corrcoef(z[:, k], bound[:, k])[0, 1]:.2f}")

    def power(low: np.ndarray) -> float:
        alive, hit = np.ones(reps, bool), np.zeros(reps, bool)
        for k in range(k_max):
            hit |= alive & (z[:, k] >= upper[k])
            alive &= z[:, k] < upper[k]
            if k < k_max - 1:
                alive &= z[:, k] > low[:, k]
        return float(hit.mean())

    plan_low = np.tile(np.asarray(r.futility_bound, dtype=float), (reps, 1))
    none = power_sequential(p["effect"], opts.looks, N_ITEMS, spending="obf", **comps)
    lines.append(
        f"power: the study's bounds {power(bound):.4f}; the plan's bounds held fixed "
        f"{power(plan_low):.4f} (planned {r.power:.4f}); no futility "
        f"{power(np.full((reps, k_max), -np.inf)):.4f} (planned {none.power:.4f})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--shift", type=float, default=SHIFT,
                    help=f"logit shift of the planned effect (default {SHIFT})")
    ap.add_argument("--targets", default=",".join(map(str, TARGETS)),
                    help="target powers, comma-separated (default 0.8,0.9)")
    ap.add_argument("--true-shift", type=float, default=None, metavar="X",
                    help="simulate only an effect at logit shift X, the designs planned for "
                         "--shift (an effect larger or smaller than planned)")
    ap.add_argument("--every", action="store_true",
                    help="the designs with a look after every seed (EVERY_FAMILIES)")
    ap.add_argument("--seed-dist", choices=SEED_DISTRIBUTIONS, default="normal",
                    help="distribution of the simulated seed effects, each scaled to its SD "
                         "(the plan is the normal simulator's either way)")
    ap.add_argument("--plan-from", choices=("pilot", "truth"), default="pilot",
                    help="plan inputs from a 400-seed pilot (as first run) or from the "
                         "simulator's exact components (true_components)")
    ap.add_argument("--null-only", type=int, default=None, metavar="OFFSET",
                    help="simulate only the null, from replication OFFSET on (a check of "
                         "type I error independent of the first run's replications)")
    ap.add_argument("--spendings", default=None, metavar="S,S",
                    help="only these spending functions (comma-separated, e.g. obf,hsd(-1))")
    ap.add_argument("--futility-check", type=int, default=0, metavar="REPS",
                    help="only the check of the futility bound's marginals (futility_check)")
    args = ap.parse_args()
    if args.futility_check:
        print(futility_check(args.futility_check))
        return
    t0 = time.time()
    load = os.getloadavg()[0]
    targets = tuple(float(x) for x in args.targets.split(","))
    families = EVERY_FAMILIES if args.every else FAMILIES
    if args.spendings is not None:
        keep = args.spendings.split(",")
        bad = [x for x in keep if x not in {f[0] for f in families}]
        if bad:
            ap.error(f"--spendings: unknown {', '.join(bad)}")
        families = tuple(f for f in families if f[0] in keep)
    raw, p, designs = run(args.reps, args.workers, args.shift, targets, args.true_shift,
                          families, args.seed_dist, args.plan_from,
                          args.null_only is not None, args.null_only or 0)
    tab = table(raw, designs)
    truth = "" if args.true_shift is None else (
        f"; simulated at logit shift {args.true_shift} (true δ "
        f"{plan_inputs(args.true_shift)['effect']:.4f}); 'planned' columns are the plan's "
        "at the planned effect")
    if args.seed_dist != "normal":
        own = plan_inputs(args.true_shift or args.shift, args.seed_dist, "truth")
        truth += (f"; seed effects {args.seed_dist} (same SDs), whose own exact "
                  f"components are {own}")
    source = ("pilot 400 seeds x 3000 items" if args.plan_from == "pilot"
              else "the simulator's exact components")
    text = (f"plan inputs (true δ at logit shift {args.shift}; {source}): {p}{truth}\n\n"
            + tab.to_markdown(index=False)
            + f"\n\n{args.reps} replications per scenario; {time.time() - t0:.0f} s with "
              f"{args.workers} worker(s); load average {load:.2f} at the start, "
              f"{os.getloadavg()[0]:.2f} at the end\n")
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
