"""Training progress from the workers to the progress bar, through the run directory.

A job's worker (a process of the local pool, a Ray task, or this process) keeps one small
record in the run directory (:meth:`RunLedger.write_progress`): the steps its trainer has
done of how many, the seconds they took, the cells it has evaluated and their seconds. It
rewrites the record at most every :data:`WRITE_SECONDS` (one ``os.replace`` of a few
hundred bytes: nothing next to a training step) and when the job ends. The parent reads
the records of the jobs not yet finished whenever it looks at the cells on disk
(:class:`TrainingTally`), and hands their sum to the bar (``bar.work(Work)``, see
:mod:`robuststats.runs.progress`).

The run directory is the channel because it is the one every executor already shares:
it needs no queue through a spawn pool and no actor in Ray, and a worker that dies
leaves at most a stale record, which its rerun replaces.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from robuststats.runs.ledger import RunLedger
from robuststats.runs.plan import TrainJob
from robuststats.runs.progress import Work

__all__ = ["WRITE_SECONDS", "JobReporter", "TrainingTally"]

#: the shortest time between two writes of one job's progress record
WRITE_SECONDS = 0.5


class JobReporter:
    """The worker's side: ``step(done, total)`` is the trainer's ``progress`` callback,
    ``cell(seconds)`` follows each evaluated cell, ``close()`` writes the last record.
    ``on_write`` runs after each write (in this process: the parent's poll)."""

    def __init__(self, ledger: RunLedger, job: TrainJob, *,
                 on_write: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ledger, self.job, self.on_write, self.clock = ledger, job, on_write, clock
        self.start = clock()
        self.last = -float("inf")
        self.record: dict[str, Any] = {"started": time.time(), "steps": 0, "steps_total": None, "train_seconds": 0.0,
                                       "trained": False, "cells": 0, "cell_seconds": 0.0,
                                       "finished": False}

    def step(self, done: int, total: int) -> None:
        """``done`` of ``total`` training steps (the trainer's progress callback)."""
        self.record.update(steps=int(done), steps_total=int(total),
                           train_seconds=self.clock() - self.start)
        if done >= total:
            self.record["trained"] = True
        self._write()

    def trained(self) -> None:
        """The model is trained (by a trainer that may never have reported a step)."""
        self.record.update(trained=True, train_seconds=self.clock() - self.start)
        self._write(force=True)

    def cell(self, seconds: float) -> None:
        """One more cell evaluated (or failed) in ``seconds``."""
        self.record["cells"] += 1
        self.record["cell_seconds"] += float(seconds)
        self._write()

    def close(self) -> None:
        self.record["finished"] = True
        self._write(force=True)

    def _write(self, *, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self.last < WRITE_SECONDS:
            return
        self.last = now
        try:
            self.ledger.write_progress(self.job, self.record)
        except OSError:  # the bar is a convenience: never fail a job for it
            return
        if self.on_write is not None:
            self.on_write()


class TrainingTally:
    """The parent's side: the sum of the progress records of ``jobs`` as a :class:`Work`,
    handed to ``bar.work`` on each :meth:`poll` (nothing when the bar has no ``work``).

    ``to_train``: the jobs whose model is not on disk yet (the models the bar counts);
    ``steps_per_model``: the trainer's step count when the spec says it (the builtin
    trainer's ``steps``), else learnt from the first record that gives one. Records of
    an earlier execution are removed first.
    """

    def __init__(self, ledger: RunLedger, jobs: list[TrainJob], to_train: list[TrainJob],
                 bar: Any, steps_per_model: int | None = None) -> None:
        self.ledger, self.jobs, self.to_train = ledger, jobs, set(to_train)
        self.report = getattr(bar, "work", None)
        self.steps_per_model = steps_per_model
        self.final: dict[TrainJob, dict[str, Any]] = {}
        for job in jobs:
            ledger.clear_progress(job)

    def poll(self) -> None:
        if self.report is None:
            return
        records: dict[TrainJob, dict[str, Any]] = dict(self.final)
        for job in self.jobs:
            if job in self.final:
                continue
            record = self.ledger.read_progress(job)
            if record is None:
                continue
            records[job] = record
            if record.get("finished"):
                self.final[job] = record  # read once more never
        self.report(self.work(records))

    def work(self, records: dict[TrainJob, dict[str, Any]]) -> Work:
        steps = [_number(r.get("steps_total")) for r in records.values()]
        known = [s for s in steps if s]
        per_model = self.steps_per_model or (max(known) if known else None)
        in_training = [r for j, r in records.items() if j in self.to_train]
        steps_total = None if per_model is None else int(sum(
            _number(r.get("steps_total")) or per_model for r in in_training)
            + per_model * (len(self.to_train) - len(in_training)))
        return Work(
            models_done=sum(bool(r.get("trained")) for r in in_training),
            models_total=len(self.to_train),
            steps_done=int(sum(_number(r.get("steps")) for r in in_training)),
            steps_total=steps_total,
            train_seconds=sum(_number(r.get("train_seconds")) for r in in_training),
            cells_measured=int(sum(_number(r.get("cells")) for r in records.values())),
            cell_seconds=sum(_number(r.get("cell_seconds")) for r in records.values()),
            started_ago=max((time.time() - _number(r.get("started")) for r in records.values()
                             if _number(r.get("started")) > 0), default=None))


def _number(value: Any) -> float:
    """A record's count or seconds (0 when missing or not a number)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 0.0
