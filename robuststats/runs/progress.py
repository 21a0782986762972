"""The one progress protocol of long runs: ``bar(n)`` advances, ``bar.close()`` ends.

Every command takes ``progress``: ``False`` (nothing shown), ``True`` (a tqdm bar on
stderr) or a callable ``progress(total, initial)`` returning the caller's own counter.
:func:`progress_bar` turns each into a :class:`Progress` or ``None``, so a run never asks
what it was given. :class:`DiskProgress` advances a bar by the work found on disk, the
truth of a pool's progress.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["DiskProgress", "Progress", "ProgressArg", "close", "progress_bar"]


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

    def __call__(self, n: int) -> None:
        self.counter(n)

    def close(self) -> None:
        end = getattr(self.counter, "close", None)
        if end is not None:
            end()


class _Tqdm:
    def __init__(self, total: int, initial: int, unit: str, desc: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, initial=initial, unit=unit, desc=desc, dynamic_ncols=True)

    def __call__(self, n: int) -> None:
        self.bar.update(n)

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
