"""The one progress protocol of long runs: ``bar(n)`` advances, ``bar.close()`` ends.

Every command takes ``progress``: ``False`` (nothing shown), ``True`` (a tqdm bar on
stderr) or a callable ``progress(total, initial)`` returning the caller's own counter.
:func:`progress_bar` turns each into a :class:`Progress` or ``None``, so a run never asks
what it was given. :class:`DiskProgress` advances a bar by the work found on disk, the
truth of a pool's progress.

A counter may also take ``work(Work)``: the training under way (models, steps and the
seconds they took, reported by the workers while they train) and the measured cost of the
cells. The tqdm bar does: it moves with every training step, not only with every finished
cell, and its estimate of the time left comes from :class:`WorkEstimate` (every kind of
unit weighted by its measured cost) instead of from finished cells alone. A caller's own
counter without ``work`` is only ever called with cells, as before.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["DiskProgress", "Progress", "ProgressArg", "Work", "WorkEstimate", "close",
           "format_seconds", "progress_bar"]


class Progress(Protocol):
    """A counter of finished units."""

    def __call__(self, n: int) -> None: ...

    def close(self) -> None: ...


#: what a command's ``progress`` argument may be
ProgressArg = bool | Callable[[int, int], Callable[[int], None]]


class _Callback:
    """A caller's counter as a :class:`Progress` (its own ``close`` is called if it has one)."""

    def __init__(self, counter: Callable[[int], None]) -> None:
        self.counter = counter
        work = getattr(counter, "work", None)
        if work is not None:  # a counter that follows the training too
            self.work = work

    def __call__(self, n: int) -> None:
        self.counter(n)

    def close(self) -> None:
        end = getattr(self.counter, "close", None)
        if end is not None:
            end()


@dataclass(frozen=True)
class Work:
    """What the workers reported of the jobs in flight and done in this execution.

    ``steps_total`` is None while no trainer has said how many steps a model takes (a
    trainer without step reports never says). ``train_seconds`` are the worker seconds
    behind ``steps_done``; ``cell_seconds`` those behind ``cells_measured`` evaluations.
    ``started_ago``: seconds since the first job of the execution began in its worker
    (None before any report), so the pace leaves out the workers' start-up.
    """

    models_done: int
    models_total: int
    steps_done: int
    steps_total: int | None
    train_seconds: float
    cells_measured: int
    cell_seconds: float
    started_ago: float | None = None


@dataclass
class _Kind:
    total: float = 0.0
    done: float = 0.0
    seconds: float = 0.0  # measured: seconds spent on ``units`` units
    units: float = 0.0

    @property
    def cost(self) -> float | None:
        return self.seconds / self.units if self.units > 0 and self.seconds > 0 else None


class WorkEstimate:
    """Seconds left of a run made of units of several kinds (training steps, cells).

    Each kind's cost per unit is its measured seconds over its measured units: the mean
    cost so far, a ratio of sums that steadies as units accumulate (one slow unit moves it
    by its share only). The work done and the work left are the units of every kind
    weighted by those costs; the pace is the work done per second of wall clock since the
    work began (:meth:`began`: after the workers' start-up, which can take a minute on a
    busy machine), so parallel workers and the overhead between units count as they are.
    ``eta()`` is the work left over the pace. While a kind with units left has no measured
    cost yet (no cell evaluated so far) the estimate leaves it out: it is then a lower
    bound, and ``eta()`` says so.

    A first cell-based estimate (finished cells over elapsed time) knows nothing until the
    first cell and then swings with every model trained in between; weighting the steps
    by their measured cost lets the estimate start within seconds and stay put.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.start = clock()
        self._began = False
        self.kinds: dict[str, _Kind] = {}

    def began(self, seconds_ago: float) -> None:
        """The work began ``seconds_ago`` (set once: the first worker's first unit)."""
        if not self._began:
            self._began = True
            self.start = max(self.start, self.clock() - max(0.0, seconds_ago))

    def update(self, kind: str, *, done: float, total: float, seconds: float | None = None,
               units: float | None = None) -> None:
        """``done`` of ``total`` units of ``kind``; ``seconds`` measured over ``units``
        units (the mean cost so far), when known."""
        k = self.kinds.setdefault(kind, _Kind())
        k.done, k.total = float(done), float(max(total, done))
        if seconds is not None and units is not None:
            k.seconds, k.units = float(seconds), float(units)

    def _weighted(self) -> tuple[float, float, bool]:
        done = left = 0.0
        complete = True
        for k in self.kinds.values():
            cost = k.cost
            if cost is None:
                complete = complete and k.total <= k.done
                continue
            done += k.done * cost
            left += (k.total - k.done) * cost
        return done, left, complete

    def fraction(self) -> float | None:
        """The share of the weighted work done (None before any cost is measured)."""
        done, left, _ = self._weighted()
        return done / (done + left) if done + left > 0 else None

    def eta(self) -> tuple[float | None, bool]:
        """``(seconds left, complete)``; seconds None before anything is measured and
        ``complete`` False while the estimate leaves out a kind of unknown cost."""
        done, left, complete = self._weighted()
        elapsed = self.clock() - self.start
        if done <= 0 or elapsed <= 0:
            return None, complete
        return left / (done / elapsed), complete


def format_seconds(seconds: float) -> str:
    """``45s``, ``12m05s``, ``3h20m``: a duration as a progress line writes it."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _count(n: float) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else f"{int(n):,}"


class _Tqdm:
    """A tqdm bar of cells that also shows the training reported through :meth:`work`.

    The bar fills with the weighted work done (:class:`WorkEstimate`), so it moves during
    training; the line says the cells, the models and steps, the time spent and the time
    left. On a stream that is not a terminal (a log file) the bar is redrawn only when a
    cell finishes, as it always was, so a redirected stderr gets no line per step.
    """

    _SCALE = 1000  # the bar counts permille of the weighted work

    def __init__(self, total: int, initial: int, unit: str, desc: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from tqdm import tqdm

        self.total, self.n, self.unit, self.desc = total, initial, unit, desc
        self.initial = initial
        self.estimate = WorkEstimate(clock)
        self.opened = clock()
        self.training: Work | None = None
        self.tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
        self.bar = tqdm(total=self._SCALE, initial=0, dynamic_ncols=True,
                        bar_format="{percentage:3.0f}%|{bar}| {desc}",
                        desc=f"{initial}/{total} {unit}s")
        self._show()

    def __call__(self, n: int) -> None:
        self.n += n
        self._show()

    def work(self, work: Work) -> None:
        """The training and cell costs the workers reported (see :class:`Work`)."""
        self.training = work
        if work.started_ago is not None:
            self.estimate.began(work.started_ago)
        if self.tty:
            self._show()

    def _show(self) -> None:
        est, w = self.estimate, self.training
        elapsed = est.clock() - self.opened
        # units of this execution only: the ones resumed from disk cost nothing now
        done = self.n - self.initial
        if w is None:  # nothing reported but finished units: their mean wall time
            seconds, units = elapsed, done
        elif w.cells_measured > 0:  # the workers' seconds per evaluated cell
            seconds, units = w.cell_seconds, w.cells_measured
        else:
            seconds = units = None
        est.update("cell", done=done, total=self.total - self.initial, seconds=seconds,
                   units=units)
        label = f"{self.unit}s"
        parts = [f"{self.n}/{self.total} {label}" if self.desc == label
                 else f"{self.desc}: {self.n}/{self.total} {label}"]
        if w is not None and w.models_total > 0:
            steps_total = w.steps_total if w.steps_total is not None else w.steps_done
            est.update("step", done=w.steps_done, total=steps_total,
                       seconds=w.train_seconds, units=w.steps_done)
            text = f"models {w.models_done}/{w.models_total}"
            if w.steps_done or w.steps_total:
                total = "?" if w.steps_total is None else _count(w.steps_total)
                text += f" (steps {_count(w.steps_done)}/{total})"
            parts.append(text)
        fraction = est.fraction()
        if fraction is None:
            fraction = (self.n / self.total) if self.total else 0.0
        parts.append(format_seconds(elapsed))
        left, complete = est.eta()
        if left is not None and math.isfinite(left):
            parts.append(f"eta {'' if complete else '≥ '}{format_seconds(left)}")
        self.bar.n = round(max(0.0, min(1.0, fraction)) * self._SCALE)
        self.bar.set_description_str(" · ".join(parts), refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def progress_bar(progress: ProgressArg, total: int, initial: int, *, unit: str = "cell",
                 desc: str = "cells") -> Progress | None:
    """The counter long runs report to: ``None`` when ``progress`` is False, the caller's own
    ``progress(total, initial)`` when it is callable, else a tqdm bar. Shared by every
    command."""
    if progress is False:
        return None
    if callable(progress):
        counter = progress(total, initial)
        return None if counter is None else _Callback(counter)
    return _Tqdm(total, initial, unit, desc)


def close(bar: Progress | None) -> None:
    """End ``bar`` if there is one."""
    if bar is not None:
        bar.close()


class DiskProgress:
    """Progress read from the files on disk, which are the truth of a pool's work:
    :meth:`poll` advances ``progress`` by how much ``count()`` grew since the last poll
    (nothing when ``progress`` is None). Shared by the local pool, the Ray executor and the
    probe's pool. ``also()`` runs after each poll (the training the workers report)."""

    def __init__(self, progress: Callable[[int], None] | None, count: Callable[[], int],
                 also: Callable[[], None] | None = None) -> None:
        self.progress, self.count, self.reported, self.also = progress, count, 0, also

    def poll(self) -> None:
        if self.progress is None:
            return
        now = self.count()
        if now > self.reported:
            self.progress(now - self.reported)
            self.reported = now
        if self.also is not None:
            self.also()
