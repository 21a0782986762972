"""Run the probe: models from the study's run directory, one clean pass, then every target.

The plan comes from :func:`~robuststats.diagnose._plan.resolve_plan`. :func:`probe_model` evaluates
one trained model: the clean evaluation once, then each target under each noise seed, then
the channel statistics. :func:`run_diagnosis` gets the study's models (trained, or loaded
from ``<runs>/<study>/models/`` where ``robuststats study`` caches them), probes each,
computes the statistics and writes a versioned result (:func:`~robuststats.diagnose.
write_diagnosis`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats.diagnose._plan import DiagnosisPlan, resolve_plan
from robuststats.diagnose._probe import (
    ProbeResult,
    _layer_prefix,
    build_targets,
    model_layers,
    present_ops,
    probe_model,
)
from robuststats.diagnose._statistics import avalanche_table, target_table
from robuststats.diagnose._store import ProbeStore, probe_key
from robuststats.diagnose._targets import (
    Target,
)
from robuststats.errors import InputError
from robuststats.runs.spec import StudySpec

__all__ = ["Diagnosis", "DiagnosisPlan", "ProbeResult", "probe_model", "resolve_plan",
           "run_diagnosis"]

# ---------------------------------------------------------------------- a study
@dataclass(frozen=True)
class Diagnosis:
    """The probe's results over the study's models, and where they were written."""

    plan: DiagnosisPlan
    targets: tuple[Target, ...]
    outcomes: pd.DataFrame
    injections: pd.DataFrame
    timings: pd.DataFrame
    table: pd.DataFrame
    avalanche: pd.DataFrame | None
    channels: pd.DataFrame | None
    n_layers: int
    present_ops: tuple[str, ...]
    notes: tuple[str, ...]
    seconds: float
    meta: dict[str, Any] = field(default_factory=dict, repr=False)
    version: Any = None


def analyse(plan: DiagnosisPlan, probes: Sequence[ProbeResult], *, seconds: float = 0.0,
            meta: dict[str, Any] | None = None) -> Diagnosis:
    """The statistics of one or more probed models (one per training seed)."""
    if not probes:
        raise InputError("`probes` must not be empty.")
    first = probes[0]
    outcomes = pd.concat([p.outcomes for p in probes], ignore_index=True)
    injections = pd.concat([p.injections for p in probes], ignore_index=True)
    timings = pd.concat([p.timings for p in probes], ignore_index=True)
    targets = first.targets
    stat_targets = [t for t in targets if t.level in plan.levels]
    table = target_table(outcomes, stat_targets, scale=plan.scale,
                         confidence_level=plan.confidence_level,
                         multiplicity=plan.multiplicity, labels=plan.labels,
                         critical_label=plan.critical_label,
                         avalanche_label=plan.avalanche_label)
    windows = [t for t in targets if t.level == "window"]
    aval = avalanche_table(outcomes, windows, confidence_level=plan.confidence_level,
                           multiplicity=plan.multiplicity, labels=plan.labels,
                           avalanche_label=plan.avalanche_label) if windows else None
    channels = None
    if all(p.channels is not None for p in probes):
        channels = pd.concat([p.channels for p in probes], ignore_index=True)
    return Diagnosis(plan, tuple(targets), outcomes, injections, timings, table, aval,
                     channels, first.n_layers, first.present_ops, first.notes, seconds,
                     dict(meta or {}))


def _trained_model(ledger: Any, spec: StudySpec, job: Any, task: Any = None) -> Any:
    """The study's model of ``job``: its checkpoint, the run directory's cached model, or
    trained and cached there (:func:`robuststats.runs.executor.load_or_train`)."""
    from robuststats.runs.executor import load_or_train

    return load_or_train(ledger, spec, job, task=task, by="diagnose")


def spec_task(spec: StudySpec) -> Any:
    from robuststats.runs import build_task

    return build_task(spec)


def run_diagnosis(spec: StudySpec, plan: DiagnosisPlan | None = None, *,
                  ledger_spec: StudySpec | None = None, out: str | Path = "results",
                  runs: str | Path = "runs",
                  progress: Callable[[int, int], Callable[[int], None]] | None = None,
                  write: bool = True, reuse: bool = True, workers: int = 1,
                  started: Callable[[], None] | None = None) -> Diagnosis:
    """Diagnose the study's models of ``plan.condition`` and write a new result version.

    Models come from ``<runs>/<study>/models/`` (trained there first when missing, exactly as
    ``robuststats study`` would, under the run directory's lock). ``progress(total, done)``
    returns a callback that receives the number of evaluations finished. The version is
    ``<out>/<study>.diagnose/v<N>/`` (see ``docs/diagnose.md``).

    Each evaluation is stored in the run directory as it finishes
    (:class:`~robuststats.diagnose._store.ProbeStore`): run again after a kill, the probe
    reads the finished ones back and evaluates only the rest, with the same result. With
    ``reuse=False`` the stored evaluations of this probe are deleted first. ``workers > 1``
    evaluates in that many processes first (:mod:`robuststats.diagnose._pool`); the result
    is the same as with one. ``started()`` is called once the inputs are checked, before
    any model is trained or evaluated.
    """
    from robuststats.runs import Run, TrainJob, one_torch_thread, planned_items, preflight, run_hash

    if plan is None:
        plan, ledger_spec = resolve_plan(spec)
    ledger_spec = ledger_spec or spec
    with Run.start(out=out if write else None, runs=runs, signals=False) as run:
        task = preflight(ledger_spec)
        _check_window_early(spec, plan)
        if started is not None:
            started()
        items = planned_items(replace_items(ledger_spec, plan.n_items), task)
        calibration = list(task.items("train"))[: plan.calibration_items] \
            if "channel" in plan.levels else None
        if calibration is not None and not calibration:
            calibration = items
        models: dict[int, Any] = {}
        trained_now = 0
        # the run directory stays locked while the probe runs: a concurrent `study --fresh`
        # cannot delete the models or the stored evaluations under it
        with run.ledger(ledger_spec, root=Path(runs) / spec.name) as ledger:
            for seed in plan.seeds:
                models[seed], fresh = _trained_model(ledger, ledger_spec,
                                                     TrainJob(plan.condition, seed), task)
                trained_now += int(fresh)
                if not (hasattr(models[seed], "model")
                        and hasattr(models[seed], "tokenizer")):
                    raise InputError(
                        f"`trainer`: diagnose needs a torch model and its tokenizer "
                        f"(attributes `model` and `tokenizer`); trainer "
                        f"{spec.trainer.name!r} returned a {type(models[seed]).__name__} "
                        "without them.")
            run_dir = str(ledger.root)
            # the targets depend on the architecture: read it from the first model
            first = models[plan.seeds[0]]
            n_layers = model_layers(first.model)
            layer_prefix = _layer_prefix(first.model)
            ops_here = present_ops(first.model, first.tokenizer, items[0].prompt,
                                   kind=plan.kind)
            targets, notes = build_targets(plan, n_layers, ops_here)
            store = ProbeStore(ledger.root / "diagnose", probe_key(
                run_hash=run_hash(ledger_spec), condition=plan.condition, scale=plan.scale,
                kind=plan.kind, ops=plan.ops, batch_size=plan.batch_size,
                item_ids=[str(it.item_id) for it in items]))
            if not reuse and store.root.exists():
                import shutil

                shutil.rmtree(store.root)
            per_seed = 1 + len(targets) * len(plan.noise_seeds) + int("channel" in plan.levels)
            total = per_seed * len(plan.seeds)
            pool_errors: list[str] = []
            units = []
            if workers > 1:
                from robuststats.diagnose._pool import evaluate_in_pool, pending_units

                units = pending_units(store, plan.seeds, targets, plan.noise_seeds)
            first_done = total - len(units) - int("channel" in plan.levels) * len(plan.seeds) \
                if units else 0
            probes = []
            with run.progress(False if progress is None else progress, total,
                              first_done) as bar:
                if units:
                    pool_errors = evaluate_in_pool(
                        run_dir=run_dir, spec=ledger_spec, plan=plan, targets=targets,
                        store=store, units=units, workers=workers, progress=bar)
                with one_torch_thread():
                    for seed in plan.seeds:
                        probes.append(probe_model(models[seed], task, items, plan, seed=seed,
                                                  calibration=calibration, targets=targets,
                                                  progress=bar, store=store,
                                                  count_reused=not units))
            if pool_errors:
                ledger.log_event({"event": "diagnose_worker_failed", "errors": pool_errors})
            if store.damaged:
                ledger.log_event({"event": "diagnose_damaged_evaluations",
                                  "files": store.damaged})
    probes[0] = replace(probes[0], notes=tuple(notes))
    meta = {"spec": spec.resolved(), "spec_hash": spec.spec_hash(),
            "run_hash": run_hash(ledger_spec), "run_dir": run_dir, "plan": plan.to_dict(),
            "n_items": len(items), "n_calibration_items": len(calibration or []),
            "models_trained": trained_now, "started": run.started, "layer_prefix": layer_prefix,
            "evaluations_reused": store.reused, "evaluations_damaged": len(store.damaged),
            "workers": workers, "evaluations_in_workers": len(units),
            "evaluations_dir": str(store.root)}
    diagnosis = analyse(plan, probes, seconds=run.seconds, meta=meta)
    if not write:
        return diagnosis
    from robuststats.diagnose._report import write_diagnosis

    version = write_diagnosis(diagnosis, out=out)
    return replace(diagnosis, version=version)


def _check_window_early(spec: StudySpec, plan: DiagnosisPlan) -> None:
    """A window larger than the builtin model, asked for, fails before any training."""
    if spec.trainer.name != "builtin" or "window" not in plan.levels \
            or not plan.levels_requested:
        return
    from robuststats.models.model import ModelSpec

    n_layers = ModelSpec.from_dict(spec.model).num_layers
    if plan.window > n_layers:
        raise InputError(f"`diagnose.window` ({plan.window}) exceeds the model's {n_layers} "
                         "layers (model.num_layers); give a smaller --window or leave out the "
                         "window level.")


def replace_items(spec: StudySpec, n_items: int | None) -> StudySpec:
    """``spec`` with ``evaluation.n_items`` set (only for choosing items; never hashed)."""
    if n_items == spec.evaluation.n_items:
        return spec
    return spec.model_copy(update={"evaluation": spec.evaluation.model_copy(
        update={"n_items": n_items})})

