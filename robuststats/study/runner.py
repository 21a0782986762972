"""``run_study``: plan → resumable execution → outcomes → analysis → a new result version.

Besides the analysis tables, each version holds ``injections.parquet`` (and ``.csv``): the
evaluation's injection counts per cell × layer × op × phase, so every noisy outcome can be
shown to be noisy (and every clean one clean).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats._version import __version__
from robuststats.analysis import Analysis, analyze_outcomes
from robuststats.results import ResultStore, ResultVersion
from robuststats.study.ledger import RunLedger
from robuststats.study.plan import Cell, plan
from robuststats.study.spec import StudySpec

__all__ = ["StudyRun", "environment", "run_study", "write_version"]


@dataclass(frozen=True)
class StudyRun:
    """What :func:`run_study` did and where the results are."""

    version: ResultVersion
    analysis: Analysis
    run_dir: Path
    cells_planned: int
    cells_reused: int
    cells_run: int
    cells_failed: int
    models_trained: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.cells_failed == 0 and self.analysis.missing.empty

    @property
    def failures_dir(self) -> Path:
        """Where the tracebacks of failed cells are (for messages)."""
        return RunLedger(self.run_dir).failures_dir


def _git_commit() -> dict[str, Any]:
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, timeout=10,
                               check=True).stdout.strip() != ""
        return {"git_commit": sha, "git_dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


def environment() -> dict[str, Any]:
    """Versions and machine facts for the manifest (without importing torch)."""
    versions = {}
    for dist in ("torch", "transformers", "numpy", "scipy", "pandas", "statsmodels"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return {"package_version": __version__, **_git_commit(), "versions": versions,
            "python": platform.python_version(), "platform": platform.platform(),
            "cpu_count": os.cpu_count()}


def _device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)}), training/eval device chosen by trainer"
    return f"cpu ({platform.processor() or platform.machine()})"


def write_version(out: str | Path, study: str, outcomes: pd.DataFrame, analysis: Analysis,
                  meta: dict[str, Any], *, injections: pd.DataFrame | None = None
                  ) -> ResultVersion:
    """Write outcomes, tables (parquet + CSV), report and manifest as a new version.

    ``injections`` (the run's per-cell injection counts) is stored beside the outcomes as
    ``injections.parquet`` and ``injections.csv`` when given.
    """
    from robuststats.report import write_report

    store = ResultStore(out)
    env = environment()
    tables = analysis.tables()
    counts = {"outcomes": len(outcomes), **{k: len(v) for k, v in tables.items()}}
    if injections is not None:
        counts["injections"] = len(injections)

    def writer(path: Path) -> None:
        outcomes.to_parquet(path / "outcomes.parquet", index=False)
        if injections is not None:
            injections.to_parquet(path / "injections.parquet", index=False)
            injections.to_csv(path / "injections.csv", index=False)
        for name, df in tables.items():
            df.to_parquet(path / f"{name}.parquet", index=False)
            df.to_csv(path / f"{name}.csv", index=False)
        number = int(path.name[1:])
        write_report(path, tables, {**meta, **env, "study": study, "label": f"v{number}"})

    manifest = {**meta, "row_counts": counts, "environment": env}
    return store.write(study, writer, manifest)


def run_study(spec: StudySpec, *, out: str | Path = "results", runs: str | Path = "runs",
              workers: int = 2, fresh: bool = False,
              progress: bool | Callable[[int, int], Callable[[int], None]] = True) -> StudyRun:
    """Run (or resume) every cell of ``spec`` and write a new result version under ``out``.

    The run directory ``<runs>/<spec.name>/`` caches trained models and finished cells;
    rerunning resumes it. A run directory made from a different resolved spec is refused
    unless ``fresh``. Failed cells are recorded; the version is still written, with the
    missing cells listed and the hypotheses that need them INCONCLUSIVE.
    """
    from robuststats.study.executor import execute, preflight

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    preflight(spec)
    ledger = RunLedger.open(Path(runs) / spec.name, spec, fresh=fresh)
    cells = plan(spec)
    done = ledger.finished(cells)
    pending = [c for c in cells if c not in done]
    bar = _progress(progress, len(cells), len(done))
    try:
        report = execute(ledger, spec, pending, workers=workers, progress=bar)
    finally:
        if bar is not None and hasattr(bar, "close"):
            bar.close()
    outcomes = ledger.outcomes(cells)
    failures = ledger.failures()
    analysis = analyze_outcomes(outcomes, hypotheses=spec.hypotheses, options=spec.analysis,
                                expected_cells=cells)
    if not analysis.missing.empty:
        errors = [_last_line(failures.get(Cell(*r).key, "not run"))
                  for r in analysis.missing.itertuples(index=False, name=None)]
        analysis = _with_missing(analysis, analysis.missing.assign(error=errors))
    meta = {
        "spec": spec.resolved(), "spec_hash": spec.spec_hash(), "description": spec.description,
        "seeds": spec.seed_list(), "noise_seeds": spec.evaluation.noise_seed_list(),
        "n_items": spec.evaluation.n_items, "cells_planned": len(cells),
        "cells_finished": len(cells) - len(analysis.missing), "cells_reused": len(done),
        "cells_run": report.cells_run, "cells_failed": report.cells_failed,
        "models_trained": report.models_trained, "run_dir": str(ledger.root),
        "cells_without_injection_counts": [c.key for c in ledger.without_injections(cells)],
        "device": _device(), "workers": workers, "started": started,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.perf_counter() - t0, 1), "alpha": spec.analysis.alpha,
        "confidence_level": spec.analysis.confidence_level,
        "multiplicity": spec.analysis.multiplicity,
    }
    version = write_version(out, spec.name, outcomes, analysis, meta,
                            injections=ledger.injections(cells))
    return StudyRun(version, analysis, ledger.root, len(cells), len(done), report.cells_run,
                    len(analysis.missing), report.models_trained, time.perf_counter() - t0)


def _with_missing(analysis: Analysis, missing: pd.DataFrame) -> Analysis:
    from dataclasses import replace

    return replace(analysis, missing=missing)


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _progress(progress: bool | Callable[[int, int], Callable[[int], None]], total: int,
              initial: int) -> Any:
    if progress is False:
        return None
    if callable(progress):
        return progress(total, initial)
    from tqdm import tqdm

    bar = tqdm(total=total, initial=initial, unit="cell", desc="cells", dynamic_ncols=True)

    class _Bar:
        def __call__(self, n: int) -> None:
            bar.update(n)

        def close(self) -> None:
            bar.close()

    return _Bar()
