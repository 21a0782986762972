"""Run the probe: models from the study's run directory, one clean pass, then every target.

:func:`resolve_plan` turns a study (its ``diagnose:`` section) and command-line overrides
into a :class:`DiagnosisPlan` (flag > study file > default). :func:`probe_model` evaluates
one trained model: the clean evaluation once, then each target under each noise seed, then
the channel statistics. :func:`run_diagnosis` gets the study's models (trained, or loaded
from ``<runs>/<study>/models/`` where ``robuststats study`` caches them), probes each,
computes the statistics and writes a versioned result (:func:`~robuststats.diagnose.
write_diagnosis`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats.config.bounds import MAX_ITEMS, MAX_NOISE_SEEDS, MAX_SEEDS, check_count
from robuststats.config.diagnose import DiagnoseSpec
from robuststats.config.fields import seed_list
from robuststats.diagnose._statistics import CLEAN, avalanche_table, target_table
from robuststats.diagnose._store import ProbeStore, probe_key
from robuststats.diagnose._targets import (
    Target,
    layer_targets,
    operator_targets,
    window_targets,
)
from robuststats.engine import ALL_OPS, NoiseSpec
from robuststats.errors import InputError, did_you_mean
from robuststats.runs.spec import StudySpec

__all__ = ["Diagnosis", "DiagnosisPlan", "ProbeResult", "probe_model", "resolve_plan",
           "run_diagnosis"]

#: scale of the presence check (one forward on one prompt, output discarded)
_PRESENCE_SCALE = 1e-3


@dataclass(frozen=True)
class DiagnosisPlan:
    """Everything the probe does, resolved (flag > study file > default)."""

    study: str
    condition: str
    seeds: tuple[int, ...]
    noise_seeds: tuple[int, ...]
    levels: tuple[str, ...]
    scale: float
    kind: str
    ops: str
    operators: tuple[str, ...] | None
    window: int
    stride: int
    n_items: int | None
    batch_size: int
    modules: tuple[str, ...]
    calibration_items: int
    channel_threshold: float
    multiplicity: str
    confidence_level: float
    labels: bool = False
    avalanche_label: float = 0.15
    critical_label: float = 3.0
    #: True when the levels were asked for (flag or study file), not the default
    levels_requested: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        return data


def resolve_plan(spec: StudySpec, *, levels: Sequence[str] | None = None,
                 window: int | None = None, stride: int | None = None,
                 seeds: int | None = None, noise_seeds: int | None = None,
                 n_items: int | None = None, condition: str | None = None,
                 scale: float | None = None, labels: bool | None = None
                 ) -> tuple[DiagnosisPlan, StudySpec]:
    """The plan of ``spec``'s diagnosis, and the spec whose run directory holds its models.

    ``seeds=N`` picks the first N training seeds of the study (``0..N-1`` when it gives a
    count). When they are among the study's own seeds the study's run directory (and its
    cached models) is used as it is; more seeds than a study's count extend it, as
    ``robuststats study --seeds N`` does.
    """
    d = spec.diagnose or DiagnoseSpec()
    overrides = {"levels": levels, "window": window, "stride": stride, "scale": scale,
                 "condition": condition, "labels": labels}
    given = {k: v for k, v in overrides.items() if v is not None}
    if given:
        try:
            d = DiagnoseSpec.model_validate({**d.model_dump(), **given})
        except Exception as exc:  # pydantic's message, one line, naming the option
            raise InputError(_first_error(exc)) from None
    cond = d.condition or next(iter(spec.conditions))
    if cond not in spec.conditions:
        raise InputError(f"`condition` must be a condition of study {spec.name!r}, got "
                         f"{cond!r}{did_you_mean(cond, spec.conditions)}; the study defines "
                         f"{list(spec.conditions)}.")
    ledger_spec = spec
    study_seeds = spec.seed_list()
    if seeds is not None:
        check_count(seeds, "seeds", MAX_SEEDS)  # the study's bounds and messages
        if seeds > len(study_seeds):
            ledger_spec = spec.with_overrides(seeds=seeds)  # names the problem if it can't
            study_seeds = ledger_spec.seed_list()
        study_seeds = study_seeds[:seeds]
    if noise_seeds is not None:
        ns = list(range(check_count(noise_seeds, "noise_seeds", MAX_NOISE_SEEDS)))
    else:
        ns = seed_list(d.noise_seeds if d.noise_seeds is not None
                       else spec.evaluation.noise_seeds)
    kind = d.kind or _output_kind(spec)
    if _deterministic(kind):
        ns = ns[:1]  # a number format's error does not depend on the draw: one suffices
    if n_items is not None and (isinstance(n_items, bool) or not isinstance(n_items, int)
                                or n_items < 2):
        raise InputError(f"`n_items` must be an integer >= 2, got {n_items!r}.")
    if n_items is not None:
        check_count(n_items, "n_items", MAX_ITEMS)
    plan = DiagnosisPlan(
        study=spec.name, condition=cond, seeds=tuple(study_seeds), noise_seeds=tuple(ns),
        levels=tuple(d.levels), scale=float(d.scale),
        kind=kind, ops=d.ops or spec.evaluation.ops,
        operators=tuple(d.operators) if d.operators else None, window=d.window,
        stride=d.stride,
        n_items=n_items if n_items is not None else (d.n_items or spec.evaluation.n_items),
        batch_size=spec.evaluation.batch_size, modules=tuple(d.modules),
        calibration_items=d.calibration_items, channel_threshold=d.channel_threshold,
        multiplicity=d.multiplicity or spec.analysis.multiplicity,
        confidence_level=spec.analysis.confidence_level, labels=d.labels,
        avalanche_label=d.avalanche_label, critical_label=d.critical_label,
        levels_requested=levels is not None or (spec.diagnose is not None
                                                and "levels" in spec.diagnose.model_fields_set),
    )
    return plan, ledger_spec


def _deterministic(kind: str) -> bool:
    from robuststats.engine.eval_kinds import check_kind

    return check_kind(kind).deterministic


def _output_kind(spec: StudySpec) -> str:
    from robuststats.engine import KINDS

    kind = spec.evaluation.kind
    if kind not in KINDS:
        raise InputError(f"`diagnose.kind` is needed: evaluation.kind {kind!r} is an operand "
                         f"error model with fixed ops, which cannot be put in one op or layer "
                         f"at a time; give diagnose.kind, one of {', '.join(map(repr, KINDS))}.")
    return kind


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        key = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("int", "list")))
        return f"`{key}`: {err['msg'].removeprefix('Value error, ')}, got {err.get('input')!r}."
    return str(exc)


# ---------------------------------------------------------------------- one model
@dataclass(frozen=True)
class ProbeResult:
    """What probing one trained model produced (item outcomes, injections, channels)."""

    outcomes: pd.DataFrame
    injections: pd.DataFrame
    timings: pd.DataFrame
    channels: pd.DataFrame | None
    targets: tuple[Target, ...]
    n_layers: int
    present_ops: tuple[str, ...]
    notes: tuple[str, ...] = ()


def model_layers(model: Any) -> int:
    """Number of decoder layers the engine sees in ``model``."""
    from robuststats.engine import inject

    return int(inject(model, NoiseSpec(scale=0.0)).map.n_layers)


def _layer_prefix(model: Any) -> str | None:
    """Module path of the decoder-layer list (``model.layers`` for Qwen2)."""
    from robuststats.engine import inject

    return inject(model, NoiseSpec(scale=0.0)).map.layer_prefix


def present_ops(model: Any, tokenizer: Any, prompt: str, *, kind: str) -> tuple[str, ...]:
    """Ops of ``ALL_OPS`` that one forward pass of ``model`` on ``prompt`` reaches.

    The engine fails loudly on an op it was asked for and never reached; this finds, with one
    short forward, which op types the model has (Qwen2 has no GELU and no LayerNorm), so the
    operator level evaluates only those and reports the others as absent.
    """
    import torch

    from robuststats.engine import inject

    spec = NoiseSpec(scale=_PRESENCE_SCALE, kind=kind, ops="all_ops", phases="forward")
    batch = tokenizer([prompt], return_tensors="pt")
    with torch.inference_mode(), inject(model, spec, verify=False) as session:
        model(**batch)
    stats = session.stats
    seen = set(stats.loc[stats["count"] > 0, "op"]) if len(stats) else set()
    return tuple(op for op in ALL_OPS if op in seen)


def build_targets(plan: DiagnosisPlan, n_layers: int, ops_present: Sequence[str]
                  ) -> tuple[list[Target], list[str]]:
    """Targets of the plan's levels for a model with ``n_layers`` layers and these ops."""
    targets: list[Target] = []
    notes: list[str] = []
    if "operator" in plan.levels:
        wanted = list(plan.operators or ALL_OPS)
        absent = [op for op in wanted if op not in ops_present]
        if plan.operators and absent:
            raise InputError(f"`diagnose.operators`: the model has no {absent[0]!r} op (one "
                             f"forward reached {', '.join(ops_present)}).")
        if absent:
            notes.append(f"operator level: the model has no {', '.join(absent)} op "
                         "(not evaluated)")
        targets += operator_targets([op for op in wanted if op in ops_present])
    needs_layers = "layer" in plan.levels or "window" in plan.levels
    if needs_layers and n_layers == 0:
        raise InputError("`diagnose.levels`: the model has no decoder-layer list, so the "
                         "layer and window levels cannot run.")
    if needs_layers:
        # the window level needs every single layer's drop for its interaction
        targets += layer_targets(n_layers, plan.ops)
    if "window" in plan.levels:
        if plan.window > n_layers:
            message = (f"`diagnose.window` ({plan.window}) exceeds the model's {n_layers} "
                       "layers")
            if plan.levels_requested:
                raise InputError(f"{message}; give a smaller --window or leave out the window "
                                 "level.")
            notes.append(f"window level skipped: {message}")
        else:
            targets += window_targets(n_layers, plan.ops, window=plan.window,
                                      stride=plan.stride)
    return targets, notes


def _evaluate(trained: Any, task: Any, items: list[Any], noise: NoiseSpec | None,
              noise_seed: int, batch_size: int) -> pd.DataFrame:
    from robuststats.models.evaluate import evaluate

    return evaluate(trained, task, items, noise=noise, noise_seed=noise_seed,
                    batch_size=batch_size)


def probe_model(trained: Any, task: Any, items: Sequence[Any], plan: DiagnosisPlan, *,
                seed: int = 0, calibration: Sequence[Any] | None = None,
                targets: Sequence[Target] | None = None,
                progress: Callable[[int], None] | None = None,
                store: ProbeStore | None = None,
                count_reused: bool = True) -> ProbeResult:
    """Probe one trained model (``trained.model``, ``trained.tokenizer``) on ``items``.

    The clean evaluation runs once; every target is evaluated under each of the plan's noise
    seeds with the engine's verification on, so a target whose noise never reached the model
    fails instead of reading as robust. Injections outside a target's layers are an error.
    ``calibration`` items feed the channel level (their prompt and reference solution,
    teacher-forced). ``progress(1)`` is called after each evaluation. With a ``store``, an
    evaluation already finished there is read back instead of run again, and each new one
    is written to it as soon as it finishes (a killed probe resumes where it stopped);
    ``count_reused=False`` leaves evaluations read back from the store out of ``progress``.
    """
    items = list(items)
    if len(items) < 2:
        raise InputError(f"`items` must hold at least 2 items, got {len(items)}.")
    model, tokenizer = trained.model, trained.tokenizer
    n_layers = model_layers(model)
    ops_here = present_ops(model, tokenizer, items[0].prompt, kind=plan.kind)
    notes: list[str] = []
    if targets is None:
        targets, notes = build_targets(plan, n_layers, ops_here)
    rows: list[pd.DataFrame] = []
    injections: list[dict[str, Any]] = []
    timings: list[dict[str, Any]] = []

    def record(target: str, level: str, ns: int, df: pd.DataFrame) -> None:
        rows.append(pd.DataFrame({"target": target, "seed": seed, "noise_seed": ns,
                                  "item_id": df["item_id"].astype(str),
                                  "correct": df["correct"].astype(int)}))
        stats = df.attrs.get("injection_stats") or []
        for r in stats:
            # the engine's own `target` (what the error model acts on: outputs, weights,
            # inputs) is kept as `noise_target`; `target` is the probe's target
            engine = {("noise_target" if k == "target" else k): v for k, v in r.items()}
            injections.append({"target": target, "seed": seed, "noise_seed": ns, **engine})
        timings.append({"target": target, "level": level, "seed": seed, "noise_seed": ns,
                        "seconds": float(df.attrs.get("seconds", float("nan"))),
                        "injections": int(sum(r.get("count", 0) for r in stats))})
        if progress is not None and (count_reused or not df.attrs.get("reused")):
            progress(1)

    ids = [str(it.item_id) for it in items]

    def evaluated(target: str, ns: int, noise: NoiseSpec | None) -> pd.DataFrame:
        if store is not None:
            done = store.get(seed, target, ns, ids)
            if done is not None:
                return done
        df = _evaluate(trained, task, items, noise, ns, plan.batch_size)
        if store is not None:
            store.put(seed, target, ns, df)
        return df

    record(CLEAN, "clean", 0, evaluated(CLEAN, 0, None))
    for t in targets:
        for ns in plan.noise_seeds:
            df = evaluated(t.target_id, ns, t.noise(plan.scale, kind=plan.kind, noise_seed=ns))
            _check_scope(t, df.attrs.get("injection_stats") or [])
            record(t.target_id, t.level, ns, df)
    channels = None
    if "channel" in plan.levels:
        from robuststats.diagnose._channels import capture_channels

        start = time.perf_counter()
        texts = [it.prompt + it.solution for it in (calibration or items)]
        channels = capture_channels(model, tokenizer, texts, modules=plan.modules,
                                    threshold=plan.channel_threshold,
                                    batch_size=plan.batch_size)
        channels.insert(0, "seed", seed)
        timings.append({"target": "channels", "level": "channel", "seed": seed,
                        "noise_seed": 0, "seconds": time.perf_counter() - start,
                        "injections": 0})
        if progress is not None:
            progress(1)
    return ProbeResult(pd.concat(rows, ignore_index=True), pd.DataFrame(injections),
                       pd.DataFrame(timings), channels, tuple(targets), n_layers, ops_here,
                       tuple(notes))


def _check_scope(target: Target, stats: list[dict[str, Any]]) -> None:
    """Noise must have gone where the target says, and only there."""
    if not stats or not any(r.get("count", 0) for r in stats):
        raise RuntimeError(f"target {target.target_id}: no injection was recorded")
    if target.layers is not None:
        outside = sorted({int(r["layer"]) for r in stats
                          if r.get("count", 0) and int(r["layer"]) not in target.layers})
        if outside:
            raise RuntimeError(f"target {target.target_id}: noise reached layer(s) {outside} "
                               f"outside the target's layers {list(target.layers)}")
    ops = {str(r["op"]) for r in stats if r.get("count", 0)}
    if target.level == "operator" and ops != {target.ops}:
        raise RuntimeError(f"target {target.target_id}: noise reached ops {sorted(ops)}")


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
                  write: bool = True, reuse: bool = True, workers: int = 1) -> Diagnosis:
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
    is the same as with one.
    """
    from robuststats.runs import Run, TrainJob, one_torch_thread, planned_items, preflight, run_hash

    if plan is None:
        plan, ledger_spec = resolve_plan(spec)
    ledger_spec = ledger_spec or spec
    with Run.start(out=out if write else None, runs=runs, signals=False) as run:
        task = preflight(ledger_spec)
        _check_window_early(spec, plan)
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

