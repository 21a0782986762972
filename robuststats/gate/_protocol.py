"""The evaluation protocol a gate holds fixed: task, items, error model, noise levels and seeds.

A baseline's protocol comes from the resolved study spec in its manifest (a study version),
from the protocol recorded by an earlier gate, or from the protocol an analysis-only version
recorded of its outcomes' source (``robuststats analyze`` of lm-eval samples or Inspect logs:
the harness's task and options, the items' digest, the noise levels and seeds; the error
model stays unrecorded). A candidate is either evaluated under it
(a checkpoint) or checked against it (outcomes, a study version, a run directory): a
different task, split, error model or op scope, or a noise level the candidate lacks, is an
:class:`~robuststats.errors.InputError` that names every difference, before any compute.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from robuststats.errors import InputError
from robuststats.outcomes import UNRECORDED

__all__ = ["Protocol", "protocol_differences", "unrecorded"]


@dataclass(frozen=True)
class Protocol:
    """What an evaluation of one condition was: the conditions a gate must hold fixed.

    Attributes
    ----------
    task : str
        Task name (``arithmetic``, ``gsm8k``, ``package.module:factory``).
    task_params : dict
        Its parameters (data files, prompt, answer extraction, item count).
    split : str
    kind : str
        The inference error model (the condition's ``eval_kind`` or ``evaluation.kind``).
    ops : str
        The ops it perturbs (the condition's ``eval_ops`` or ``evaluation.ops``).
    noise_levels : tuple of float
        Levels evaluated (0 = clean).
    noise_seeds : tuple of int
        Noise draws per noisy level.
    n_items : int or None
        ``evaluation.n_items`` (None: the whole split).
    batch_size : int or None
        Evaluation batch (noisy draws depend on it; not compared).
    """

    task: str
    task_params: dict[str, Any]
    split: str
    kind: str
    ops: str
    noise_levels: tuple[float, ...]
    noise_seeds: tuple[int, ...]
    n_items: int | None = None
    batch_size: int | None = None

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], condition: str, *, where: str) -> Protocol:
        """The protocol of ``condition`` in a resolved study spec (a manifest's ``spec``)."""
        try:
            conditions = spec["conditions"]
            if condition not in conditions:
                raise InputError(f"{where}: no condition {condition!r}; conditions: "
                                 f"{', '.join(map(str, conditions))}.")
            cond = conditions[condition] or {}
            ev = spec["evaluation"]
            levels = ev.get("noise_levels") or [0.0]
            return cls(task=str(spec["task"]["name"]),
                       task_params=dict(spec["task"].get("params") or {}),
                       split=str(ev.get("split", "test")),
                       kind=str(cond.get("eval_kind") or ev.get("kind", "relative_gaussian")),
                       ops=str(cond.get("eval_ops") or ev.get("ops", "matmul_only")),
                       noise_levels=tuple(sorted(float(v) for v in levels)),
                       noise_seeds=tuple(int(v) for v in _seed_list(ev.get("noise_seeds", 1))),
                       n_items=ev.get("n_items"), batch_size=ev.get("batch_size"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"{where}: the manifest's `spec` is not a resolved study spec "
                             f"({type(exc).__name__}: {exc}).") from None

    @classmethod
    def from_dict(cls, data: Any, *, where: str) -> Protocol:
        """A protocol recorded by a gate (:meth:`to_dict`)."""
        try:
            return cls(task=str(data["task"]), task_params=dict(data["task_params"]),
                       split=str(data["split"]), kind=str(data["kind"]), ops=str(data["ops"]),
                       noise_levels=tuple(float(v) for v in data["noise_levels"]),
                       noise_seeds=tuple(int(v) for v in data["noise_seeds"]),
                       n_items=data.get("n_items"), batch_size=data.get("batch_size"))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: the recorded `protocol` is incomplete or malformed "
                             f"({type(exc).__name__}: {exc}).") from None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["noise_levels"] = list(self.noise_levels)
        d["noise_seeds"] = list(self.noise_seeds)
        return d

    @property
    def error_model(self) -> str:
        if UNRECORDED in (self.kind, self.ops):
            return "error model not recorded"
        return f"{self.kind} on {self.ops}"


def _seed_list(value: Any) -> list[int]:
    return list(range(value)) if isinstance(value, int) else list(value)


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def protocol_differences(baseline: Protocol, candidate: Protocol,
                         levels: Sequence[float]) -> list[str]:
    """Every way ``candidate`` was not evaluated as ``baseline`` at ``levels``.

    Compared: task and its parameters, split, error model (kind and ops), that every gate
    level is among the candidate's levels, and ``n_items``. Noise seeds and batch size are
    not: they change the draws, not the protocol (the gate reports them). A field one side
    left :data:`~robuststats.outcomes.UNRECORDED` (a harness records no error model) is not
    compared (:func:`unrecorded` names them for the report).
    """
    out = []
    both = lambda a, b: UNRECORDED not in (a, b)  # noqa: E731 - a field both sides record
    if both(baseline.task, candidate.task):
        if baseline.task != candidate.task:
            out.append(f"task {baseline.task!r} vs {candidate.task!r}")
        keys = sorted(set(baseline.task_params) | set(candidate.task_params))
        for key in keys:
            a, b = baseline.task_params.get(key), candidate.task_params.get(key)
            if a != b:
                out.append("the items' documents differ (a digest of item ids and document "
                           "hashes)" if key == "items_sha256"
                           else f"task.params.{key} {_show(a)} vs {_show(b)}")
    if both(baseline.split, candidate.split) and baseline.split != candidate.split:
        out.append(f"split {baseline.split!r} vs {candidate.split!r}")
    if both(baseline.kind, candidate.kind) and baseline.kind != candidate.kind:
        out.append(f"error model {baseline.kind!r} vs {candidate.kind!r}")
    if both(baseline.ops, candidate.ops) and baseline.ops != candidate.ops:
        out.append(f"noise ops {baseline.ops!r} vs {candidate.ops!r}")
    have = set(candidate.noise_levels)
    lacking = [lv for lv in levels if not any(abs(lv - h) <= 1e-12 for h in have)]
    if lacking:
        out.append(f"eval_noise {', '.join(f'{v:g}' for v in lacking)} not evaluated "
                   f"(candidate levels: {', '.join(f'{v:g}' for v in candidate.noise_levels)})")
    if baseline.n_items != candidate.n_items:
        out.append(f"evaluation.n_items {baseline.n_items} vs {candidate.n_items}")
    return out


def unrecorded(*protocols: Protocol) -> list[str]:
    """The protocol fields some of ``protocols`` did not record (not compared)."""
    names = {"task": "task", "split": "split", "kind": "error model", "ops": "noise ops"}
    return [label for field, label in names.items()
            if any(getattr(p, field) == UNRECORDED for p in protocols)]
