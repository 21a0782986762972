"""Engine and statistics objects as fields of the study config (pydantic adapters).

A study file gives ``train_noise``, ``aqn`` and each hypothesis as mappings; these
adapters build the real classes (:class:`~robuststats.engine.NoiseSpec`,
:class:`~robuststats.engine.AQNSchedule`, :class:`~robuststats.stats.Hypothesis`), whose
own validation is the only one, and point their errors at the offending key
(:func:`~robuststats.config.yaml_lines.keyed`). None of them imports torch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator

from robuststats._fields import field_names
from robuststats._validation import check_keys
from robuststats.config.yaml_lines import KeyedError, keyed
from robuststats.engine import AQNSchedule, NoiseSpec
from robuststats.errors import InputError
from robuststats.stats import Hypothesis

__all__ = ["AQN", "MAX_SEED_VALUE", "HypothesisField", "TrainNoise", "as_written",
           "check_seed_field", "seed_list", "written_forms"]

#: keys a study file must give for each hypothesis (``margin`` included: a pre-registered
#: claim states its margin, even when it is 0)
_HYPOTHESIS_REQUIRED = ("id", "metric", "a", "b", "eval_noise", "relation", "margin")


# ---------------------------------------------------------------------- typed values
def _built_from_mapping(cls: Any, bounds: Mapping[str, int] | None = None
                        ) -> Callable[[Any], Any]:
    """Validator: ``None`` or an instance as is, a mapping through ``cls.from_dict``.

    ``bounds`` caps integer keys of the mapping before the class sees them (a count the
    class would allocate: an AQN schedule holds ``num_stages`` values).
    """
    keys = field_names(cls)

    def build(value: Any) -> Any:
        if value is None or isinstance(value, cls):
            return value
        for key, high in (bounds or {}).items():
            given = value.get(key) if isinstance(value, Mapping) else None
            if isinstance(given, int) and not isinstance(given, bool) and given > high:
                raise KeyedError((key,), f"`{key}` must be at most {high:,}, got {given!r}")
        try:
            return cls.from_dict(value)
        except InputError as exc:
            raise keyed(exc, keys) from None

    return build


_noise_spec = _built_from_mapping(NoiseSpec)
#: bounds of an AQN schedule's counts (docs/studies.md, "Bounds")
AQN_BOUNDS = {"num_stages": 10_000, "stages_per_epoch": 10_000, "epochs": 10_000,
              "total_steps": 10_000_000}
_aqn_schedule = _built_from_mapping(AQNSchedule, AQN_BOUNDS)


def _hypothesis(value: Any) -> Hypothesis:
    if isinstance(value, Hypothesis):
        return value
    if not isinstance(value, Mapping):
        raise KeyedError((), f"must be a mapping, got {type(value).__name__}")
    keys = field_names(Hypothesis)
    try:
        # an unknown key first: a misspelt key also explains a "missing" one
        check_keys(value, f"hypothesis {value.get('id', '?')!r}", keys)
    except InputError as exc:
        raise keyed(exc, keys) from None
    for key in _HYPOTHESIS_REQUIRED:
        if key not in value:
            raise KeyedError((), f"missing required key {key!r}")
    try:
        return Hypothesis.from_dict(value)
    except InputError as exc:
        raise keyed(exc, keys) from None


def _to_dict(value: Any) -> Any:
    return None if value is None else value.to_dict()


TrainNoise = Annotated[NoiseSpec | None, PlainValidator(_noise_spec), PlainSerializer(_to_dict)]
AQN = Annotated[AQNSchedule | None, PlainValidator(_aqn_schedule), PlainSerializer(_to_dict)]
HypothesisField = Annotated[Hypothesis, PlainValidator(_hypothesis), PlainSerializer(_to_dict)]


def as_written(data: Any, keys: Sequence[str]) -> dict[str, Any]:
    """The mappings (or lists) under ``keys`` exactly as the input gave them."""
    if not isinstance(data, Mapping):
        return {}
    return {k: copy.deepcopy(data[k]) for k in keys
            if isinstance(data.get(k), (Mapping, list))}


_BUILDERS: dict[str, Callable[[Any], Any]] = {
    "train_noise": _noise_spec,
    "aqn": _aqn_schedule,
    "hypotheses": lambda items: [_hypothesis(h) for h in items],
}


def written_forms(written: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The written forms that still describe ``values`` (key -> the validated object).

    A model changed without validation (``model_copy(update=...)``) keeps its old written
    forms; they are used only while they still build the current objects.
    """
    out = {}
    for key, raw in written.items():
        try:
            same = _BUILDERS[key](raw) == values[key]
        except (ValueError, TypeError):
            same = False
        if same:
            out[key] = copy.deepcopy(raw)
    return out


#: largest seed value: every generator a study uses (numpy, torch, ``random``) takes it
MAX_SEED_VALUE = 2**32 - 1


def check_seed_field(v: int | list[int], *, max_count: int) -> int | list[int]:
    """A seed count in ``[1, max_count]`` or a list of at most ``max_count`` distinct seeds
    in ``[0, MAX_SEED_VALUE]``."""
    if isinstance(v, bool):
        raise ValueError(f"must be a count or a list of integers, got {v!r}")
    if isinstance(v, int):
        if v < 1:
            raise ValueError(f"a count must be >= 1, got {v}")
        if v > max_count:
            raise ValueError(f"a count must be at most {max_count:,}, got {v}")
        return v
    if not v:
        raise ValueError("the list must not be empty")
    if len(v) > max_count:
        raise ValueError(f"the list must hold at most {max_count:,} seeds, got {len(v):,}")
    bad = [s for s in v if s < 0 or s > MAX_SEED_VALUE]
    if bad:
        raise ValueError(f"seeds must be in [0, {MAX_SEED_VALUE}], got {bad[0]}")
    if len(set(v)) != len(v):
        raise ValueError(f"seeds must be distinct, got {v}")
    return list(v)


def seed_list(v: int | list[int]) -> list[int]:
    return list(range(v)) if isinstance(v, int) else list(v)
