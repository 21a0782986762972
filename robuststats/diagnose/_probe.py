"""Probe one trained model: the clean evaluation once, then each target under each noise
seed, then the channel statistics (:func:`probe_model`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from robuststats.diagnose._plan import DiagnosisPlan
from robuststats.diagnose._statistics import CLEAN
from robuststats.diagnose._store import ProbeStore
from robuststats.diagnose._targets import (
    Target,
    layer_targets,
    operator_targets,
    window_targets,
)
from robuststats.engine import ALL_OPS, NoiseSpec
from robuststats.errors import InputError

__all__ = ["ProbeResult", "build_targets", "model_layers", "present_ops", "probe_model"]


#: scale of the presence check (one forward on one prompt, output discarded)
_PRESENCE_SCALE = 1e-3


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
