"""``run_study``: plan → resumable execution → outcomes → analysis → a new result version.

Besides the analysis tables, each version holds ``injections.parquet`` (and ``.csv``): the
evaluation's injection counts per cell × layer × op × phase, so every noisy outcome can be
shown to be noisy (and every clean one clean).

Fail early: ``--out`` and ``--runs`` are checked (a directory, or creatable; writable,
with room for a small file) before anything is built, and the task and trainer are built
once before any worker starts. SIGTERM is handled like Ctrl-C: the run stops within a
second or two, keeping every finished cell (:class:`Interrupted`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib.metadata
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats._version import __version__
from robuststats.analysis import Analysis, analyze_outcomes
from robuststats.errors import InputError, RobuststatsWarning
from robuststats.results import ResultStore, ResultVersion, cell_digests
from robuststats.study.ledger import RunLedger, run_hash
from robuststats.study.plan import Cell, plan
from robuststats.study.spec import StudySpec

__all__ = ["Interrupted", "StudyRun", "check_output_dir", "environment", "run_study",
           "write_version"]

#: bytes written (and fsynced) by the preflight probe: a full disk fails here, not later
_PROBE_BYTES = 64 * 1024


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal (SIGINT or SIGTERM); finished cells are kept."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def check_output_dir(path: str | Path, name: str) -> Path:
    """``path`` must be a directory, or creatable as one, where files can be written.

    Checks without creating anything that is not there yet: a probe file of
    :data:`_PROBE_BYTES` is written, fsynced and removed in ``path`` or in its nearest
    existing ancestor (so a read-only or full file system fails here, before any compute).
    ``name`` (``--out`` or ``out``) leads the one-line :class:`InputError`.
    """
    raw = str(path)
    if not raw or "\0" in raw:
        raise InputError(f"{name} must be a directory path, got {_shown(raw)}.")
    target = Path(raw)
    try:
        probe_dir = target
        while not probe_dir.exists():
            if probe_dir.is_symlink():
                raise InputError(f"{name} {_shown(raw)}: {_shown(probe_dir)} is a dangling "
                                 "symbolic link.")
            parent = probe_dir.parent
            if parent == probe_dir:
                break
            probe_dir = parent
        if not probe_dir.is_dir():
            what = "is not a directory" if probe_dir == target else \
                f"cannot be created: {_shown(probe_dir)} is not a directory"
            raise InputError(f"{name} {_shown(raw)} {what}.")
        _probe_write(probe_dir)
    except InputError:
        raise
    except OSError as exc:
        where = "" if probe_dir == target else f" (checked in {_shown(probe_dir)}, where " \
                                               "it would be created)"
        raise InputError(f"{name} {_shown(raw)} is not writable{where}: "
                         f"{exc.strerror or exc}.") from None
    return target


def _shown(path: str | Path, limit: int = 120) -> str:
    """A path for a one-line message: quoted, its middle elided past ``limit`` characters."""
    text = str(path)
    if len(text) > limit:
        text = f"{text[: limit // 2]}…{text[-(limit // 2):]} ({len(str(path))} characters)"
    return repr(text)


def _probe_write(directory: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".robuststats-probe-", dir=directory)
    try:
        os.write(fd, b"\0" * _PROBE_BYTES)
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(tmp)


@contextlib.contextmanager
def _signals_as_interrupts() -> Iterator[None]:
    """SIGTERM (and SIGINT) raise :class:`Interrupted` in the main thread, so the run stops
    the way Ctrl-C stops it: pool cancelled, workers ended, finished cells kept."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    # a signal ignored by whoever started us (nohup, a batch system) stays ignored
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)
                if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


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
            "cpu_count": os.cpu_count(), "cpu": _cpu_model(), **_cpu_capability()}


def _cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo`` where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_capability() -> dict[str, str]:
    """torch's CPU kernel level (``AVX512``, ``AVX2``, ...) when torch is already loaded.

    Trained weights depend on it: the vectorised kernels round differently, and over
    hundreds of training steps that changes item outcomes (docs/studies.md,
    "Reproducibility"). Recorded so two versions from different machines can be told apart.
    """
    torch = sys.modules.get("torch")
    try:
        return {"cpu_capability": str(torch.backends.cpu.get_cpu_capability())} if torch else {}
    except Exception:  # an old or partial torch: nothing to record
        return {}


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
    ``injections.parquet`` and ``injections.csv`` when given. The manifest records the
    SHA-256 and row count of every outcome cell (``cells``). The version is published only
    when complete (:meth:`ResultStore.publish`).
    """
    from robuststats.report import write_report

    store = ResultStore(out)
    env = environment()
    tables = analysis.tables()
    counts = {"outcomes": len(outcomes), **{k: len(v) for k, v in tables.items()}}
    if injections is not None:
        counts["injections"] = len(injections)

    def writer(path: Path, number: int) -> None:
        outcomes.to_parquet(path / "outcomes.parquet", index=False)
        if injections is not None:
            injections.to_parquet(path / "injections.parquet", index=False)
            injections.to_csv(path / "injections.csv", index=False)
        for name, df in tables.items():
            df.to_parquet(path / f"{name}.parquet", index=False)
            df.to_csv(path / f"{name}.csv", index=False)
        write_report(path, tables, {**meta, **env, "study": study, "label": f"v{number}"})

    manifest = {**meta, "row_counts": counts, "environment": env,
                "cells": cell_digests(outcomes)}
    return store.publish(study, writer, manifest)


def run_study(spec: StudySpec, *, out: str | Path = "results", runs: str | Path = "runs",
              workers: int = 2, fresh: bool = False,
              progress: bool | Callable[[int, int], Callable[[int], None]] = True,
              executor: Any = None) -> StudyRun:
    """Run (or resume) every cell of ``spec`` and write a new result version under ``out``.

    The run directory ``<runs>/<spec.name>/`` caches trained models and finished cells;
    rerunning resumes it, and one process at a time may use it (a second is refused with
    the first one's PID). A run directory made for other outcomes (another
    :func:`~robuststats.study.ledger.run_hash`: task, model, trainer, conditions,
    evaluation, seeds) is refused unless ``fresh``; other hypotheses or analysis options
    only re-analyse its cells. Failed cells are recorded; the version is still written,
    with the missing cells listed and the hypotheses that need them INCONCLUSIVE.

    ``executor`` (e.g. :class:`~robuststats.study.ray_executor.RayExecutor`) runs the jobs
    instead of the local pool. ``out`` and ``runs`` are checked before anything runs. SIGINT and SIGTERM stop the run
    promptly with :class:`Interrupted` (finished cells are kept; rerun to resume).
    """
    from robuststats.study.executor import execute as execute_local
    from robuststats.study.executor import planned_items, preflight

    # another executor (Ray) runs the same jobs against the same ledger
    execute = functools.partial(execute_local, executor=executor)

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    check_output_dir(out, "`out`")
    check_output_dir(runs, "`runs`")
    with _signals_as_interrupts():
        task = preflight(spec)
        items = [str(it.item_id) for it in planned_items(spec, task)]
        _warn_if_fewer_items(spec, len(items))
        with RunLedger.open(Path(runs) / spec.name, spec, fresh=fresh) as ledger:
            cells = plan(spec)
            done = ledger.finished(cells, items=items)
            pending = [c for c in cells if c not in done]
            bar = progress_bar(progress, len(cells), len(done))
            try:
                report = execute(ledger, spec, pending, workers=workers, progress=bar)
                if spec.sweep is not None and spec.sweep.adaptive is not None:
                    # a dose-response sweep adds levels around each fitted threshold
                    from robuststats.study.sweep_run import refine

                    cells, rounds, reused = refine(spec, ledger, cells, items,
                                                   workers=workers, execute=execute)
                    report = _combined([report, *rounds])
                    done = done | reused
            finally:
                if bar is not None and hasattr(bar, "close"):
                    bar.close()
            outcomes = ledger.outcomes(cells, items=items)
            failures = ledger.failures()
            injections = ledger.injections(cells)
            without_counts = [c.key for c in ledger.without_injections(cells)]
        analysis = analyze_outcomes(outcomes, hypotheses=spec.hypotheses,
                                    options=spec.analysis, expected_cells=cells)
        if spec.sweep is not None:
            from robuststats.study.sweep_run import dose_tables

            analysis = _with_extra(analysis, dose_tables(outcomes, spec))
        if not analysis.missing.empty:
            errors = [_last_line(failures.get(Cell(*r).key, "not run"))
                      for r in analysis.missing.itertuples(index=False, name=None)]
            analysis = _with_missing(analysis, analysis.missing.assign(error=errors))
        meta = {
            "spec": spec.resolved(), "spec_hash": spec.spec_hash(), "run_hash": run_hash(spec),
            "description": spec.description, "seeds": spec.seed_list(),
            "noise_seeds": spec.evaluation.noise_seed_list(), "n_items": len(items),
            **({"n_items_requested": spec.evaluation.n_items}
               if spec.evaluation.n_items is not None
               and spec.evaluation.n_items != len(items) else {}),
            "cells_planned": len(cells),
            "cells_finished": len(cells) - len(analysis.missing), "cells_reused": len(done),
            "cells_run": report.cells_run, "cells_failed": report.cells_failed,
            "models_trained": report.models_trained, "run_dir": str(ledger.root),
            "cells_without_injection_counts": without_counts,
            "device": _device(), "workers": workers, "started": started,
            **({"executor": getattr(executor, "name", type(executor).__name__)}
               if executor is not None else {}),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.perf_counter() - t0, 1), "alpha": spec.analysis.alpha,
            "confidence_level": spec.analysis.confidence_level,
            "multiplicity": spec.analysis.multiplicity,
        }
        try:
            version = write_version(out, spec.name, outcomes, analysis, meta,
                                    injections=injections)
        except OSError as exc:
            raise InputError(
                f"`out`: could not write the result version under {str(out)!r}: "
                f"{exc.strerror or exc}{_errno_hint(exc)}. Nothing was published; the "
                f"{len(cells) - len(analysis.missing)} finished cell(s) are kept in "
                f"{str(ledger.root)!r}: rerun the same command to publish them without "
                "recomputing.") from None
    return StudyRun(version, analysis, ledger.root, len(cells), len(done), report.cells_run,
                    len(analysis.missing), report.models_trained, time.perf_counter() - t0)


def _warn_if_fewer_items(spec: StudySpec, available: int) -> None:
    asked = spec.evaluation.n_items
    if asked is not None and asked > available:
        warnings.warn(f"`evaluation.n_items` asks for {asked} items but split "
                      f"{spec.evaluation.split!r} of task {spec.task.name!r} has "
                      f"{available}: every cell evaluates those {available} (the manifest and "
                      "report say so).", RobuststatsWarning, stacklevel=3)


def _errno_hint(exc: OSError) -> str:
    return {errno.ENOSPC: " (the disk is full)", errno.EDQUOT: " (disk quota exceeded)",
            errno.EROFS: " (read-only file system)"}.get(exc.errno or 0, "")


def _combined(reports: list[Any]) -> Any:
    """One execution report for several executions (a sweep's grid and its rounds)."""
    from robuststats.study.executor import ExecutionReport

    return ExecutionReport(*(sum(getattr(r, f) for r in reports)
                             for f in ("cells_run", "cells_failed", "models_trained",
                                       "seconds")))


def _with_extra(analysis: Analysis, tables: dict[str, pd.DataFrame]) -> Analysis:
    from dataclasses import replace

    return replace(analysis, extra={**analysis.extra, **tables})


def _with_missing(analysis: Analysis, missing: pd.DataFrame) -> Analysis:
    from dataclasses import replace

    return replace(analysis, missing=missing)


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def progress_bar(progress: bool | Callable[[int, int], Callable[[int], None]], total: int,
                 initial: int, *, unit: str = "cell", desc: str = "cells") -> Any:
    """The counter long runs report to: ``None`` when ``progress`` is False, the caller's own
    ``progress(total, initial)`` when it is callable, else a tqdm bar (``bar(n)`` advances
    it, ``bar.close()`` ends it). Shared by studies, searches and the probe."""
    if progress is False:
        return None
    if callable(progress):
        return progress(total, initial)
    from tqdm import tqdm

    bar = tqdm(total=total, initial=initial, unit=unit, desc=desc, dynamic_ncols=True)

    class _Bar:
        def __call__(self, n: int) -> None:
            bar.update(n)

        def close(self) -> None:
            bar.close()

    return _Bar()
