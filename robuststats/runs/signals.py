"""SIGTERM handled like Ctrl-C: a run stops within a second or two and keeps finished work."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Interrupted", "signals_as_interrupts"]


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal (SIGINT or SIGTERM); finished cells are kept."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
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
