"""One command's run on the platform: the skeleton every command shares.

Every command that computes (``study``, ``diagnose``, ``search``, ``gate``,
``divergence``) goes through the same steps, and :class:`Run` holds them once::

    with Run.start(out=out, runs=runs) as run:    # dirs checked, SIGTERM = Ctrl-C, clock on
        task = preflight(spec)                     # bad input fails before any compute
        with run.ledger(spec) as ledger:           # the locked run directory
            with run.progress(progress, total, done) as bar:
                ... execute(..., progress=bar) ...
        manifest = {..., "started": run.started, "seconds": run.seconds}
        publish(...)

The output directories are checked without creating anything (:func:`check_output_dir`),
so a read-only or full disk fails before the first model is built.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robuststats.runs.dirs import check_output_dir
from robuststats.runs.progress import Progress, ProgressArg, progress_bar
from robuststats.runs.signals import signals_as_interrupts

__all__ = ["Run", "utc_now"]


def utc_now() -> str:
    """The time now as the manifests write it (``2026-11-27T03:16:36Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Run:
    """The clock and the directories of one run (see the module docstring)."""

    runs: Path | None = None
    started: str = field(default_factory=utc_now)
    t0: float = field(default_factory=time.perf_counter)

    @classmethod
    @contextlib.contextmanager
    def start(cls, *, out: str | Path | None = None, runs: str | Path | None = None,
              out_name: str = "`out`", runs_name: str = "`runs`",
              signals: bool = True) -> Iterator[Run]:
        """Check ``out`` and ``runs`` (either may be None: not used), start the clock and,
        with ``signals``, turn SIGTERM into :class:`~robuststats.runs.Interrupted` for the
        block."""
        run = cls(runs=None if runs is None else Path(runs))
        if out is not None:
            check_output_dir(out, out_name)
        if runs is not None:
            check_output_dir(runs, runs_name)
        with signals_as_interrupts() if signals else contextlib.nullcontext():
            yield run

    @property
    def seconds(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.t0

    def run_dir(self, name: str) -> Path:
        """The run directory of study ``name`` under ``runs``."""
        if self.runs is None:
            raise ValueError("this run has no runs directory")
        return self.runs / name

    def ledger(self, spec: Any, *, fresh: bool = False, root: Path | None = None) -> Any:
        """The locked run directory of ``spec`` (:meth:`RunLedger.open`), as a context."""
        from robuststats.runs.ledger import RunLedger

        return RunLedger.open(root if root is not None else self.run_dir(spec.name), spec,
                              fresh=fresh)

    @staticmethod
    @contextlib.contextmanager
    def progress(progress: ProgressArg, total: int, initial: int, *, unit: str = "cell",
                 desc: str = "cells") -> Iterator[Progress | None]:
        """The run's progress counter (:func:`progress_bar`), closed when the block ends,
        however it ends."""
        bar = progress_bar(progress, total, initial, unit=unit, desc=desc)
        try:
            yield bar
        finally:
            if bar is not None:
                bar.close()
