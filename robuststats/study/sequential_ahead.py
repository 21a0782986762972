"""The run-ahead path of a sequential study: seeds train in the order the looks need, and
a look waits only for its own seeds.

The barrier path (:func:`~robuststats.study.sequential_run.run_looks` with nothing ahead)
runs each look's pending cells and waits for all of them, so with a look after every seed
the workers beyond one seed's jobs sit idle, a new pool starts at every look, and every
worker waits while the look is analysed. Here one :class:`~robuststats.runs.stream.JobStream`
(the local pool or Ray) stays open for the whole study. Its jobs are submitted seed by
seed, in the order of ``seeds``, up to ``ahead`` seeds past the look being waited for; the
look is analysed as soon as the jobs of ITS seeds have finished, on the outcomes of exactly
those seeds (read back from the run directory, as in the barrier path), so its decisions
are the same function of the same stored outcomes and a replay gives the same table.

When the study stops, the jobs still queued or running (later seeds only) are stopped at
once rather than waited for: the version will not analyse them whatever they produce, so
waiting would only delay it. The cells they finished stay in the run directory (a resumed
or later run reuses them) and are reported as trained ahead, never analysed in this
version. Each look is logged in the run directory's events (``look_analysed``, with the
seeds in flight at that moment).
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from robuststats.runs.executor import JobCounts
from robuststats.runs.plan import Cell, jobs
from robuststats.runs.spec import StudySpec

__all__ = ["run_looks_ahead", "trained_ahead"]

#: seconds between the checks of a look's jobs (a job that finishes wakes the wait sooner)
_POLL_SECONDS = 0.5


def run_looks_ahead(spec: StudySpec, ledger: Any, cells: list[Cell], items: list[str],
                    done: set[Cell], *, stream: Any, ahead: int) -> Any:
    """:func:`~robuststats.study.sequential_run.run_looks` on ``stream``, running up to
    ``ahead`` seeds past each look (see the module doc); returns its ``SequentialRun``."""
    from robuststats.study.sequential_run import SequentialRun, _walk_looks, look_outcomes

    seeds = spec.seed_list()
    rank = {s: i for i, s in enumerate(seeds)}
    start = time.perf_counter()
    counts: dict[int, JobCounts] = {}
    queued = [0]  # the seeds whose pending jobs are submitted: seeds[:queued[0]]
    look_cells: list[Cell] = []

    def submit_through(n: int) -> None:
        for seed in seeds[queued[0]:n]:
            pending = [c for c in cells if c.seed == seed and c not in done]
            for job, job_cells in jobs(pending).items():  # the conditions' order
                stream.submit(job, job_cells)
        queued[0] = max(queued[0], n)

    def outcomes_at(look: int, n: int) -> pd.DataFrame | str:
        nonlocal look_cells
        submit_through(min(len(seeds), n + ahead))
        chosen = set(seeds[:n])
        look_cells = [c for c in cells if c.seed in chosen]
        while any(job.seed in chosen for job in stream.outstanding()):
            for job, job_counts in stream.completed(_POLL_SECONDS):
                counts[job.seed] = counts.get(job.seed, JobCounts()) + job_counts
        in_flight = sorted({job.seed for job in stream.outstanding()}, key=rank.__getitem__)
        return look_outcomes(ledger, look, n, look_cells, items, in_flight=in_flight)

    try:
        looks = _walk_looks(spec, outcomes_at)
    finally:
        stream.stop()  # later seeds' jobs: their finished cells are kept, not analysed
    used = {c.seed for c in look_cells}
    report = sum((c for s, c in counts.items() if s in used), JobCounts())
    return SequentialRun(look_cells, report.report(time.perf_counter() - start), looks,
                         int(looks["look"].max()), len(used), done & set(look_cells),
                         run_ahead=ahead,
                         ahead=trained_ahead(ledger, cells, items, used, seeds))


def trained_ahead(ledger: Any, cells: list[Cell], items: list[str], used: set[int],
                  seeds: list[int]) -> dict[int, int]:
    """The finished cells in the run directory of the seeds past the last look analysed:
    ``{seed: cells}`` in the order of ``seeds`` (empty when none)."""
    later = [c for c in cells if c.seed not in used]
    if not later:
        return {}
    finished = ledger.finished(later, items=items)
    out: dict[int, int] = {}
    for seed in seeds:
        n = sum(1 for c in finished if c.seed == seed)
        if n:
            out[seed] = n
    return out
