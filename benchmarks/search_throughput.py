"""Trial throughput of ``robuststats search`` with 1 and 2 worker processes, side by side.

The embedded default (``studies/adaptive_search.yaml``: tiny Qwen2, arithmetic task, 200
search items, 2 noise seeds per trial) is trained once; then each variant runs a fresh
study of ``--trials`` trials on its own SQLite storage, the variants interleaved
``--repeats`` times. Two figures per run:

* trial phase: finished trials per minute between the first trial's start and the last
  trial's end (from the storage's timestamps): what the workers deliver once running;
* end to end: trials per minute of the whole ``run_search`` call, including spawning and
  loading the workers, the study set-up (clean evaluation, sensitivity probe) and the
  re-evaluation.

Read the ratios (2 workers / 1 worker) of the same repeat: absolute times move with the
machine's load. ``--quick`` uses 40 search items and 5 trials. Run:

    python benchmarks/search_throughput.py [--trials 12] [--repeats 2] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def _one(spec, runs: Path, out: Path, url: str, workers: int) -> dict[str, float]:
    import optuna

    from robuststats.search import run_search
    from robuststats.search._storage import open_storage

    t0 = time.perf_counter()
    run = run_search(spec, storage=url, workers=workers, runs=runs, out=out, progress=False)
    total = time.perf_counter() - t0
    study = optuna.load_study(study_name=spec.name, storage=open_storage(url))
    done = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.COMPLETE]
    span = (max(t.datetime_complete for t in done)
            - min(t.datetime_start for t in done)).total_seconds()
    per_trial = statistics.median(t.user_attrs["seconds"] for t in done)
    return {"trials": len(done), "phase_s": span, "total_s": total,
            "phase_per_min": 60 * len(done) / span, "total_per_min": 60 * len(done) / total,
            "median_trial_s": per_trial, "ok": float(run.ok)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from robuststats.search import SearchSpec
    from robuststats.search._objective import build_context

    spec = SearchSpec.from_file(Path(__file__).resolve().parents[1] / "studies" /
                                "adaptive_search.yaml")
    data = spec.model_dump()
    trials = 5 if args.quick else args.trials
    data["search"]["trials"] = trials
    data["search"]["reevaluation"]["noise_seeds"] = 1
    if args.quick:
        data["evaluation"]["n_items"] = 40
        data["search"]["reevaluation"]["holdout_items"] = 40
    spec = SearchSpec.from_dict(data)
    root = Path(tempfile.mkdtemp(prefix="search-bench-"))
    try:
        t0 = time.perf_counter()
        build_context(spec, root / "model" / spec.name)  # trains the probed model once
        print(f"probed model trained in {time.perf_counter() - t0:.1f} s")
        rows = []
        for r in range(args.repeats):
            for workers in (1, 2):
                runs = root / f"r{r}w{workers}"
                shutil.copytree(root / "model" / spec.name / "models",
                                runs / spec.name / "models")
                res = _one(spec, runs, root / "out", f"sqlite:///{runs}/search.db", workers)
                rows.append((r, workers, res))
                print(f"repeat {r} workers {workers}: {res['trials']} trials, trial phase "
                      f"{res['phase_s']:.1f} s ({res['phase_per_min']:.2f}/min), end to end "
                      f"{res['total_s']:.1f} s ({res['total_per_min']:.2f}/min), median "
                      f"trial {res['median_trial_s']:.2f} s", flush=True)
        print("\nratio 2 workers / 1 worker (throughput), per repeat:")
        for r in range(args.repeats):
            one = next(x for rr, w, x in rows if rr == r and w == 1)
            two = next(x for rr, w, x in rows if rr == r and w == 2)
            print(f"  repeat {r}: trial phase {two['phase_per_min'] / one['phase_per_min']:.2f}"
                  f", end to end {two['total_per_min'] / one['total_per_min']:.2f}, median "
                  f"trial time {two['median_trial_s'] / one['median_trial_s']:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
