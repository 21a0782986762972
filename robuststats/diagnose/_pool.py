"""The probe's evaluations in worker processes (``robuststats diagnose --workers N``).

Workers never return outcomes: each evaluates its share of the (seed, target, noise seed)
evaluations and writes every one to the probe's :class:`~robuststats.diagnose._store.
ProbeStore` as it finishes, exactly as the serial probe does. The parent then runs the
ordinary serial probe, which finds every evaluation in the store and only reads it back;
an evaluation a worker did not finish (it crashed, or was killed) is a store miss and is
evaluated there. So the result cannot depend on the number of workers, and a killed
``--workers`` probe resumes like a serial one.

The pool is the platform's (:func:`robuststats.runs.workers.run_pool`): spawn context,
workers that die with their parent, Ctrl-C stops it at once. Each task is one training seed's share,
so a worker loads that seed's model once per task (from the run directory's cache, or the
condition's checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["evaluate_in_pool", "pending_units"]

#: one evaluation: (training seed, target id, noise seed); the clean pass is (seed, CLEAN, 0)
Unit = tuple[int, str, int]


def pending_units(store: Any, seeds: Sequence[int], targets: Sequence[Any],
                  noise_seeds: Sequence[int]) -> list[Unit]:
    """The evaluations of the plan that the store does not hold yet (by file presence)."""
    from robuststats.diagnose._statistics import CLEAN

    units: list[Unit] = []
    for seed in seeds:
        units.append((seed, CLEAN, 0))
        units += [(seed, t.target_id, ns) for t in targets for ns in noise_seeds]
    return [u for u in units if not store.path(*u).is_file()]


def _shares(units: list[Unit], workers: int) -> list[list[Unit]]:
    """Units split into tasks of one seed each, about ``workers`` tasks per seed's load."""
    by_seed: dict[int, list[Unit]] = {}
    for u in units:
        by_seed.setdefault(u[0], []).append(u)
    per_seed = max(1, -(-workers // max(len(by_seed), 1)))
    tasks = []
    for seed_units in by_seed.values():
        k = min(per_seed, len(seed_units))
        tasks += [seed_units[i::k] for i in range(k)]
    return tasks


def _worker(run_dir: str, spec: Any, plan: Any, targets: Sequence[Any], store_root: str,
            store_key: str, units: list[Unit]) -> int:
    """Evaluate ``units`` (one seed) and store each; returns how many were stored."""
    from robuststats.diagnose._probe import _evaluate
    from robuststats.diagnose._runner import replace_items, spec_task
    from robuststats.diagnose._statistics import CLEAN
    from robuststats.diagnose._store import ProbeStore
    from robuststats.runs import RunLedger, TrainJob, load_or_train, one_torch_thread, planned_items

    store = ProbeStore(store_root, store_key)
    task = spec_task(spec)
    items = planned_items(replace_items(spec, plan.n_items), task)
    seed = units[0][0]
    # the parent holds the run directory's lock and made sure the model exists: read only
    model, _ = load_or_train(RunLedger(Path(run_dir)), spec, TrainJob(plan.condition, seed),
                             task=task)
    by_id = {t.target_id: t for t in targets}
    done = 0
    with one_torch_thread():
        for _, target, ns in units:
            noise = None if target == CLEAN else \
                by_id[target].noise(plan.scale, kind=plan.kind, noise_seed=ns)
            df = _evaluate(model, task, items, noise, ns, plan.batch_size)
            store.put(seed, target, ns, df)
            done += 1
    return done


def evaluate_in_pool(*, run_dir: str, spec: Any, plan: Any, targets: Sequence[Any],
                     store: Any, units: list[Unit], workers: int,
                     progress: Callable[[int], None] | None = None) -> list[str]:
    """Evaluate ``units`` in ``workers`` processes, each result into ``store``;
    ``progress(n)`` follows the files (:class:`~robuststats.runs.progress.DiskProgress`).
    Returns the first line of each task that failed (its unfinished units are left to the
    serial pass)."""
    from robuststats.runs import DiskProgress, first_line, run_pool

    if not units:
        return []
    errors: list[str] = []
    tally = DiskProgress(progress, lambda: sum(1 for u in units if store.path(*u).is_file()))
    calls = [(run_dir, spec, plan, list(targets), str(store.root.parent), store.root.name,
              share) for share in _shares(units, workers)]
    # a worker that raised or died leaves its units unstored: the serial pass redoes them
    run_pool(_worker, calls, workers, on_result=lambda i, n: None,
             on_error=lambda i, exc: errors.append(first_line(exc)), poll=tally.poll)
    return errors
