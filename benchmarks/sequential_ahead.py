"""Wall time of a sequential study with a look after every seed: the barrier path against
the run-ahead path, side by side, with the same workers and the same outcomes.

A small study of the builtin trainer on the embedded arithmetic task (two conditions, a
look after every seed from 2, clean and 5 % noisy cells) runs from an empty run directory
with ``sequential.run_ahead: 0`` (each look runs its seeds' cells in a new pool and waits
for all of them) and with the key unset (the default from ``--workers``: 1 seed ahead with
2 workers and 2 conditions), interleaved over the repeats. Printed per run: the path, wall
seconds, the look it stopped at, the seeds trained ahead and the load average (1 min)
before and after; then the medians, and whether every run made the same looks table (it
must: the decisions are a function of the stored outcomes of each look's seeds).

Run: ``python benchmarks/sequential_ahead.py [--seeds 6] [--steps 100] [--repeats 2]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import pandas as pd  # noqa: E402

from robuststats.study import StudySpec, run_study  # noqa: E402


def _spec(seeds: int, steps: int, items: int, run_ahead: int | None) -> StudySpec:
    sequential = {"looks": "every", "spending": "obf", "drive": ["H1"]}
    if run_ahead is not None:
        sequential["run_ahead"] = run_ahead
    return StudySpec.from_dict({
        "name": "ahead_bench", "version": 1,
        "task": {"name": "arithmetic", "params": {"seed": 0, "n_items": items,
                                                  "n_train": 1000}},
        "model": {}, "trainer": {"name": "builtin", "params": {"steps": steps}},
        "conditions": {"E8a": {"train_noise": None},
                       "E8c": {"train_noise": {"scale": 0.05, "kind": "relative_gaussian",
                                               "phases": "forward", "ops": "matmul_only"}}},
        "evaluation": {"noise_levels": [0, 0.05], "kind": "relative_gaussian",
                       "ops": "matmul_only", "noise_seeds": 1, "split": "test",
                       "n_items": items},
        "seeds": seeds,
        "hypotheses": [{"id": "H1", "metric": "accuracy", "a": "E8c", "b": "E8a",
                        "eval_noise": 0.05, "relation": "greater", "margin": 0}],
        "sequential": sequential,
        "analysis": {"n_resamples": 200, "multiplicity": "none"},
    })


def _once(spec: StudySpec, workers: int) -> tuple[float, pd.DataFrame, dict, float, float]:
    tmp = Path(tempfile.mkdtemp(prefix="ahead-bench-"))
    try:
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        run = run_study(spec, out=tmp / "results", runs=tmp / "runs", workers=workers,
                        progress=False)
        seconds = time.perf_counter() - start
        load_after = os.getloadavg()[0]
        looks = pd.read_csv(run.version.path / "sequential_looks.csv")
        return seconds, looks, run.version.manifest["sequential"], load_before, load_after
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    variants = {"barrier (run_ahead 0)": 0, "run-ahead (default)": None}
    times: dict[str, list[float]] = {name: [] for name in variants}
    tables: list[pd.DataFrame] = []
    print(f"{args.seeds} seeds, looks after every seed from 2, 2 conditions × 2 cells, "
          f"{args.steps} training steps, {args.items} items, --workers {args.workers}; "
          f"{os.cpu_count()} CPUs")
    print("| run | path | seconds | stopped at look | seeds used | run_ahead | trained ahead "
          "| load before | load after |")
    print("|--:|:--|--:|--:|--:|--:|:--|--:|--:|")
    for r in range(args.repeats):
        for name, ahead in variants.items():
            spec = _spec(args.seeds, args.steps, args.items, ahead)
            seconds, looks, seq, before, after = _once(spec, args.workers)
            times[name].append(seconds)
            tables.append(looks)
            trained = seq.get("trained_ahead", {}).get("seeds", [])
            print(f"| {r + 1} | {name} | {seconds:.1f} | {seq['stopped_at_look']} | "
                  f"{seq['seeds_used']} | {seq.get('run_ahead', 0)} | "
                  f"{', '.join(map(str, trained)) or '-'} | {before:.1f} | {after:.1f} |",
                  flush=True)
    same = all(t.equals(tables[0]) for t in tables[1:])
    print()
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values):.1f} s over {len(values)} run(s)")
    print(f"same looks table in every run: {same}")


if __name__ == "__main__":
    main()
