"""The probe's plan: a study's ``diagnose:`` section and the command's flags, resolved.

:func:`resolve_plan` turns a study (its ``diagnose:`` section) and command-line overrides
into a :class:`DiagnosisPlan` (flag > study file > default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from robuststats._fields import check_whole
from robuststats.config.bounds import MAX_ITEMS, MAX_NOISE_SEEDS, MAX_SEEDS, check_count
from robuststats.config.diagnose import DiagnoseSpec
from robuststats.config.fields import seed_list
from robuststats.errors import InputError, did_you_mean
from robuststats.runs.spec import StudySpec

__all__ = ["DiagnosisPlan", "resolve_plan"]


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
    if n_items is not None:
        check_whole(n_items, "n_items", low=2, high=MAX_ITEMS)
    elif d.n_items is None and spec.evaluation.n_items is not None \
            and spec.evaluation.n_items < 2:
        raise InputError(f"`evaluation.n_items` is {spec.evaluation.n_items}: a diagnosis "
                         "needs at least 2 items; set `diagnose.n_items` (--n-items) to 2 or "
                         "more.")
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
