"""Peers side by side: evalsig's and evalstats' multi-seed tests beside the seed-random t.

Every cell simulates one set of studies with the package's simulator (``simulate_matrices``:
item difficulty, item × condition and item-specific noise sensitivity, seed skill, seed ×
condition, seed-specific robustness and seed × item effects; docs/statistics.md §9
"Calibration"), takes the accuracy difference A − B at the noisy level (one noise seed),
and runs on exactly those studies

* the seed-random t (``robuststats.stats.seed_random_test``) here, and
* evalsig's and evalstats' tests in the peers' own environment (benchmarks/peers.sh), as a
  subprocess (benchmarks/peers_runner.py) that reads the studies from an .npz and writes
  its p-values and intervals to another.

The table gives rejection rates of H0: a − b = 0 at α = 0.05 with Monte Carlo SEs, and the
coverage of the true difference (``true_effects``) by each 95 % interval. Without the
peers' environment only the seed-random t runs, and a message says how to create it.

    benchmarks/peers.sh
    python benchmarks/peers.py --reps 1000 --out benchmarks/peers.md
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from robuststats.stats import DegenerateDataWarning, seed_random_test
from robuststats.stats._simulate import seed_model, simulate_matrices, true_effects

ROOT = 20261130
HERE = Path(__file__).resolve().parent
RUNNER = HERE / "peers_runner.py"
DEFAULT_VENV = HERE / ".venv-peers"
EXIT_MISSING = 3  # peers_runner.py: evalsig or evalstats not importable
OURS = "seed-random t"
PEER_METHODS = ("evalsig-pooled", "evalsig-cluster", "evalstats-auto", "evalstats-bootstrap")
SLOW_METHODS = ("evalsig-cluster", "evalstats-bootstrap")
ITEM_TERMS = dict(item_condition_sd=1.0, item_robustness_sd=0.5)


@dataclass(frozen=True)
class Design:
    """One simulated population: the seed preset and the effects of A over B (logit)."""

    name: str
    seed_effects: str
    accuracy_effect: float = 0.0
    robustness_effect: float = 0.0

    def parameters(self) -> dict[str, float]:
        return dict(accuracy_effect=self.accuracy_effect,
                    robustness_effect=self.robustness_effect, **ITEM_TERMS)

    def truth(self) -> float:
        """The procedure-level accuracy difference A − B at the noisy level."""
        row = true_effects(self.seed_effects, **self.parameters()).iloc[-1]
        return float(row["estimate"])


DESIGNS = {
    "null-moderate": Design("null, moderate seed effects", "moderate"),
    "effect-moderate": Design("A better (+0.2 logit), moderate seed effects", "moderate",
                              accuracy_effect=0.2, robustness_effect=0.2),
    "null-none": Design("null, no seed effects", "none"),
}


def simulate_cell(design: Design, k: int, n: int, reps: int, rng: np.random.Generator
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` studies: outcomes x (A) and y (B), uint8 arrays ``(reps, k, n)``."""
    model = seed_model(design.seed_effects, **design.parameters())
    x = np.empty((reps, k, n), dtype=np.uint8)
    y = np.empty_like(x)
    for r in range(reps):
        sim = simulate_matrices(model, k, n, rng)  # (2, 2, k, n): condition, level, seed, item
        x[r], y[r] = sim[0, 1], sim[1, 1]
    return x, y


def run_ours(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """The seed-random t on every study: estimate, p-value and 95 % interval."""
    out = np.empty((4, x.shape[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for r in range(x.shape[0]):
            res = seed_random_test(x[r].astype(float), y[r].astype(float))
            ci = res.confidence_interval
            out[:, r] = res.estimate, res.pvalue, ci.low, ci.high
    return dict(zip(("estimate", "pvalue", "ci_low", "ci_high"), out))


def peers_python(venv: Path | None = None) -> Path | None:
    """The peers' interpreter, or None when their environment does not exist."""
    venv = Path(venv or os.environ.get("PEERS_VENV") or DEFAULT_VENV)
    python = venv / "bin" / "python"
    return python if python.exists() else None


def missing_message(venv: Path | None = None) -> str:
    venv = Path(venv or os.environ.get("PEERS_VENV") or DEFAULT_VENV)
    return (f"peers.py: the peers' environment {venv} is missing (or lacks evalsig/evalstats); "
            "create it with benchmarks/peers.sh. Only the seed-random t runs.")


def start_peers(python: Path, x: np.ndarray, y: np.ndarray, seeds: np.ndarray,
                methods: tuple[str, ...], slow_reps: int, n_resamples: int,
                workdir: Path) -> tuple[subprocess.Popen, Path]:
    """Start peers_runner.py on the studies (returns at once; ``finish_peers`` waits)."""
    src, dst = workdir / "studies.npz", workdir / "peers.npz"
    np.savez(src, x=x, y=y, seeds=seeds, methods=np.array(methods), slow_reps=slow_reps,
             n_resamples=n_resamples)
    proc = subprocess.Popen([str(python), str(RUNNER), str(src), str(dst)],
                            stderr=subprocess.PIPE, text=True)
    return proc, dst


def finish_peers(proc: subprocess.Popen, dst: Path) -> dict[str, dict] | None:
    """The peers' results by method, or None (with the runner's message) when it could not run."""
    _, err = proc.communicate()
    if proc.returncode == EXIT_MISSING:
        print(err.strip(), file=sys.stderr)
        return None
    if proc.returncode != 0:
        raise RuntimeError(f"peers_runner.py failed ({proc.returncode}):\n{err}")
    data = np.load(dst)
    out: dict[str, dict] = {}
    for key in data.files:
        method, field = key.split(":")
        out.setdefault(method, {})[field] = data[key]
    return out


def summarise(design: Design, k: int, n: int, method: str, res: dict, truth: float,
              alpha: float = 0.05) -> dict:
    """Rejection rate and coverage (with Monte Carlo SEs) over the replications run."""
    p = np.asarray(res["pvalue"], dtype=float)
    ran = ~np.isnan(p)
    m = int(ran.sum())
    reject = float(np.mean(p[ran] < alpha))
    lo, hi = np.asarray(res["ci_low"])[ran], np.asarray(res["ci_high"])[ran]
    cover = float(np.mean((lo <= truth) & (truth <= hi)))
    label = "; ".join(str(s) for s in np.atleast_1d(res.get("label", [OURS])))
    return dict(design=design.name, n_seeds=k, n_items=n, method=method, reps=m,
                reject=reject, reject_se=math.sqrt(reject * (1 - reject) / m),
                coverage=cover, coverage_se=math.sqrt(cover * (1 - cover) / m),
                width=float(np.mean(hi - lo)), truth=truth, label=label)


def run_cell(index: int, design: Design, k: int, n: int, reps: int, slow_reps: int,
             n_resamples: int, python: Path | None, methods: tuple[str, ...]) -> list[dict]:
    """Simulate one cell, run both sides on the same studies, one row per method."""
    rng = np.random.default_rng(np.random.SeedSequence(ROOT).spawn(index + 1)[index])
    x, y = simulate_cell(design, k, n, reps, rng)
    seeds = rng.integers(0, 2**31 - 1, reps)
    truth = design.truth()
    peers = None
    with tempfile.TemporaryDirectory() as tmp:
        if python is not None and methods:
            proc, dst = start_peers(python, x, y, seeds, methods, slow_reps, n_resamples,
                                    Path(tmp))
        ours = run_ours(x, y)  # while the peers run in their own process
        if python is not None and methods:
            peers = finish_peers(proc, dst)
    rows = [summarise(design, k, n, OURS, ours, truth)]
    for method in methods if peers else ():
        rows.append(summarise(design, k, n, method, peers[method], truth))
    return rows


def _run_job(job: tuple) -> list[dict]:
    return run_cell(*job)


def markdown(rows: list[dict]) -> str:
    """One row per (design, k, method): rejection rate and coverage with MC SEs."""
    head = ["design", "k", "method", "reps", "rejects H0 at 5 % (MC SE)",
            "covers the truth (MC SE)", "mean width"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join([
            r["design"], str(r["n_seeds"]), r["method"], str(r["reps"]),
            f"{r['reject']:.3f} ({r['reject_se']:.3f})",
            f"{r['coverage']:.3f} ({r['coverage_se']:.3f})", f"{r['width']:.3f}"]) + " |")
    labels: dict[str, set[str]] = {}
    for r in rows:
        labels.setdefault(r["method"], set()).add(f"k = {r['n_seeds']}: {r['label']}")
    lines.append("\nwhat each method reported it ran:\n")
    for method, seen in labels.items():
        lines.append(f"* {method}: " + " | ".join(sorted(seen)))
    return "\n".join(lines) + "\n"


def _load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def _versions(python: Path | None) -> str:
    if python is None:
        return "peers: not installed"
    code = ("import importlib.metadata as m; "
            "print(', '.join(f'{p} {m.version(p)}' for p in ('evalsig', 'evalstats')))")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or "peers: versions unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=1000,
                   help="studies per cell of the headline null (moderate seed effects)")
    p.add_argument("--other-reps", type=int, default=None,
                   help="studies per cell of the other designs (default: --reps)")
    p.add_argument("--slow-reps", type=int, default=200,
                   help="studies per cell for the resampling peers (evalsig's cluster "
                        "bootstrap, evalstats' nested bootstrap)")
    p.add_argument("--n-resamples", type=int, default=1000,
                   help="resamples of the peers' bootstraps (their defaults: 10,000)")
    p.add_argument("--seeds", nargs="+", type=int, default=[2, 3, 5])
    p.add_argument("--items", type=int, default=500)
    p.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    p.add_argument("--methods", nargs="*", default=list(PEER_METHODS), choices=PEER_METHODS,
                   help="the peers' methods to run (none: the seed-random t only)")
    p.add_argument("--venv", type=Path, default=None,
                   help="the peers' environment (default: $PEERS_VENV or benchmarks/.venv-peers)")
    p.add_argument("--workers", type=int, default=1, help="cells run in parallel")
    p.add_argument("--out", default=None, help="also write the markdown here")
    args = p.parse_args(argv)
    python = peers_python(args.venv)
    if python is None:
        print(missing_message(args.venv), file=sys.stderr)
    load_start, t0 = _load(), time.perf_counter()
    jobs = []
    for key in args.designs:
        design = DESIGNS[key]
        reps = args.reps if key == "null-moderate" else (args.other_reps or args.reps)
        for k in args.seeds:
            jobs.append((len(jobs) + 1, design, k, args.items, reps, args.slow_reps,
                         args.n_resamples, python, tuple(args.methods)))
    rows: list[dict] = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for job, cell in zip(jobs, pool.map(_run_job, jobs)):
            rows += cell
            print(f"{job[1].name}, k = {job[2]}: done ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
    if python is not None and args.methods and all(r["method"] == OURS for r in rows):
        python = None  # the runner said the packages are missing: ours only
    wall = time.perf_counter() - t0
    text = markdown(rows)
    text += (f"\n`python benchmarks/peers.py {' '.join(sys.argv[1:] if argv is None else argv)}`"
             f"; n = {args.items} items; {_versions(python)}; peers' bootstraps with "
             f"{args.n_resamples} resamples; wall time {wall:.0f} s on "
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; load average "
             f"(1, 5, 15 min) {load_start} at the start, {_load()} at the end\n")
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
