"""``run_search``: study → trials (1..N worker processes on one storage) → the chosen
configuration re-evaluated → a new result version.

``--trials N`` is the number of *finished* trials (complete or pruned) the study should
hold: running the same command again after an interruption continues until N, and a
finished study runs no trial (it re-evaluates and publishes again). Several workers, in
this process's children or in other processes sharing the storage, may end a few trials
past N (each checks the count before it starts one: at most one extra per worker).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robuststats._fields import check_whole
from robuststats.search._objective import SearchContext, build_context
from robuststats.search._spec import SearchSpec
from robuststats.search._storage import (
    check_storage,
    default_storage,
    live_running,
    normalise_url,
    open_storage,
    recover_stale,
)
from robuststats.search._study import (
    make_objective,
    make_pruner,
    make_sampler,
    prepare_study,
    quiet_optuna,
    worker_seed,
)

__all__ = ["SearchRun", "run_search", "run_worker"]

_POLL_SECONDS = 0.5
#: seconds a worker waits for the others to be ready before it starts alone
_READY_TIMEOUT = 600.0


@dataclass(frozen=True)
class SearchRun:
    """What :func:`run_search` did and where its results are."""

    version: Any
    study_name: str
    storage: str
    trials_target: int
    trials_finished: int
    trials_run_now: int
    trials_failed: int
    recovered: list[dict[str, Any]]
    chosen: dict[str, Any] | None
    reevaluation: Any
    run_dir: Path
    seconds: float
    worker_failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.worker_failures and self.trials_finished >= self.trials_target


def _finished(study: Any) -> int:
    import optuna

    S = optuna.trial.TrialState
    return len(study.get_trials(deepcopy=False, states=(S.COMPLETE, S.PRUNED)))


def run_worker(ctx: SearchContext, url: str, worker: int, target: int, *,
               on_trial: Callable[[], None] | None = None) -> int:
    """Run trials on the study in ``url`` until it holds ``target`` finished trials (those
    running elsewhere included); returns the number of trials this worker ran."""
    import optuna

    quiet_optuna()
    spec = ctx.spec
    storage = open_storage(url)
    probe = optuna.load_study(study_name=spec.name, storage=storage)
    n0 = len(probe.get_trials(deepcopy=False))
    study = optuna.load_study(study_name=spec.name, storage=storage,
                              sampler=make_sampler(spec, worker_seed(spec, worker, n0)),
                              pruner=make_pruner(spec))
    objective = make_objective(ctx)
    ran = 0
    while _finished(study) + live_running(study, stale_after=spec.search.stale_after) < target:
        study.optimize(objective, n_trials=1, catch=(), gc_after_trial=False)
        ran += 1
        if on_trial is not None:
            on_trial()
    return ran


def _worker_main(spec: SearchSpec, run_dir: str, url: str, worker: int, target: int,
                 parent_pid: int, ready: Any) -> None:
    """Entry point of a worker process (spawned): dies with its parent, one torch thread.

    The workers start their first trial together (``ready``, a barrier): one that loads
    faster would otherwise run the first trials alone.
    """
    import threading

    from robuststats.runs import worker_init

    worker_init(parent_pid)
    try:
        import torch

        torch.set_num_threads(1)  # the platform's policy: one torch thread per process
        ctx = build_context(spec, run_dir)
        storage = open_storage(url)
        prepare_study(spec, ctx, storage, url)  # loads the record and the clean outcomes
        try:
            ready.wait(_READY_TIMEOUT)
        except threading.BrokenBarrierError:  # a worker failed to start: go on without it
            pass
        run_worker(ctx, url, worker, target)
    except BaseException:
        ready.abort()
        failures = Path(run_dir) / "failures"
        failures.mkdir(parents=True, exist_ok=True)
        (failures / f"worker-{worker}-{os.getpid()}.txt").write_text(traceback.format_exc())
        sys.exit(1)


def run_search(spec: SearchSpec, *, storage: str | None = None, workers: int = 1,
               out: str | Path = "results", runs: str | Path = "runs", fresh: bool = False,
               progress: bool | Callable[[int, int], Callable[[int], None]] = True,
               log: Callable[[str], None] | None = None) -> SearchRun:
    """Run (or continue) the search of ``spec`` and write a new result version under ``out``.

    ``storage``: an Optuna storage URL or file (default ``sqlite:///<runs>/<name>/search.db``);
    ``workers``: processes running trials against it (1: this process). Stale trials of
    killed workers are recovered first (:func:`~robuststats.search._storage.recover_stale`).
    """
    from robuststats.runs import Run, one_torch_thread
    from robuststats.search._reevaluate import choose, reevaluate
    from robuststats.search._report import write_search_version

    check_whole(workers, "workers", low=1)
    with Run.start(out=out, runs=runs) as run:
        url = check_storage(normalise_url(storage) if storage
                            else default_storage(runs, spec.name))
        run_dir = run.run_dir(spec.name)
        target = spec.search.trials
        if fresh:
            _discard(spec, url, run_dir)
        # tracebacks of earlier runs' workers are not this run's failures
        shutil.rmtree(run_dir / "failures", ignore_errors=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        with one_torch_thread():  # as the study workers: one thread per process
            ctx = build_context(spec, run_dir, log=log)
            store = open_storage(url)
            study = prepare_study(spec, ctx, store, url, log=log)
            recovered = recover_stale(study, stale_after=spec.search.stale_after,
                                      params=ctx.space.params)
            if recovered and log is not None:
                log(f"recovered {len(recovered)} interrupted trial(s): "
                    + ", ".join(f"#{r['trial']} ({r['reason']})" for r in recovered))
            done0 = _finished(study)
            failures: list[str] = []
            with run.progress(progress, target, min(done0, target), unit="trial",
                              desc="trials") as bar:
                if workers == 1:
                    run_worker(ctx, url, 0, target,
                               on_trial=(lambda: bar(1)) if bar is not None else None)
                else:
                    failures = _run_processes(spec, run_dir, url, workers, target, study, bar)
            trials_now = _finished(study) - done0
            chosen = choose(study, spec)
            re_table, re_meta = reevaluate(ctx, study, chosen, log=log)
        import optuna

        S = optuna.trial.TrialState
        n_failed = len(study.get_trials(deepcopy=False, states=(S.FAIL,)))
        meta = {"started": run.started, "workers": workers, "storage": url,
                "study_name": spec.name, "trials_target": target,
                "trials_run_now": trials_now, "recovered": recovered,
                "worker_failures": failures, **re_meta}
        version = write_search_version(out, spec, ctx, study, chosen, re_table, meta,
                                       seconds=run.seconds)
    return SearchRun(version=version, study_name=spec.name, storage=url, trials_target=target,
                     trials_finished=_finished(study), trials_run_now=trials_now,
                     trials_failed=n_failed, recovered=recovered,
                     chosen=None if chosen is None else {"trial": chosen.number,
                                                         "params": dict(chosen.params),
                                                         "values": list(chosen.values)},
                     reevaluation=re_table, run_dir=run_dir,
                     seconds=run.seconds, worker_failures=failures)


def _discard(spec: SearchSpec, url: str, run_dir: Path) -> None:
    """``--fresh``: delete the study from the storage and the run directory's cache."""
    import optuna

    quiet_optuna()
    try:
        optuna.delete_study(study_name=spec.name, storage=open_storage(url))
    except KeyError:
        pass
    for sub in ("models", "failures"):
        shutil.rmtree(run_dir / sub, ignore_errors=True)


def _run_processes(spec: SearchSpec, run_dir: Path, url: str, workers: int, target: int,
                   study: Any, bar: Any) -> list[str]:
    """``workers`` spawned processes on one storage; the parent shows progress and stops
    them on an interruption. Returns the tracebacks' files of workers that failed."""
    from robuststats.runs import spawn_context, stop_processes

    mp = spawn_context()  # workers that die with this process, their start-up included
    ready = mp.Barrier(workers)
    procs = [mp.Process(target=_worker_main, name=f"robuststats-search-{i}",
                        args=(spec, str(run_dir), url, i, target, os.getpid(), ready))
             for i in range(workers)]
    for p in procs:
        p.start()
    shown = min(_finished(study), target)
    try:
        while any(p.is_alive() for p in procs):
            time.sleep(_POLL_SECONDS)
            now = min(_finished(study), target)
            if bar is not None and now > shown:
                bar(now - shown)
                shown = now
    except BaseException:
        stop_processes(procs, grace=2.0)
        raise
    for p in procs:
        p.join()
    now = min(_finished(study), target)
    if bar is not None and now > shown:
        bar(now - shown)
    failed = [p for p in procs if p.exitcode != 0]
    if not failed:
        return []
    files = sorted((run_dir / "failures").glob("worker-*.txt"))
    return [str(f) for f in files] or [f"worker exit codes {[p.exitcode for p in failed]}"]
