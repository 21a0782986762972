"""Where the time of ``make demo`` goes, and whether a change kept its outcomes.

Two modes; both write only under a scratch directory (never ``results/`` or ``runs/``):

- ``phases``: one training job of the study in this process, one torch thread (as in a
  worker), with the CPU seconds (``time.process_time``, which a loaded machine inflates far
  less than wall time) of each phase: imports, task, training, each cell's evaluation, and
  the analysis with the version it writes (on the committed ``results/e8_matrix/v2``
  outcomes). ``--profile FILE`` also writes a cProfile of training and evaluation, timed in
  CPU seconds.
- ``run``: the whole study (``robuststats study ... --out/--runs`` in a scratch directory)
  in a child process: wall and CPU seconds (the child and its workers), the wall seconds of
  training and of the cells from the run's event log, the start-up before the first
  event and the analysis after the last. ``--reference RUN_DIR`` compares every item's
  outcome with another run directory (e.g. one the previous code made from
  ``git archive``) and exits 1 when any differs.

Run: ``python benchmarks/demo_profile.py phases [--condition E8b]`` or
``python benchmarks/demo_profile.py run [--seeds 5] [--reference /tmp/old/runs/e8_matrix]``.
Report ``uptime`` with the numbers: on a shared machine wall time says little.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
STUDY = ROOT / "studies" / "e8_matrix.yaml"
KEY = ["condition", "seed", "eval_noise", "noise_seed", "item_id"]


def phases(args: argparse.Namespace) -> None:
    cpu = time.process_time()
    import torch

    from robuststats.models.evaluate import evaluate
    from robuststats.models.trainer import TrainingCondition
    from robuststats.runs.checks import build_task, build_trainer, planned_items
    from robuststats.runs.plan import plan
    from robuststats.runs.spec import StudySpec

    torch.set_num_threads(1)  # as in a worker of the pool
    rows = [("imports", time.process_time() - cpu)]
    spec = StudySpec.from_file(args.study).with_overrides(seeds=1)
    cpu = time.process_time()
    task, trainer = build_task(spec), build_trainer(spec)
    items = planned_items(spec, task)
    rows.append(("task and trainer", time.process_time() - cpu))
    condition = TrainingCondition.from_spec(args.condition, spec.conditions[args.condition])
    profile = cProfile.Profile(time.process_time) if args.profile else None
    cpu = time.process_time()
    if profile:
        profile.enable()
    model = trainer.train(task, condition, seed=0)
    rows.append((f"training {args.condition} (seed 0, {spec.trainer.params.get('steps')} "
                 "steps, train accuracy included)", time.process_time() - cpu))
    for cell in (c for c in plan(spec) if c.condition == args.condition):
        noise = spec.cell_noise(cell.condition, cell.eval_noise, cell.noise_seed)
        cpu = time.process_time()
        evaluate(model, task, items, noise=noise, noise_seed=cell.noise_seed,
                 batch_size=spec.evaluation.batch_size)
        rows.append((f"cell {cell.key}", time.process_time() - cpu))
    if profile:
        profile.disable()
        profile.dump_stats(args.profile)
    rows.append(("analysis and version (committed v2 outcomes)", _analysis()))
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:7.2f} s CPU")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


def _analysis() -> float:
    import pandas as pd

    from robuststats.analysis import analyze_outcomes
    from robuststats.runs.plan import plan
    from robuststats.runs.spec import StudySpec
    from robuststats.study import write_version

    outcomes = pd.read_parquet(ROOT / "results" / "e8_matrix" / "v2" / "outcomes.parquet")
    full = StudySpec.from_file(STUDY).with_overrides(seeds=5)
    cpu = time.process_time()
    analysis = analyze_outcomes(outcomes, hypotheses=full.hypotheses, options=full.analysis,
                                expected_cells=plan(full))
    with tempfile.TemporaryDirectory() as out:
        write_version(out, full.name, outcomes, analysis, {"spec": full.resolved()})
    return time.process_time() - cpu


def run(args: argparse.Namespace) -> int:
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="demo-profile-"))
    runs = scratch / "runs"
    load = os.getloadavg()
    command = [sys.executable, "-m", "robuststats", "study", str(args.study), "--seeds",
               str(args.seeds), "--out", str(scratch / "results"), "--runs", str(runs),
               "--workers", str(args.workers), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(ROOT), os.environ.get("PYTHONPATH")]))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=False)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run_dir = next(p for p in runs.iterdir() if p.is_dir())
    events = [json.loads(line) for line in
              (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines() if line]
    stamps = [datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
              for e in events]
    train = sum(e.get("seconds", 0.0) for e in events if e["event"] == "model_trained")
    cells = sum(e.get("seconds", 0.0) for e in events if e["event"] == "cell_done")
    print(f"study {args.study.name} --seeds {args.seeds} --workers {args.workers}: exit "
          f"{done.returncode}, {wall:.1f} s wall, {cpu:.1f} s CPU (this run and its workers)")
    print(f"  load average at the start {load[0]:.2f}, at the end {os.getloadavg()[0]:.2f}")
    if stamps:  # event times are whole seconds
        print(f"  start-up before the first event  ~{min(stamps) - start:6.0f} s wall")
        print(f"  after the last event (analysis)  ~{start + wall - max(stamps):6.0f} s wall")
    print(f"  training, summed over models      {train:7.1f} s wall")
    print(f"  cells, summed                     {cells:7.1f} s wall")
    print(f"  run directory {run_dir}")
    if args.reference is None:
        return done.returncode
    return max(done.returncode, _compare(run_dir, Path(args.reference)))


def _compare(new: Path, old: Path) -> int:
    import pandas as pd

    def read(run_dir: Path) -> pd.DataFrame:
        return pd.concat([pd.read_parquet(p) for p in sorted((run_dir / "cells").glob(
            "*.parquet"))], ignore_index=True)

    a, b = read(new), read(old)
    both = a.merge(b, on=KEY, how="outer", suffixes=("_new", "_old"), indicator=True)
    only = int((both["_merge"] != "both").sum())
    differ = int((both["_merge"].eq("both") & both["correct_new"].ne(both["correct_old"])).sum())
    print(f"  outcomes against {old}: {len(a)} rows here, {len(b)} there, {only} in only one,"
          f" {differ} with another `correct`")
    return int(bool(only or differ))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("phases", help="CPU seconds of each phase of one job, in this process")
    p.add_argument("--study", type=Path, default=STUDY)
    p.add_argument("--condition", default="E8b")
    p.add_argument("--profile", metavar="FILE", help="also write a cProfile (CPU seconds)")
    r = sub.add_parser("run", help="the whole study in a scratch directory")
    r.add_argument("--study", type=Path, default=STUDY)
    r.add_argument("--seeds", type=int, default=5)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--scratch", help="directory for results/ and runs/ (default: a new one)")
    r.add_argument("--reference", metavar="RUN_DIR",
                   help="a run directory of the same study whose outcomes must be these")
    args = parser.parse_args(argv)
    if args.mode == "phases":
        phases(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
