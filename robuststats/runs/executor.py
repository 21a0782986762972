"""Run the pending cells of a plan in local processes, writing each cell as it finishes.

The unit of work handed to a process is a training job: one ``(condition, seed)`` model,
trained once (or loaded from the run directory's cache) and then evaluated under each of its
pending cells. Every cell's outcomes (and the evaluation's injection counts) are written
atomically the moment it finishes, so an interruption loses at most the cell in flight.
Failures are recorded per cell with the traceback; the remaining cells still run.

Workers receive the typed :class:`~robuststats.runs.spec.StudySpec` (it pickles, with its
engine and statistics objects). Tasks and trainers come from their registries
(:data:`~robuststats.models.tasks.TASKS`, :data:`~robuststats.models.trainer.TRAINERS`), which
also load ``package.module:factory`` references. An external trainer's ``factory(**params)``
returns an object with ``train(task, condition, seed=, workdir=)`` (``condition`` is a
:class:`~robuststats.models.trainer.TrainingCondition`) returning a model with ``save(path)``,
and ``load(path)``; a model with an ``evaluate(task, items, *, noise, noise_seed,
batch_size)`` method is evaluated by that method (``noise`` a
:class:`~robuststats.engine.NoiseSpec` or ``None``), every other model by
:func:`robuststats.models.evaluate.evaluate`.
"""

from __future__ import annotations

import inspect
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robuststats.models.registry import is_reference
from robuststats.runs.checks import build_task, build_trainer, planned_items
from robuststats.runs.jobprogress import JobReporter, TrainingTally
from robuststats.runs.ledger import RunLedger
from robuststats.runs.plan import Cell, TrainJob, jobs
from robuststats.runs.progress import DiskProgress
from robuststats.runs.spec import StudySpec
from robuststats.runs.workers import run_pool

__all__ = ["ExecutionReport", "JobCounts", "execute", "load_or_train", "longest_first",
           "mark_crashed", "resume_job", "run_job"]


@dataclass(frozen=True)
class ExecutionReport:
    """What one execution did: cells run now, cells that failed, models trained."""

    cells_run: int
    cells_failed: int
    models_trained: int
    seconds: float

    @classmethod
    def combined(cls, reports: Iterable[ExecutionReport]) -> ExecutionReport:
        """One report for several executions (a sweep's grid and its rounds)."""
        reports = list(reports)
        return cls(sum(r.cells_run for r in reports), sum(r.cells_failed for r in reports),
                   sum(r.models_trained for r in reports), sum(r.seconds for r in reports))


@dataclass(frozen=True)
class JobCounts:
    """What one training job (or several, added up) did: cells finished, cells failed,
    models trained. Returned by workers, so it crosses process (and Ray) borders."""

    done: int = 0
    failed: int = 0
    trained: int = 0

    def __add__(self, other: JobCounts) -> JobCounts:
        return JobCounts(self.done + other.done, self.failed + other.failed,
                         self.trained + other.trained)

    def report(self, seconds: float) -> ExecutionReport:
        return ExecutionReport(self.done, self.failed, self.trained, seconds)


def run_job(run_dir: str, spec: StudySpec, job: TrainJob, cells: list[Cell],
            on_cell: Callable[[int], None] | None = None,
            on_progress: Callable[[], None] | None = None) -> JobCounts:
    """Train (or load) one model and evaluate its cells; runs inside a worker process.

    ``on_cell(1)`` is called after each cell (finished or failed) when running in-process.
    Each cell's outcomes must hold exactly the planned items (:func:`planned_items`).
    The job's training steps and cell seconds go to its progress record in the run
    directory (:class:`~robuststats.runs.jobprogress.JobReporter`); ``on_progress`` runs
    after each write of it (in-process: the bar's poll).
    """
    external = is_reference(spec.trainer.name)
    if not external:
        import torch

        torch.set_num_threads(1)  # the pool is the parallelism; threads would oversubscribe
    ledger = RunLedger(Path(run_dir))
    reporter = JobReporter(ledger, job, on_write=on_progress)
    done = failed = 0
    try:
        model, task, trained_now = _model_for(ledger, spec, job, reporter)
        items = planned_items(spec, task)
        item_ids = [str(it.item_id) for it in items]
    except Exception:
        text = traceback.format_exc()
        for cell in cells:
            ledger.record_failure(cell, f"training {job.key} failed:\n{text}")
        reporter.close()
        if on_cell is not None:
            on_cell(len(cells))
        return JobCounts(failed=len(cells))
    if trained_now:
        reporter.trained()
    if spec.device is not None and not external:
        model.model.to(spec.device)  # a cached or loaded model comes back on the CPU
    for cell in cells:
        start = time.perf_counter()
        try:
            df = _evaluate(model, task, items, spec, cell, external=external)
            ledger.write_cell(cell, df, seconds=time.perf_counter() - start,
                              injections=df.attrs.get("injection_stats"), items=item_ids)
            done += 1
        except Exception:
            ledger.record_failure(cell, traceback.format_exc())
            failed += 1
        reporter.cell(time.perf_counter() - start)
        if on_cell is not None:
            on_cell(1)
    reporter.close()
    return JobCounts(done, failed, int(trained_now))


def resume_job(run_dir: str, spec: StudySpec, job: TrainJob, cells: list[Cell]) -> JobCounts:
    """:func:`run_job` on the ``cells`` not yet in the ledger: the body of a job that may run
    a second time after its worker died (a local pool's retry, a Ray task's rerun).

    The cells the first attempt wrote before dying are neither lost nor written twice.
    """
    ledger = RunLedger(Path(run_dir))
    todo = [c for c in cells if not ledger.cell_path(c).exists()]
    if len(todo) < len(cells):
        ledger.log_event({"event": "job_resumed", "job": job.key,
                          "cells_already_written": len(cells) - len(todo)})
    counts = run_job(run_dir, spec, job, todo) if todo else JobCounts()
    # the cells an earlier attempt of this job wrote were run in this execution too
    return counts + JobCounts(done=len(cells) - len(todo))


def _model_for(ledger: RunLedger, spec: StudySpec, job: TrainJob,
               reporter: JobReporter) -> tuple[Any, Any, bool]:
    task = build_task(spec)
    model, trained = load_or_train(ledger, spec, job, task=task, progress=reporter.step)
    return model, task, trained


def load_or_train(ledger: RunLedger, spec: StudySpec, job: TrainJob, *, task: Any = None,
                  by: str | None = None,
                  progress: Callable[[int, int], None] | None = None) -> tuple[Any, bool]:
    """The model of ``job`` and whether it was trained now: the condition's checkpoint
    (loaded where it is, never copied), the run directory's cached model, or trained with
    the study's trainer and published there. ``by`` names the command in the event log when
    it is not the study itself (``diagnose``, ``divergence``). ``progress(step, steps)``
    goes to a trainer whose ``train`` takes a ``progress`` argument (every registered
    trainer; an external factory's object only when it declares one)."""
    from robuststats.models.trainer import TrainedModel, TrainingCondition

    origin = {} if by is None else {"by": by}
    pattern = spec.conditions[job.condition].checkpoint
    if pattern is not None:
        from robuststats.models.checkpoints import load_checkpoint, resolve_checkpoint
        from robuststats.runs.identities import checkpoint_seen

        ref = resolve_checkpoint(pattern, condition=job.condition, seed=job.seed)
        # the run evaluates this checkpoint's files, whatever later sits at its path
        identity = checkpoint_seen(ledger.root, job, ref.path)
        model = load_checkpoint(ref)
        model.info["checkpoint"]["sha256"] = identity["sha256"]
        ledger.log_event({"event": "checkpoint_loaded", "job": job.key, **origin,
                          **model.info["checkpoint"]})
        return model, False
    trainer = build_trainer(spec)
    bind_run = getattr(trainer, "bind_run", None)
    if callable(bind_run):  # a trainer that keeps logs or outputs in the run directory
        bind_run(ledger.root)
    if ledger.model_ready(job) and (problem := ledger.model_problem(job)) is not None:
        ledger.set_aside_model(job, problem)  # changed since it was published: train again
    if ledger.model_ready(job):
        loader = getattr(trainer, "load", None) or TrainedModel.load
        return loader(ledger.model_path(job)), False
    condition = TrainingCondition.from_spec(job.condition, spec.conditions[job.condition])
    staging = ledger.stage_model(job)
    start = time.perf_counter()
    extra = {"progress": progress} if progress is not None and _takes(trainer, "progress") \
        else {}
    if spec.device is not None and _takes(trainer, "device", through_kwargs=False):
        extra["device"] = spec.device
    model = trainer.train(task if task is not None else build_task(spec), condition,
                          seed=job.seed, workdir=staging.workdir, **extra)
    model.save(staging.model_path)
    ledger.publish_model(job, staging)
    ledger.log_event({"event": "model_trained", "job": job.key, **origin,
                      "seconds": round(time.perf_counter() - start, 3)})
    return model, True


def _takes(trainer: Any, name: str, *, through_kwargs: bool = True) -> bool:
    """Whether ``trainer.train`` accepts ``name=`` (by name, or through ``**kwargs`` when
    ``through_kwargs``)."""
    try:
        params = inspect.signature(trainer.train).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or (through_kwargs and p.kind is inspect.Parameter.VAR_KEYWORD)
               for p in params)


def _evaluate(model: Any, task: Any, items: list[Any], spec: StudySpec, cell: Cell,
              *, external: bool) -> Any:
    noise = spec.cell_noise(cell.condition, cell.eval_noise, cell.noise_seed)
    batch = spec.evaluation.batch_size
    own = getattr(model, "evaluate", None)
    if external and own is not None:
        return own(task, items, noise=noise, noise_seed=cell.noise_seed, batch_size=batch)
    from robuststats.models.evaluate import evaluate

    return evaluate(model, task, items, noise=noise, noise_seed=cell.noise_seed,
                    batch_size=batch)


def execute(ledger: RunLedger, spec: StudySpec, pending: list[Cell], *, workers: int = 2,
            progress: Callable[[int], None] | None = None,
            executor: Any = None) -> ExecutionReport:
    """Run ``pending`` cells; ``progress(n)`` is called as cells finish (or fail).

    ``workers <= 1`` runs everything in this process (no start-up cost, easy to debug);
    otherwise training jobs go to a spawn-context process pool of that size. An
    ``executor`` (e.g. :class:`~robuststats.runs.ray_executor.RayExecutor`) runs the jobs
    instead, through its ``execute(ledger, spec, pending, progress=)``.
    """
    start = time.perf_counter()
    grouped = jobs(pending)
    for cell in pending:
        # a retried cell's old failure would count as "done" for the progress bar
        ledger.clear_failure(cell)
    if executor is not None:
        return executor.execute(ledger, spec, pending, progress=progress)
    # workers may run in another working directory: hand them the absolute run directory
    run_dir = str(ledger.root.resolve())
    training = training_tally(ledger, spec, grouped, progress)
    if workers <= 1 or len(grouped) <= 1:
        totals = sum((run_job(run_dir, spec, job, cells, on_cell=progress,
                              on_progress=training.poll)
                      for job, cells in grouped.items()), JobCounts())
    else:
        totals = _run_pool(ledger, run_dir, spec, grouped, workers, progress, training)
    return totals.report(time.perf_counter() - start)


def training_tally(ledger: RunLedger, spec: StudySpec, grouped: dict[TrainJob, list[Cell]],
                   progress: Any) -> TrainingTally:
    """The jobs' progress records as the bar's ``work`` (models and steps still to
    train: the jobs without a checkpoint or a cached model). Shared by the local
    executors and Ray."""
    to_train = [job for job in grouped if spec.conditions[job.condition].checkpoint is None
                and not ledger.model_ready(job)]
    # the builtin trainer's count when the study sets it; else learnt from the first report
    steps = spec.trainer.params.get("steps") if spec.trainer.name == "builtin" else None
    return TrainingTally(ledger, list(grouped), to_train, progress,
                         steps_per_model=steps if isinstance(steps, int) else None)


def _run_pool(ledger: RunLedger, run_dir: str, spec: StudySpec,
              grouped: dict[TrainJob, list[Cell]], workers: int,
              progress: Callable[[int], None] | None, training: TrainingTally) -> JobCounts:
    """Run the jobs in the platform's pool (:func:`~robuststats.runs.workers.run_pool`):
    any interruption stops it within a second, keeping the cells written so far."""
    job_list = longest_first(ledger, spec, grouped)
    totals = [JobCounts()]
    all_cells = [c for cells in grouped.values() for c in cells]
    # count finished or failed cells, and the training the workers report
    tally = DiskProgress(progress, lambda: sum(1 for c in all_cells if ledger.settled(c)),
                         training.poll)

    def on_error(i: int, exc: BaseException) -> None:
        text = "the worker process died" if isinstance(exc, BrokenProcessPool) \
            else traceback.format_exc()
        totals[0] += mark_crashed(ledger, grouped[job_list[i]], text)

    def on_result(i: int, counts: JobCounts) -> None:
        totals[0] += counts

    # a job whose worker died runs again: it resumes after the cells it wrote
    run_pool(resume_job, [(run_dir, spec, job, grouped[job]) for job in job_list], workers,
             on_result=on_result, on_error=on_error, poll=tally.poll)
    return totals[0]


def longest_first(ledger: RunLedger, spec: StudySpec,
                  grouped: dict[TrainJob, list[Cell]]) -> list[TrainJob]:
    """The jobs of ``grouped`` in the order a pool should start them: the longest first.

    A pool's run ends when its last job does; started in plan order, the study's costliest
    jobs (training with noise in both passes) came last and one worker sat idle while the
    other finished them. Longest-first (Graham 1969, LPT) bounds that idle tail by the
    shortest job. The estimate: a model to train before a cached one, then training noise in
    two passes before one before none, then more cells. Ties keep plan order. Each job's
    outcomes depend only on its own seeds, never on when it runs.
    """
    def cost(job: TrainJob) -> tuple[int, int, int]:
        condition = spec.conditions[job.condition]
        trains = condition.checkpoint is None and not ledger.model_ready(job)
        noise = condition.train_noise
        passes = 0 if noise is None or not trains else \
            sum(scale > 0 for scale in noise.phase_scales.values())
        return (int(trains), passes, len(grouped[job]))

    return sorted(grouped, key=cost, reverse=True)


def mark_crashed(ledger: RunLedger, cells: list[Cell], text: str) -> JobCounts:
    """Record ``text`` as the failure of each of ``cells`` that a dead worker left unwritten."""
    failed = 0
    for cell in cells:
        if not ledger.cell_path(cell).exists():
            ledger.record_failure(cell, text)
            failed += 1
    return JobCounts(done=len(cells) - failed, failed=failed)
