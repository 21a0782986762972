"""Calibration of seed-random intervals and tests over the grid of the seeds design.

Grid: seed effects {none, small, moderate, large} × seeds {3, 5, 10} × items
{100, 300, 1319}; accuracy difference and retention difference at the noisy level
(simulator: ``robuststats.stats._simulate``; methods: ``robuststats.stats._seed_calibration``).
Every cell has its own random stream (``SeedSequence(ROOT).spawn``), so a cell's numbers do
not depend on which other cells run or on the number of workers.

    python benchmarks/seed_calibration.py --reps 2000 --boot-reps 200 --workers 2 \\
        --out benchmarks/seed_calibration.md
    python benchmarks/seed_calibration.py --verdicts --reps 1000   # wrong-decision rates
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np
import pandas as pd

from robuststats.stats._seed_calibration import (
    calibrate_cell,
    calibrate_verdicts,
    calibration_table,
)

ROOT = 20250808
PRESETS = ("none", "small", "moderate", "large")
SEEDS = (2, 3, 5, 10)
ITEMS = (100, 300, 1319)


def _cell(args):
    index, preset, k, n, reps, boot_reps, methods, n_resamples, items = args
    rng = np.random.default_rng(np.random.SeedSequence(ROOT).spawn(index + 1)[index])
    return calibrate_cell(preset, k, n, reps=reps, boot_reps=boot_reps, rng=rng,
                          methods=methods, n_resamples=n_resamples, **items)


def _run_cells(fn, jobs, workers, grid, on_cell=None) -> list[dict]:
    """Run ``fn`` on every job in a process pool; rows in the grid's order."""
    rows: list[dict] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for future in as_completed([pool.submit(fn, job) for job in jobs]):
            cell = future.result()
            rows += cell
            r = cell[0]
            print(f"{r['seed_effects']:>8} k={r['n_seeds']:<2} n={r['n_items']:<4} done",
                  file=sys.stderr, flush=True)
            if on_cell is not None:
                on_cell(rows)
    order = {(pre, k, n): i for i, (pre, k, n) in enumerate(grid)}
    rows.sort(key=lambda r: order[(r["seed_effects"], r["n_seeds"], r["n_items"])])
    return rows


def _verdict_cell(args):
    index, preset, k, n, reps = args
    rng = np.random.default_rng(np.random.SeedSequence(ROOT + 1).spawn(index + 1)[index])
    return calibrate_verdicts(preset, k, n, reps=reps, rng=rng)


def verdict_markdown(table: pd.DataFrame) -> str:
    """One row per cell, one column per (scenario, quantity): the wrong-decision rate."""
    table = table.assign(column=table["scenario"] + " — " + table["quantity"].map(
        {"difference": "acc.", "retention_difference": "ret."}))
    wide = table.pivot_table(index=["seed_effects", "n_seeds", "n_items"], columns="column",
                             values="wrong_rate", sort=False)
    head = ["seed effects", "k", "n", *wide.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (preset, k, n), row in wide.iterrows():
        lines.append("| " + " | ".join([preset, str(k), str(n),
                                        *(f"{v:.3f}" for v in row)]) + " |")
    reps = int(table["reps"].iloc[0])
    worst = table.loc[table["wrong_rate"].idxmax()]
    lines.append(f"\nreplications per cell: {reps}; largest rate {worst['wrong_rate']:.3f} "
                 f"(MC SE {worst['wrong_rate_se']:.4f}): {worst['scenario']}, "
                 f"{worst['quantity']}, {worst['seed_effects']} k={worst['n_seeds']} "
                 f"n={worst['n_items']}")
    return "\n".join(lines) + "\n"


def markdown(table: pd.DataFrame) -> str:
    """Wide markdown tables: one row per cell, one column group per method."""
    out = []
    for quantity in ("difference", "retention_difference"):
        sub = table[table["quantity"] == quantity]
        methods = [m for m in ("satterthwaite", "seed-boot-t", "two-way-bca",
                               "clustered-mcnemar") if m in set(sub["method"])]
        head = ["seed effects", "k", "n"]
        for m in methods:
            head += [f"{m} size"] if m == "clustered-mcnemar" else [f"{m} cov", f"{m} width"]
        if "satterthwaite" in methods:
            head += ["satterthwaite size", "satterthwaite power"]
        if "clustered-mcnemar" in methods:
            head += ["clustered-mcnemar power"]
        out.append(f"\n{quantity.replace('_', ' ')} (a − b at the noisy level)\n")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for (preset, k, n), cell in sub.groupby(["seed_effects", "n_seeds", "n_items"],
                                                sort=False):
            by = cell.set_index("method")
            vals = [preset, str(k), str(n)]
            for m in methods:
                r = by.loc[m]
                if m == "clustered-mcnemar":
                    vals.append(f"{r['size']:.3f}")
                else:
                    vals += [f"{r['coverage']:.3f}", f"{r['mean_width']:.3f}"]
            if "satterthwaite" in methods:
                s = by.loc["satterthwaite"]
                vals += [f"{s['size']:.3f}", f"{s['power']:.3f}"]
            if "clustered-mcnemar" in methods:
                vals.append(f"{by.loc['clustered-mcnemar', 'power']:.3f}")
            out.append("| " + " | ".join(vals) + " |")
        reps = sub.groupby("method")["reps"].first().to_dict()
        out.append("\nreplications per cell: " + ", ".join(f"{m} {r}" for m, r in reps.items()))
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=2000, help="replications (t methods)")
    p.add_argument("--boot-reps", type=int, default=200, help="replications (bootstraps)")
    p.add_argument("--n-resamples", type=int, default=1000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--presets", nargs="+", default=list(PRESETS))
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    p.add_argument("--items", nargs="+", type=int, default=list(ITEMS))
    p.add_argument("--methods", nargs="+",
                   default=["satterthwaite", "seed-boot-t", "two-way-bca"])
    p.add_argument("--out", default=None, help="markdown file (default: stdout only)")
    p.add_argument("--csv", default=None, help="also write the long table as CSV")
    p.add_argument("--item-condition-sd", type=float, default=0.0,
                   help="item x condition SD (logit): items that favour one procedure")
    p.add_argument("--item-robustness-sd", type=float, default=0.0,
                   help="item-specific noise sensitivity SD (logit, at the largest level)")
    p.add_argument("--verdicts", action="store_true",
                   help="wrong-decision rates of the verdicts (boundary margins, equivalence)")
    args = p.parse_args(argv)
    grid = list(itertools.product(PRESETS, SEEDS, ITEMS))
    if args.verdicts:
        return _verdicts(args, grid)
    items = dict(item_condition_sd=args.item_condition_sd,
                 item_robustness_sd=args.item_robustness_sd)
    jobs = [(i, pre, k, n, args.reps, args.boot_reps, tuple(args.methods), args.n_resamples,
             items) for i, (pre, k, n) in enumerate(grid)
            if pre in args.presets and k in args.seeds and n in args.items]
    t0 = time.perf_counter()

    def save(rows: list[dict]) -> None:  # partial results survive an interrupted run
        if args.csv:
            calibration_table(rows).to_csv(args.csv, index=False)

    rows = _run_cells(_cell, jobs, args.workers, grid, save)
    table = calibration_table(rows)
    return _report(markdown(table), table, args, t0)


def _verdicts(args: argparse.Namespace, grid: list) -> int:
    jobs = [(i, pre, k, n, args.reps) for i, (pre, k, n) in enumerate(grid)
            if pre in args.presets and k in args.seeds and n in args.items]
    t0 = time.perf_counter()
    rows = _run_cells(_verdict_cell, jobs, args.workers, grid)
    table = pd.DataFrame(rows)
    return _report(verdict_markdown(table), table, args, t0)


def _report(text: str, table: pd.DataFrame, args: argparse.Namespace, t0: float) -> int:
    """Print the markdown with the wall time; write it (--out) and the long table (--csv)."""
    text += f"\nwall time {time.perf_counter() - t0:.0f} s, {args.workers} workers\n"
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
