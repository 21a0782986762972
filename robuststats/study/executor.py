"""Run the pending cells of a plan in local processes, writing each cell as it finishes.

The unit of work handed to a process is a training job: one ``(condition, seed)`` model,
trained once (or loaded from the run directory's cache) and then evaluated under each of its
pending cells. Every cell's outcomes are written atomically the moment it finishes, so an
interruption loses at most the cell in flight. Failures are recorded per cell with the
traceback; the remaining cells still run.

Trainers are looked up by name in :mod:`robuststats.study.trainer`. A name of the form
``package.module:factory`` loads an external trainer instead: ``factory(**params)`` must
return an object with ``train(task, condition, seed=, workdir=)`` returning a model with
``save(path)``, and ``load(path)``; a model with an ``evaluate(task, items, *, noise,
noise_seed, batch_size)`` method is evaluated by that method (``noise`` then is the plain
dict), every other model by :func:`robuststats.study.evaluate.evaluate`.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from robuststats.errors import InputError
from robuststats.study.ledger import RunLedger
from robuststats.study.plan import Cell, TrainJob, jobs
from robuststats.study.spec import StudySpec

__all__ = ["ExecutionReport", "execute", "preflight", "run_job"]


@dataclass(frozen=True)
class ExecutionReport:
    """What one execution did: cells run now, cells that failed, models trained."""

    cells_run: int
    cells_failed: int
    models_trained: int
    seconds: float


def _resolve(name: str, registry: Callable[..., Any], params: dict[str, Any]) -> Any:
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise InputError(f"cannot load {name!r}: {exc}") from None
        return factory(**params)
    return registry(name, **params)


def preflight(spec: dict[str, Any]) -> None:
    """Build the task and the trainer once in the calling process.

    Unknown names and bad parameters then stop the study with one clear error before any
    worker starts, instead of failing every cell.
    """
    _resolve(spec["task"]["name"], _get_task, dict(spec["task"]["params"]))
    params = dict(spec["trainer"]["params"])
    if spec.get("model"):
        params["model"] = dict(spec["model"])
    _resolve(spec["trainer"]["name"], _get_trainer, params)


def _get_task(name: str, **params: Any) -> Any:
    from robuststats.study.tasks import get_task

    return get_task(name, **params)


def _get_trainer(name: str, **params: Any) -> Any:
    from robuststats.study.trainer import get_trainer

    return get_trainer(name, **params)


def _is_external(name: str) -> bool:
    return ":" in name


def _noise_for_eval(spec: dict[str, Any], level: float, noise_seed: int) -> dict[str, Any] | None:
    if level == 0.0:
        return None
    ev = spec["evaluation"]
    return {"scale": level, "kind": ev["kind"], "ops": ev["ops"], "phases": "forward",
            "seed": noise_seed}


def run_job(run_dir: str, spec: dict[str, Any], job: TrainJob, cells: list[Cell],
            parent_pid: int | None = None,
            on_cell: Callable[[int], None] | None = None) -> dict[str, int]:
    """Train (or load) one model and evaluate its cells; runs inside a worker process.

    ``on_cell(1)`` is called after each cell (finished or failed) when running in-process.
    """
    if not _is_external(spec["trainer"]["name"]):
        import torch

        torch.set_num_threads(1)  # the pool is the parallelism; threads would oversubscribe
    ledger = RunLedger(Path(run_dir))
    counts = {"done": 0, "failed": 0, "trained": 0}
    try:
        model, task, trained_now = _model_for(ledger, spec, job)
        counts["trained"] = int(trained_now)
        ev = spec["evaluation"]
        items = task.items(ev["split"])
        if ev.get("n_items") is not None:
            items = items[: ev["n_items"]]
    except Exception:
        text = traceback.format_exc()
        for cell in cells:
            ledger.record_failure(cell, f"training {job.key} failed:\n{text}")
        counts["failed"] = len(cells)
        if on_cell is not None:
            on_cell(len(cells))
        return counts
    for cell in cells:
        if parent_pid is not None and os.getppid() != parent_pid:
            break  # the parent was killed: stop instead of running on as an orphan
        start = time.perf_counter()
        try:
            df = _evaluate(model, task, items, spec, cell, external=_is_external(
                spec["trainer"]["name"]))
            ledger.write_cell(cell, df, seconds=time.perf_counter() - start)
            counts["done"] += 1
        except Exception:
            ledger.record_failure(cell, traceback.format_exc())
            counts["failed"] += 1
        if on_cell is not None:
            on_cell(1)
    return counts


def _model_for(ledger: RunLedger, spec: dict[str, Any], job: TrainJob) -> tuple[Any, Any, bool]:
    from robuststats.study import tasks
    from robuststats.study import trainer as trainer_mod

    task = _resolve(spec["task"]["name"], tasks.get_task, dict(spec["task"]["params"]))
    tr_name = spec["trainer"]["name"]
    params = dict(spec["trainer"]["params"])
    if spec.get("model"):
        params["model"] = dict(spec["model"])
    trainer = _resolve(tr_name, trainer_mod.get_trainer, params)
    path = ledger.model_dir(job)
    if ledger.model_ready(job):
        loader = getattr(trainer, "load", None) or trainer_mod.TrainedModel.load
        return loader(path / "model"), task, False
    cond = spec["conditions"][job.condition]
    if _is_external(tr_name):
        condition: Any = SimpleNamespace(name=job.condition, noise=cond["train_noise"],
                                         aqn=cond["aqn"])
    else:
        from robuststats import engine
        from robuststats.study import trainer as trainer_mod

        noise = engine.NoiseSpec.from_dict(cond["train_noise"]) if cond["train_noise"] else None
        aqn = dict(cond["aqn"]) if cond["aqn"] else None  # the trainer accepts the mapping
        condition = trainer_mod.TrainingCondition(job.condition, noise, aqn)
    tmp = ledger.new_model_tmpdir(job)
    start = time.perf_counter()
    model = trainer.train(task, condition, seed=job.seed, workdir=tmp / "work")
    model.save(tmp / "model")
    ledger.publish_model(job, tmp)
    ledger.log_event({"event": "model_trained", "job": job.key,
                      "seconds": round(time.perf_counter() - start, 3)})
    return model, task, True


def _evaluate(model: Any, task: Any, items: list[Any], spec: dict[str, Any], cell: Cell,
              *, external: bool) -> Any:
    noise = _noise_for_eval(spec, cell.eval_noise, cell.noise_seed)
    batch = spec["evaluation"]["batch_size"]
    own = getattr(model, "evaluate", None)
    if external and own is not None:
        return own(task, items, noise=noise, noise_seed=cell.noise_seed, batch_size=batch)
    from robuststats import engine
    from robuststats.study.evaluate import evaluate

    noise_spec = engine.NoiseSpec.from_dict(noise) if noise is not None else None
    return evaluate(model, task, items, noise=noise_spec, noise_seed=cell.noise_seed,
                    batch_size=batch)


def execute(ledger: RunLedger, spec: StudySpec, pending: list[Cell], *, workers: int = 2,
            progress: Callable[[int], None] | None = None) -> ExecutionReport:
    """Run ``pending`` cells; ``progress(n)`` is called as cells finish (or fail).

    ``workers <= 1`` runs everything in this process (no start-up cost, easy to debug);
    otherwise training jobs go to a spawn-context process pool of that size.
    """
    start = time.perf_counter()
    spec_dict = spec.resolved()
    grouped = jobs(pending)
    for cell in pending:
        # a retried cell's old failure would count as "done" for the progress bar
        (ledger.failures_dir / f"{cell.key}.txt").unlink(missing_ok=True)
    # model loading/training lives in a path relative to the run dir, resolved absolute
    run_dir = str(ledger.root.resolve())
    totals = {"done": 0, "failed": 0, "trained": 0}

    def add(counts: dict[str, int]) -> None:
        for k in totals:
            totals[k] += counts.get(k, 0)

    if workers <= 1 or len(grouped) <= 1:
        for job, cells in grouped.items():
            add(run_job(run_dir, spec_dict, job, cells, on_cell=progress))
    else:
        add(_run_pool(ledger, run_dir, spec_dict, grouped, workers, progress))
    return ExecutionReport(totals["done"], totals["failed"], totals["trained"],
                           time.perf_counter() - start)


def _run_pool(ledger: RunLedger, run_dir: str, spec: dict[str, Any],
              grouped: dict[TrainJob, list[Cell]], workers: int,
              progress: Callable[[int], None] | None) -> dict[str, int]:
    totals = {"done": 0, "failed": 0, "trained": 0}
    ctx = multiprocessing.get_context("spawn")
    all_cells = [c for cells in grouped.values() for c in cells]
    reported = 0
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures: dict[Future[dict[str, int]], TrainJob] = {
            pool.submit(run_job, run_dir, spec, job, cells, os.getpid()): job
            for job, cells in grouped.items()
        }
        pending_f = set(futures)
        while pending_f:
            done, pending_f = wait(pending_f, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                job = futures[fut]
                try:
                    counts = fut.result()
                except BrokenProcessPool:
                    counts = _mark_crashed(ledger, grouped[job], "the worker process died")
                except Exception:
                    counts = _mark_crashed(ledger, grouped[job], traceback.format_exc())
                for k in totals:
                    totals[k] += counts[k]
            if progress is not None:
                # the files on disk are the truth: count finished or failed cells
                now = sum(1 for c in all_cells if ledger.cell_path(c).exists()
                          or (ledger.failures_dir / f"{c.key}.txt").exists())
                if now > reported:
                    progress(now - reported)
                    reported = now
    return totals


def _mark_crashed(ledger: RunLedger, cells: list[Cell], text: str) -> dict[str, int]:
    failed = 0
    for cell in cells:
        if not ledger.cell_path(cell).exists():
            ledger.record_failure(cell, text)
            failed += 1
    return {"done": len(cells) - failed, "failed": failed, "trained": 0}
