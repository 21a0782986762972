"""Run a study's training jobs as Ray tasks (``robuststats study ... --executor ray``).

The unit of work is the local pool's: one ``(condition, seed)`` model trained (or loaded)
and evaluated under its pending cells, by the same :func:`~robuststats.runs.executor.run_job`,
which writes every cell into the run directory the moment it finishes. The run directory
must therefore be on a file system every Ray node sees (NFS, Lustre, a mounted bucket);
the ledger there is the only state, so results are the local executor's bit for bit and
resume works the same way.

Each task asks Ray for the study's ``resources:`` (``num_cpus``, ``num_gpus``). A task whose
worker dies (the process killed, the node lost) is rerun by Ray up to ``max_retries``
times; a rerun first drops the cells that were already written, so a cell is never
evaluated twice into the ledger and none is lost. Without an address a local Ray instance
starts (no dashboard, ``num_cpus`` limited); ``address="auto"`` or ``"ray://..."`` attaches
to a running cluster, e.g. from its head node. Ray is imported only here, lazily
(``pip install robuststats[ray]``).
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robuststats._fields import check_whole
from robuststats.errors import InputError
from robuststats.runs.executor import (
    ExecutionReport,
    JobCounts,
    mark_crashed,
    resume_job,
    training_tally,
)
from robuststats.runs.ledger import RunLedger
from robuststats.runs.plan import Cell, TrainJob, jobs
from robuststats.runs.progress import DiskProgress
from robuststats.runs.spec import ResourcesSpec, StudySpec

__all__ = ["RayExecutor", "RayStream"]

_POLL_SECONDS = 0.5


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--executor ray needs Ray: pip install 'robuststats[ray]'.") from None
    return ray


def ray_job(run_dir: str, spec: StudySpec, job: TrainJob, cells: list[Cell]) -> JobCounts:
    """The body of one Ray task: :func:`~robuststats.runs.executor.resume_job`.

    A rerun of a task whose worker died finds the cells it wrote before dying and skips
    them: they are neither lost nor written twice.
    """
    return resume_job(run_dir, spec, job, cells)


class RayExecutor:
    """Executes pending cells as Ray tasks; pass it to ``run_study(executor=...)``.

    ``address``: ``None`` starts a local Ray with ``num_cpus`` CPUs (default: this
    machine's count), ``"auto"`` or an address attaches to a running cluster. A Ray
    already initialised in this process (a test, a notebook) is used as it is.
    """

    name = "ray"

    def __init__(self, *, address: str | None = None, num_cpus: int | None = None) -> None:
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise InputError(f"`address` must be 'auto' or a Ray address, got {address!r}.")
        if num_cpus is not None:
            check_whole(num_cpus, "num_cpus", low=1)
        self.address = address
        self.num_cpus = num_cpus
        self._started = False

    def _init(self) -> Any:
        ray = _ray()
        if ray.is_initialized():
            return ray
        # workers import robuststats from the same place as this process
        root = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        runtime_env = {"env_vars": {"PYTHONPATH": path}}
        if self.address is None:
            ray.init(num_cpus=self.num_cpus or os.cpu_count() or 1, include_dashboard=False,
                     log_to_driver=False, runtime_env=runtime_env)
        else:
            ray.init(address=self.address, log_to_driver=False, runtime_env=runtime_env)
        self._started = True
        return ray

    def close(self) -> None:
        """Shut down the Ray instance this executor started (not one it found)."""
        if self._started:
            _ray().shutdown()
            self._started = False

    def stream(self, ledger: RunLedger, spec: StudySpec, *,
               progress: Callable[[int], None] | None = None) -> RayStream:
        """Jobs submitted one at a time as Ray tasks and collected as they finish
        (:class:`~robuststats.runs.stream.JobStream`: a sequential study's run-ahead)."""
        return RayStream(self._init(), ledger, spec, progress=progress)

    def execute(self, ledger: RunLedger, spec: StudySpec, pending: list[Cell], *,
                progress: Callable[[int], None] | None = None) -> ExecutionReport:
        start = time.perf_counter()
        grouped = jobs(pending)
        totals = JobCounts()
        if not grouped:
            return ExecutionReport(0, 0, 0, time.perf_counter() - start)
        ray = self._init()
        res = spec.resources or ResourcesSpec()
        task = ray.remote(ray_job).options(num_cpus=res.num_cpus, num_gpus=res.num_gpus,
                                           max_retries=res.max_retries,
                                           retry_exceptions=False)
        run_dir = str(ledger.root.resolve())
        spec_ref = ray.put(spec)
        # the cells on disk, and the training the tasks report through the run directory
        # (earlier records cleared before any task starts)
        training = training_tally(ledger, spec, grouped, progress)
        refs = {task.remote(run_dir, spec_ref, job, cells): job for job, cells in grouped.items()}
        all_cells = [c for cells in grouped.values() for c in cells]
        tally = DiskProgress(progress, lambda: sum(1 for c in all_cells if ledger.settled(c)),
                             training.poll)
        waiting = list(refs)
        try:
            while waiting:
                done, waiting = ray.wait(waiting, num_returns=len(waiting),
                                         timeout=_POLL_SECONDS)
                for ref in done:
                    job = refs[ref]
                    try:
                        counts = ray.get(ref)
                    except Exception:  # the worker died past its retries, or Ray failed
                        counts = mark_crashed(ledger, grouped[job], traceback.format_exc())
                    totals += counts
                tally.poll()
        except BaseException:
            for ref in waiting:
                ray.cancel(ref, force=True)
            raise
        return totals.report(time.perf_counter() - start)


class RayStream:
    """A :class:`~robuststats.runs.stream.JobStream` of Ray tasks: each job is the task of
    :meth:`RayExecutor.execute` (same resources and retries); :meth:`stop` cancels every
    outstanding task with ``force`` (its worker is ended; the cells it wrote are kept)."""

    def __init__(self, ray: Any, ledger: RunLedger, spec: StudySpec, *,
                 progress: Callable[[int], None] | None = None) -> None:
        from robuststats.runs.stream import StreamTally

        res = spec.resources or ResourcesSpec()
        self.ray, self.ledger = ray, ledger
        self.task = ray.remote(ray_job).options(num_cpus=res.num_cpus, num_gpus=res.num_gpus,
                                                max_retries=res.max_retries,
                                                retry_exceptions=False)
        self.run_dir = str(ledger.root.resolve())
        self.spec, self.spec_ref = spec, ray.put(spec)
        self.tally = StreamTally(ledger, spec, progress)
        self.refs: dict[Any, tuple[TrainJob, list[Cell]]] = {}

    def submit(self, job: TrainJob, cells: list[Cell]) -> None:
        self.tally.add(job, cells)
        self.refs[self.task.remote(self.run_dir, self.spec_ref, job, cells)] = (job, cells)

    def outstanding(self) -> set[TrainJob]:
        return {job for job, _ in self.refs.values()}

    def completed(self, timeout: float) -> list[tuple[TrainJob, JobCounts]]:
        out: list[tuple[TrainJob, JobCounts]] = []
        if self.refs:
            # the first to finish (or the timeout), then every other one already done
            done, rest = self.ray.wait(list(self.refs), num_returns=1, timeout=timeout)
            if done and rest:
                done += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
            for ref in done:
                job, cells = self.refs.pop(ref)
                try:
                    counts = self.ray.get(ref)
                except Exception:  # the worker died past its retries, or Ray failed
                    counts = mark_crashed(self.ledger, cells, traceback.format_exc())
                out.append((job, counts))
        else:
            time.sleep(min(timeout, 0.05))
        self.tally.poll()
        return out

    def stop(self) -> None:
        for ref in self.refs:
            self.ray.cancel(ref, force=True)
        self.refs.clear()
