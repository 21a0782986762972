"""Run the pending cells of a plan in local processes, writing each cell as it finishes.

The unit of work handed to a process is a training job: one ``(condition, seed)`` model,
trained once (or loaded from the run directory's cache) and then evaluated under each of its
pending cells. Every cell's outcomes (and the evaluation's injection counts) are written
atomically the moment it finishes, so an interruption loses at most the cell in flight.
Failures are recorded per cell with the traceback; the remaining cells still run.

Workers receive the typed :class:`~robuststats.study.spec.StudySpec` (it pickles, with its
engine and statistics objects). Tasks and trainers come from their registries
(:data:`~robuststats.study.tasks.TASKS`, :data:`~robuststats.study.trainer.TRAINERS`), which
also load ``package.module:factory`` references. An external trainer's ``factory(**params)``
returns an object with ``train(task, condition, seed=, workdir=)`` (``condition`` is a
:class:`~robuststats.study.trainer.TrainingCondition`) returning a model with ``save(path)``,
and ``load(path)``; a model with an ``evaluate(task, items, *, noise, noise_seed,
batch_size)`` method is evaluated by that method (``noise`` a
:class:`~robuststats.engine.NoiseSpec` or ``None``), every other model by
:func:`robuststats.study.evaluate.evaluate`.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robuststats.study.ledger import RunLedger
from robuststats.study.plan import Cell, TrainJob, jobs
from robuststats.study.registry import is_reference
from robuststats.study.spec import StudySpec

__all__ = ["DiskProgress", "ExecutionReport", "build_task", "build_trainer", "execute", "load_or_train",
           "planned_items",
           "preflight", "run_job"]

#: seconds between a worker's checks that its parent is alive (the watchdog of a worker
#: on a platform without PR_SET_PDEATHSIG, and the backstop on Linux)
PARENT_POLL_SECONDS = 0.25
#: seconds the workers get to exit after SIGTERM when a run is interrupted, before SIGKILL
_TERMINATE_GRACE = 1.0


@dataclass(frozen=True)
class ExecutionReport:
    """What one execution did: cells run now, cells that failed, models trained."""

    cells_run: int
    cells_failed: int
    models_trained: int
    seconds: float


def build_task(spec: StudySpec) -> Any:
    """The study's task, from the task registry (or a ``module:factory`` reference)."""
    from robuststats.study.tasks import TASKS

    return TASKS.build(spec.task.name, **spec.task.params)


def build_trainer(spec: StudySpec) -> Any:
    """The study's trainer with its parameters (``model`` sizes included when given)."""
    from robuststats.study.trainer import TRAINERS

    params = dict(spec.trainer.params)
    if spec.model:
        params["model"] = dict(spec.model)
    return TRAINERS.build(spec.trainer.name, **params)


def preflight(spec: StudySpec) -> Any:
    """Build the task and the trainer once in the calling process; returns the task.

    Unknown names and bad parameters then stop the study with one clear error before any
    worker starts, instead of failing every cell.
    """
    with spec.pointing_at("task"):
        task = build_task(spec)
    with spec.pointing_at("trainer"):
        trainer = build_trainer(spec)
    _check_layers(spec, trainer)
    from robuststats.study.checkpoints import check_checkpoints

    check_checkpoints(spec)  # every (condition, seed) checkpoint exists and is complete
    return task


def _check_layers(spec: StudySpec, trainer: Any) -> None:
    """Layers named by a condition's ``train_noise`` (``layers``, integer ``layer_scales``
    keys) must exist in the model the trainer builds; a model loaded from a checkpoint is
    checked by the engine when it is loaded."""
    from robuststats.errors import InputError
    from robuststats.study.model import ModelSpec

    sizes = getattr(trainer, "params", {}).get("model")
    if not isinstance(sizes, dict) or spec.trainer.name != "builtin":
        return
    depth = ModelSpec.from_dict(sizes).num_layers
    for name, condition in spec.conditions.items():
        noise = condition.train_noise
        if noise is None:
            continue
        named = {"layers": noise.layer_indices or (),
                 "layer_scales": [k for k in (noise.layer_scales or {}) if isinstance(k, int)]}
        for key, indices in named.items():
            beyond = sorted(i for i in indices if i >= depth)
            if beyond:
                where = spec.where(("conditions", name, "train_noise", key))
                raise InputError(f"{where}: layer {beyond[0]} does not exist: the model has "
                                 f"{depth} decoder layers (0-{depth - 1}).")


def planned_items(spec: StudySpec, task: Any) -> list[Any]:
    """The items every cell evaluates: the task's ``evaluation.split``, cut to
    ``evaluation.n_items`` (which may ask for more than the split has: then all of them)."""
    items = list(task.items(spec.evaluation.split))
    if spec.evaluation.n_items is not None:
        items = items[: spec.evaluation.n_items]
    return items


def run_job(run_dir: str, spec: StudySpec, job: TrainJob, cells: list[Cell],
            on_cell: Callable[[int], None] | None = None) -> dict[str, int]:
    """Train (or load) one model and evaluate its cells; runs inside a worker process.

    ``on_cell(1)`` is called after each cell (finished or failed) when running in-process.
    Each cell's outcomes must hold exactly the planned items (:func:`planned_items`).
    """
    external = is_reference(spec.trainer.name)
    if not external:
        import torch

        torch.set_num_threads(1)  # the pool is the parallelism; threads would oversubscribe
    ledger = RunLedger(Path(run_dir))
    counts = {"done": 0, "failed": 0, "trained": 0}
    try:
        model, task, trained_now = _model_for(ledger, spec, job)
        counts["trained"] = int(trained_now)
        items = planned_items(spec, task)
        item_ids = [str(it.item_id) for it in items]
    except Exception:
        text = traceback.format_exc()
        for cell in cells:
            ledger.record_failure(cell, f"training {job.key} failed:\n{text}")
        counts["failed"] = len(cells)
        if on_cell is not None:
            on_cell(len(cells))
        return counts
    for cell in cells:
        start = time.perf_counter()
        try:
            df = _evaluate(model, task, items, spec, cell, external=external)
            ledger.write_cell(cell, df, seconds=time.perf_counter() - start,
                              injections=df.attrs.get("injection_stats"), items=item_ids)
            counts["done"] += 1
        except Exception:
            ledger.record_failure(cell, traceback.format_exc())
            counts["failed"] += 1
        if on_cell is not None:
            on_cell(1)
    return counts


def _model_for(ledger: RunLedger, spec: StudySpec, job: TrainJob) -> tuple[Any, Any, bool]:
    task = build_task(spec)
    model, trained = load_or_train(ledger, spec, job, task=task)
    return model, task, trained


def load_or_train(ledger: RunLedger, spec: StudySpec, job: TrainJob, *, task: Any = None,
                  by: str | None = None) -> tuple[Any, bool]:
    """The model of ``job`` and whether it was trained now: the condition's checkpoint
    (loaded where it is, never copied), the run directory's cached model, or trained with
    the study's trainer and published there. ``by`` names the command in the event log when
    it is not the study itself (``diagnose``, ``divergence``)."""
    from robuststats.study.trainer import TrainedModel, TrainingCondition

    origin = {} if by is None else {"by": by}
    pattern = spec.conditions[job.condition].checkpoint
    if pattern is not None:
        from robuststats.study.checkpoints import load_checkpoint, resolve_checkpoint

        ref = resolve_checkpoint(pattern, condition=job.condition, seed=job.seed)
        model = load_checkpoint(ref)
        ledger.log_event({"event": "checkpoint_loaded", "job": job.key, **origin,
                          **model.info["checkpoint"]})
        return model, False
    trainer = build_trainer(spec)
    bind_run = getattr(trainer, "bind_run", None)
    if callable(bind_run):  # a trainer that keeps logs or outputs in the run directory
        bind_run(ledger.root)
    if ledger.model_ready(job):
        loader = getattr(trainer, "load", None) or TrainedModel.load
        return loader(ledger.model_path(job)), False
    condition = TrainingCondition.from_spec(job.condition, spec.conditions[job.condition])
    staging = ledger.stage_model(job)
    start = time.perf_counter()
    model = trainer.train(task if task is not None else build_task(spec), condition,
                          seed=job.seed, workdir=staging.workdir)
    model.save(staging.model_path)
    ledger.publish_model(job, staging)
    ledger.log_event({"event": "model_trained", "job": job.key, **origin,
                      "seconds": round(time.perf_counter() - start, 3)})
    return model, True


def _evaluate(model: Any, task: Any, items: list[Any], spec: StudySpec, cell: Cell,
              *, external: bool) -> Any:
    noise = spec.cell_noise(cell.condition, cell.eval_noise, cell.noise_seed)
    batch = spec.evaluation.batch_size
    own = getattr(model, "evaluate", None)
    if external and own is not None:
        return own(task, items, noise=noise, noise_seed=cell.noise_seed, batch_size=batch)
    from robuststats.study.evaluate import evaluate

    return evaluate(model, task, items, noise=noise, noise_seed=cell.noise_seed,
                    batch_size=batch)


def execute(ledger: RunLedger, spec: StudySpec, pending: list[Cell], *, workers: int = 2,
            progress: Callable[[int], None] | None = None,
            executor: Any = None) -> ExecutionReport:
    """Run ``pending`` cells; ``progress(n)`` is called as cells finish (or fail).

    ``workers <= 1`` runs everything in this process (no start-up cost, easy to debug);
    otherwise training jobs go to a spawn-context process pool of that size. An
    ``executor`` (e.g. :class:`~robuststats.study.ray_executor.RayExecutor`) runs the jobs
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
    totals = {"done": 0, "failed": 0, "trained": 0}

    def add(counts: dict[str, int]) -> None:
        for k in totals:
            totals[k] += counts.get(k, 0)

    if workers <= 1 or len(grouped) <= 1:
        for job, cells in grouped.items():
            add(run_job(run_dir, spec, job, cells, on_cell=progress))
    else:
        add(_run_pool(ledger, run_dir, spec, grouped, workers, progress))
    return ExecutionReport(totals["done"], totals["failed"], totals["trained"],
                           time.perf_counter() - start)


class DiskProgress:
    """Progress read from the files on disk, which are the truth of a pool's work:
    :meth:`poll` advances ``progress`` by how much ``count()`` grew since the last poll
    (nothing when ``progress`` is None). Shared by the local pool, the Ray executor and the
    probe's pool."""

    def __init__(self, progress: Callable[[int], None] | None, count: Callable[[], int]) -> None:
        self.progress, self.count, self.reported = progress, count, 0

    def poll(self) -> None:
        if self.progress is None:
            return
        now = self.count()
        if now > self.reported:
            self.progress(now - self.reported)
            self.reported = now


def _run_pool(ledger: RunLedger, run_dir: str, spec: StudySpec,
              grouped: dict[TrainJob, list[Cell]], workers: int,
              progress: Callable[[int], None] | None) -> dict[str, int]:
    """Run the jobs in a spawn-context pool; any interruption stops it within a second.

    On Ctrl-C (or any exception, or SIGTERM turned into one by the runner) pending jobs are
    cancelled and the workers terminated at once, instead of waiting for every submitted
    job to finish: the cells written so far are kept, the cells in flight are lost.
    """
    totals = {"done": 0, "failed": 0, "trained": 0}
    ctx = multiprocessing.get_context("spawn")
    all_cells = [c for cells in grouped.values() for c in cells]
    # count finished or failed cells
    tally = DiskProgress(progress, lambda: sum(1 for c in all_cells if ledger.settled(c)))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                               initializer=_worker_init, initargs=(os.getpid(),))
    try:
        futures: dict[Future[dict[str, int]], TrainJob] = {
            pool.submit(run_job, run_dir, spec, job, cells): job
            for job, cells in grouped.items()
        }
        pending_f = set(futures)
        while pending_f:
            done, pending_f = wait(pending_f, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                job = futures[fut]
                try:
                    counts = fut.result()
                except BrokenProcessPool:
                    counts = _mark_crashed(ledger, grouped[job], "the worker process died")
                except Exception:
                    counts = _mark_crashed(ledger, grouped[job], traceback.format_exc())
                for k in totals:
                    totals[k] += counts[k]
            tally.poll()
    except BaseException:
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return totals


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now (SIGTERM, then SIGKILL)."""
    # the executor has no public way to end running work; its process table is the only
    # handle on the workers (a dict pid -> Process since Python 3.7)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + _TERMINATE_GRACE
    for p in processes:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in processes:
        if p.is_alive():
            p.kill()
            p.join(1.0)


def _worker_init(parent_pid: int) -> None:
    """Runs first in every worker: make it die with its parent, and leave Ctrl-C to it.

    A worker holds a model (hundreds of MB) and would otherwise run on for minutes as an
    orphan after its parent is killed (SIGKILL cannot be handled by the parent). On Linux,
    ``PR_SET_PDEATHSIG`` has the kernel send SIGKILL when the parent dies; everywhere, a
    daemon thread checks ``os.getppid()`` every :data:`PARENT_POLL_SECONDS` and exits.
    SIGINT is ignored: Ctrl-C reaches the whole process group, and the parent decides
    (it stops the pool at once, see :func:`_stop_pool`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _kill_me_with_parent()
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the line above could take effect
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True,
                     name="robuststats-parent-watch").start()


def _kill_me_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl here: the watchdog thread remains
        pass


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(PARENT_POLL_SECONDS)
        if os.getppid() != parent_pid:
            os._exit(1)  # orphaned: the cell in flight is lost, finished cells are on disk


def _mark_crashed(ledger: RunLedger, cells: list[Cell], text: str) -> dict[str, int]:
    failed = 0
    for cell in cells:
        if not ledger.cell_path(cell).exists():
            ledger.record_failure(cell, text)
            failed += 1
    return {"done": len(cells) - failed, "failed": failed, "trained": 0}
