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

import functools
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats.analysis import Analysis, analyze_outcomes
from robuststats.errors import InputError, RobuststatsWarning
from robuststats.results import Manifest, ResultStore, ResultVersion, cell_digests
from robuststats.runs import (
    ExecutionReport,
    Interrupted,
    ProgressArg,
    Run,
    RunLedger,
    device,
    environment,
    errno_hint,
    last_line,
    run_hash,
    utc_now,
)
from robuststats.runs.plan import Cell, plan
from robuststats.runs.spec import StudySpec

__all__ = ["Interrupted", "StudyRun", "run_study", "write_version"]

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
    #: a sequential study's finished cells of seeds past its last look, ``{seed: cells}``:
    #: kept in the run directory, not analysed in this version
    trained_ahead: dict[int, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.cells_failed == 0 and self.analysis.missing.empty

    @property
    def failures_dir(self) -> Path:
        """Where the tracebacks of failed cells are (for messages)."""
        return RunLedger(self.run_dir).failures_dir


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

    manifest = Manifest(None, meta, row_counts=counts, environment=env,
                        cells=cell_digests(outcomes))
    return store.publish(study, writer, manifest)


def run_study(spec: StudySpec, *, out: str | Path = "results", runs: str | Path = "runs",
              workers: int = 2, fresh: bool = False,
              progress: ProgressArg = True, executor: Any = None) -> StudyRun:
    """Run (or resume) every cell of ``spec`` and write a new result version under ``out``.

    The run directory ``<runs>/<spec.name>/`` caches trained models and finished cells;
    rerunning resumes it, and one process at a time may use it (a second is refused with
    the first one's PID). A run directory made for other outcomes (another
    :func:`~robuststats.runs.ledger.run_hash`: task, model, trainer, conditions,
    evaluation, seeds) is refused unless ``fresh``; other hypotheses or analysis options
    only re-analyse its cells. Failed cells are recorded; the version is still written,
    with the missing cells listed and the hypotheses that need them INCONCLUSIVE.

    ``executor`` (e.g. :class:`~robuststats.runs.ray_executor.RayExecutor`) runs the jobs
    instead of the local pool. ``out`` and ``runs`` are checked before anything runs. SIGINT and SIGTERM stop the run
    promptly with :class:`Interrupted` (finished cells are kept; rerun to resume).
    """
    from robuststats.runs import planned_items, preflight
    from robuststats.runs.executor import execute as execute_local

    # another executor (Ray) runs the same jobs against the same ledger
    execute = functools.partial(execute_local, executor=executor)

    with Run.start(out=out, runs=runs) as run:
        task = preflight(spec)
        items = [str(it.item_id) for it in planned_items(spec, task)]
        _warn_if_fewer_items(spec, len(items))
        with run.ledger(spec, fresh=fresh) as ledger:
            from robuststats.runs.identities import (
                check_recorded_checkpoints,
                recorded_checkpoints,
            )

            # a resumed run's checkpoints are the ones its finished cells were evaluated from
            check_recorded_checkpoints(ledger.root, spec)
            cells = plan(spec)
            done = ledger.finished(cells, items=items)
            pending = [c for c in cells if c not in done]
            sequential = None
            with run.progress(progress, len(cells), len(done)) as bar:
                if spec.sequential is not None:  # looks over the seeds; may stop early
                    from robuststats.study.sequential_run import run_looks

                    sequential = run_looks(spec, ledger, cells, items, done, workers=workers,
                                           execute=execute, progress=bar, executor=executor)
                    cells, report, done = sequential.cells, sequential.report, sequential.reused
                else:
                    report = execute(ledger, spec, pending, workers=workers, progress=bar)
                if spec.sweep is not None and spec.sweep.adaptive is not None:
                    # a dose-response sweep adds levels around each fitted threshold
                    from robuststats.study.sweep_run import refine

                    cells, rounds, reused = refine(spec, ledger, cells, items,
                                                   workers=workers, execute=execute)
                    report = ExecutionReport.combined([report, *rounds])
                    done = done | reused
            outcomes = ledger.outcomes(cells, items=items)
            failures = ledger.failures()
            injections = ledger.injections(cells)
            without_counts = [c.key for c in ledger.without_injections(cells)]
            # the checkpoints the cells were evaluated from, by path and SHA-256
            checkpoints = recorded_checkpoints(ledger.root)
        analysis = analyze_outcomes(outcomes, hypotheses=spec.hypotheses,
                                    options=spec.analysis, expected_cells=cells)
        if spec.sweep is not None:
            from robuststats.study.sweep_run import dose_tables

            analysis = _with_extra(analysis, dose_tables(outcomes, spec))
        if sequential is not None:
            from robuststats.study.sequential_run import sequential_tables

            analysis = sequential_tables(analysis, sequential.looks, spec)
        if not analysis.missing.empty:
            errors = [last_line(failures.get(Cell(*r).key, "not run"))
                      for r in analysis.missing.itertuples(index=False, name=None)]
            analysis = _with_missing(analysis, analysis.missing.assign(error=errors))
        meta = {
            "spec": spec.resolved(), "spec_hash": spec.spec_hash(), "run_hash": run_hash(spec),
            "description": spec.description,
            "seeds": spec.seed_list()[:sequential.n_seeds] if sequential is not None
            else spec.seed_list(),
            "noise_seeds": spec.evaluation.noise_seed_list(), "n_items": len(items),
            **({"n_items_requested": spec.evaluation.n_items}
               if spec.evaluation.n_items is not None
               and spec.evaluation.n_items != len(items) else {}),
            "cells_planned": len(cells),
            "cells_finished": len(cells) - len(analysis.missing), "cells_reused": len(done),
            "cells_run": report.cells_run, "cells_failed": report.cells_failed,
            "models_trained": report.models_trained, "run_dir": str(ledger.root),
            **({"checkpoints": checkpoints} if checkpoints else {}),
            "cells_without_injection_counts": without_counts,
            "device": device(), "workers": workers, "started": run.started,
            **({"executor": getattr(executor, "name", type(executor).__name__)}
               if executor is not None else {}),
            "finished": utc_now(), "seconds": round(run.seconds, 1),
            "alpha": spec.analysis.alpha,
            "confidence_level": spec.analysis.confidence_level,
            "multiplicity": spec.analysis.multiplicity,
            **({"sequential": _sequential_meta(sequential, spec)}
               if sequential is not None else {}),
        }
        try:
            version = write_version(out, spec.name, outcomes, analysis, meta,
                                    injections=injections)
        except OSError as exc:
            raise InputError(
                f"`out`: could not write the result version under {str(out)!r}: "
                f"{exc.strerror or exc}{errno_hint(exc)}. Nothing was published; the "
                f"{len(cells) - len(analysis.missing)} finished cell(s) are kept in "
                f"{str(ledger.root)!r}: rerun the same command to publish them without "
                "recomputing.") from None
    return StudyRun(version, analysis, ledger.root, len(cells), len(done), report.cells_run,
                    len(analysis.missing), report.models_trained, run.seconds,
                    sequential.ahead if sequential is not None else {})


def _sequential_meta(sequential: Any, spec: StudySpec) -> dict[str, Any]:
    """The manifest's ``sequential``: where the study stopped, and (when there are any)
    the seeds it could run ahead and the cells of later seeds it finished, not analysed."""
    meta: dict[str, Any] = {"stopped_at_look": sequential.stopped_at,
                            "looks": len(spec.sequential.looks) if spec.sequential else 0,
                            "seeds_used": sequential.n_seeds,
                            "seeds_planned": len(spec.seed_list())}
    if sequential.run_ahead:
        meta["run_ahead"] = sequential.run_ahead
    if sequential.ahead:
        meta["trained_ahead"] = {"seeds": list(sequential.ahead),
                                 "cells": sum(sequential.ahead.values()),
                                 "analysed": False}
    return meta


def _warn_if_fewer_items(spec: StudySpec, available: int) -> None:
    asked = spec.evaluation.n_items
    if asked is not None and asked > available:
        warnings.warn(f"`evaluation.n_items` asks for {asked} items but split "
                      f"{spec.evaluation.split!r} of task {spec.task.name!r} has "
                      f"{available}: every cell evaluates those {available} (the manifest and "
                      "report say so).", RobuststatsWarning, stacklevel=3)


def _with_extra(analysis: Analysis, tables: dict[str, pd.DataFrame]) -> Analysis:
    return replace(analysis, extra={**analysis.extra, **tables})


def _with_missing(analysis: Analysis, missing: pd.DataFrame) -> Analysis:
    return replace(analysis, missing=missing)
