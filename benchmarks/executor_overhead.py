"""Per-cell overhead of the Ray executor against the local ones, side by side.

Executes every cell of a study of instant cells (the test doubles' task, trainer and model:
no training, outcomes from a hash) into a fresh run directory with each variant in turn,
interleaved over the repeats, and reports medians: seconds per execution, milliseconds per
cell and the ratio to the local pool. What remains is the executor's own cost: process
or task start-up, shipping the spec, the ledger's atomic writes.

- ``in-process``: ``workers=1``, everything in the calling process;
- ``local pool``: ``workers=2``, a spawn-context process pool (started per execution);
- ``ray``: a local Ray with 2 CPUs, started once before the timings (its start-up is
  reported on its own line), one task per training job.

Run: ``python benchmarks/executor_overhead.py [--jobs 8] [--repeats 5]``.
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
DOUBLES = ROOT / "tests" / "study"
sys.path[:0] = [str(ROOT), str(DOUBLES)]

from study_doubles import fake_study  # noqa: E402

from robuststats.runs.executor import execute  # noqa: E402
from robuststats.study import RunLedger, StudySpec, plan  # noqa: E402


def _spec(jobs: int) -> StudySpec:
    conditions = tuple(f"C{i}" for i in range(jobs))
    study = fake_study("bench", conditions=conditions, seeds=1, n=100, noise_seeds=2)
    study["hypotheses"] = []
    return StudySpec.from_dict(study)


def _once(spec: StudySpec, variant: str, executor: object | None) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="exec-bench-"))
    try:
        with RunLedger.open(tmp / spec.name, spec) as ledger:
            cells = plan(spec)
            start = time.perf_counter()
            report = execute(ledger, spec, cells, workers=1 if variant == "in-process" else 2,
                             executor=executor)
            seconds = time.perf_counter() - start
        assert report.cells_run == len(cells) and report.cells_failed == 0, report
        return seconds
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=8, help="training jobs (conditions)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import ray

    from robuststats.runs.ray_executor import RayExecutor

    spec = _spec(args.jobs)
    n_cells = len(plan(spec))
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(map(str, (ROOT, DOUBLES)))}})
    ray_start = time.perf_counter() - t0
    variants = {"in-process": None, "local pool": None, "ray": RayExecutor()}
    _once(spec, "ray", variants["ray"])  # warm the Ray workers (imports), as a cluster is
    times: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.repeats):
        for name, executor in variants.items():
            times[name].append(_once(spec, name, executor))
    ray.shutdown()
    pool = statistics.median(times["local pool"])
    print(f"{args.jobs} jobs, {n_cells} cells, {args.repeats} interleaved repeats, medians; "
          f"cpu_count={os.cpu_count()}")
    print(f"{'variant':<12} {'s/execution':>12} {'ms/cell':>9} {'vs local pool':>14}")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:<12} {m:>12.2f} {1000 * m / n_cells:>9.1f} {m / pool:>14.2f}")
    print(f"ray.init (local, 2 CPUs), once per study: {ray_start:.2f} s")


if __name__ == "__main__":
    main()
