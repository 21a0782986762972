"""A parent holding a worker pool, for the kill tests: ``pool_parent.py pool|search N``.

``pool`` runs N calls that sleep in a 2-worker pool (:func:`robuststats.runs.run_pool`, the
study's executor and the probe); ``search`` starts 2 processes from the platform's spawn
context as the search does. torch is imported at the top, so each spawned child imports it
while it starts (its main module is this file): a start-up window of seconds, as a real
command's workers have.
"""

from __future__ import annotations

import os
import sys
import time

import torch  # noqa: F401  (the heavy import of a real worker's start-up)

sys.path.insert(0, os.environ["ROBUSTSTATS_ROOT"])


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _search_like(parent: int) -> None:
    from robuststats.runs import worker_init

    worker_init(parent)
    time.sleep(60)


if __name__ == "__main__":
    mode, n = sys.argv[1], int(sys.argv[2])
    if mode == "pool":
        from robuststats.runs import run_pool

        run_pool(nap, [(60.0,)] * n, 2, on_result=lambda i, v: None,
                 on_error=lambda i, e: None)
    else:
        from robuststats.runs import spawn_context, stop_processes

        procs = [spawn_context().Process(target=_search_like, args=(os.getpid(),))
                 for _ in range(n)]
        for p in procs:
            p.start()
        try:
            time.sleep(60)
        finally:
            stop_processes(procs)
