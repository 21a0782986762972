"""Submit training jobs one at a time and collect them as they finish: the run path of a
study whose work is decided as it goes (a sequential study training ahead of its looks).

:func:`execute <robuststats.runs.executor.execute>` takes a fixed list of cells and returns
when all are settled. A :class:`JobStream` instead stays open: ``submit(job, cells)`` queues
one training job (its model, then its cells; the job runs in submission order when a worker
is free), ``completed(timeout)`` returns the jobs that finished since the last call, and
``stop()`` ends every job still queued or running at once. Two implementations share the
interface: :class:`PoolStream` (one spawn-context process pool for the whole stream, under
the platform's worker policy, :mod:`robuststats.runs.workers`) and
:class:`~robuststats.runs.ray_executor.RayStream` (Ray tasks).

What is safe to stop: each job is :func:`~robuststats.runs.executor.resume_job`, which
writes every cell atomically the moment it finishes, so a stopped job keeps the cells it
finished and loses only the cell in flight (and its model, when it was still training);
a later run reuses what it kept. A worker that dies breaks a local pool: the jobs it broke
run again through :func:`~robuststats.runs.workers.run_pool`, which isolates the job that
kills its worker (it is recorded as failed) and reruns the others after the cells they
wrote; later submissions go to a new pool.
"""

from __future__ import annotations

import os
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from robuststats.runs.executor import JobCounts, mark_crashed, resume_job, training_tally
from robuststats.runs.ledger import RunLedger
from robuststats.runs.plan import Cell, TrainJob
from robuststats.runs.progress import DiskProgress
from robuststats.runs.spec import StudySpec
from robuststats.runs.workers import run_pool, spawn_context, stop_pool, worker_init

__all__ = ["JobStream", "PoolStream", "StreamTally", "open_stream"]


class JobStream(Protocol):
    """Training jobs submitted one at a time, collected as they finish."""

    def submit(self, job: TrainJob, cells: list[Cell]) -> None:
        """Queue ``job`` to train (or load) its model and evaluate ``cells``."""

    def completed(self, timeout: float) -> list[tuple[TrainJob, JobCounts]]:
        """The jobs that finished (or failed) since the last call, waiting up to
        ``timeout`` seconds for one when none has."""

    def outstanding(self) -> set[TrainJob]:
        """The jobs submitted and not yet returned by :meth:`completed`."""

    def stop(self) -> None:
        """End every outstanding job now; the cells they wrote are kept."""


class StreamTally:
    """The progress bar of a stream: cells settled on disk among those submitted, and the
    training the jobs report (:class:`~robuststats.runs.jobprogress.TrainingTally`, grown
    as jobs are submitted)."""

    def __init__(self, ledger: RunLedger, spec: StudySpec, progress: Any) -> None:
        self.ledger, self.spec = ledger, spec
        self.cells: list[Cell] = []
        self.training = training_tally(ledger, spec, {}, progress)
        self.disk = DiskProgress(progress, self._settled, self.training.poll)

    def add(self, job: TrainJob, cells: list[Cell]) -> None:
        """Count ``job`` from now on (its progress record of an earlier run is removed)."""
        for cell in cells:
            # a retried cell's old failure would count as settled
            self.ledger.clear_failure(cell)
        self.ledger.clear_progress(job)
        self.training.jobs.append(job)
        if self.spec.conditions[job.condition].checkpoint is None \
                and not self.ledger.model_ready(job):
            self.training.to_train.add(job)
        self.cells += cells

    def _settled(self) -> int:
        return sum(1 for c in self.cells if self.ledger.settled(c))

    def poll(self) -> None:
        self.disk.poll()


class PoolStream:
    """A :class:`JobStream` on one spawn-context process pool of ``workers`` processes
    (see the module doc for stopping and dead workers)."""

    def __init__(self, ledger: RunLedger, spec: StudySpec, workers: int, *,
                 progress: Any = None) -> None:
        self.ledger, self.spec, self.workers = ledger, spec, workers
        # workers may run in another working directory: the absolute run directory
        self.run_dir = str(ledger.root.resolve())
        self.tally = StreamTally(ledger, spec, progress)
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[Future[Any], tuple[TrainJob, list[Cell]]] = {}
        # jobs submitted after a dead worker broke the pool (found on the next collection)
        self._held: list[tuple[TrainJob, list[Cell]]] = []

    def _the_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers,
                                             mp_context=spawn_context(),
                                             initializer=worker_init, initargs=(os.getpid(),))
        return self._pool

    def submit(self, job: TrainJob, cells: list[Cell]) -> None:
        self.tally.add(job, cells)
        try:
            fut = self._the_pool().submit(resume_job, self.run_dir, self.spec, job, cells)
        except BrokenProcessPool:  # a worker died since the last collection
            self._held.append((job, cells))
            return
        self._futures[fut] = (job, cells)

    def outstanding(self) -> set[TrainJob]:
        return {job for job, _ in [*self._futures.values(), *self._held]}

    def completed(self, timeout: float) -> list[tuple[TrainJob, JobCounts]]:
        out: list[tuple[TrainJob, JobCounts]] = []
        broken, self._held = self._held, []
        if self._futures:
            done, _ = wait(list(self._futures), timeout=timeout, return_when=FIRST_COMPLETED)
            for fut in done:
                job, cells = self._futures.pop(fut)
                try:
                    out.append((job, fut.result()))
                except BrokenProcessPool:
                    broken.append((job, cells))
                except Exception:
                    out.append((job, mark_crashed(self.ledger, cells,
                                                  traceback.format_exc())))
        elif not broken:
            time.sleep(min(timeout, 0.05))
        if broken:
            out += self._recover(broken)
        self.tally.poll()
        return out

    def _recover(self, broken: list[tuple[TrainJob, list[Cell]]]
                 ) -> list[tuple[TrainJob, JobCounts]]:
        """A dead worker broke the pool: every job not finished with it, in submission
        order, runs again in the platform's pool, which isolates the one that kills its
        worker; later submissions go to a new pool."""
        out: list[tuple[TrainJob, JobCounts]] = []
        rest: list[tuple[TrainJob, list[Cell]]] = []
        for fut, (job, cells) in self._futures.items():
            if fut.done() and fut.exception() is None:  # finished before the break
                out.append((job, fut.result()))
            else:  # every other future of a broken pool fails
                rest.append((job, cells))
        self._futures.clear()
        if self._pool is not None:
            stop_pool(self._pool)
            self._pool = None
        todo = sorted([*broken, *rest], key=lambda jc: _order(self.spec, jc[0]))

        def on_result(i: int, counts: JobCounts) -> None:
            out.append((todo[i][0], counts))

        def on_error(i: int, exc: BaseException) -> None:
            text = "the worker process died" if isinstance(exc, BrokenProcessPool) \
                else traceback.format_exc()
            out.append((todo[i][0], mark_crashed(self.ledger, todo[i][1], text)))

        run_pool(resume_job, [(self.run_dir, self.spec, job, cells) for job, cells in todo],
                 self.workers, on_result=on_result, on_error=on_error, poll=self.tally.poll)
        return out

    def stop(self) -> None:
        self._futures.clear()
        self._held.clear()
        if self._pool is not None:
            stop_pool(self._pool)
            self._pool = None


def _order(spec: StudySpec, job: TrainJob) -> tuple[int, int]:
    """Seed order, then the conditions' order: the order the looks need."""
    seeds = spec.seed_list()
    return seeds.index(job.seed), list(spec.conditions).index(job.condition)


def open_stream(ledger: RunLedger, spec: StudySpec, *, workers: int, executor: Any = None,
                progress: Any = None) -> JobStream | None:
    """A stream on the local pool of ``workers`` processes, or on ``executor`` (its
    ``stream(ledger, spec, progress=)``); ``None`` when there is nothing to stream on
    (one worker, or an executor without streams): the caller runs the barrier path."""
    if executor is not None:
        make = getattr(executor, "stream", None)
        return make(ledger, spec, progress=progress) if callable(make) else None
    if workers <= 1:
        return None
    return PoolStream(ledger, spec, workers, progress=progress)
