"""The one loader of the frozen spec dataclasses and the one integer check of every spec.

The engine's specs (``NoiseSpec``, ``AQNSchedule``), the hypotheses and the tiny model's
sizes are frozen dataclasses: what is validated is what runs. They are built from a
study file's mappings by :func:`from_mapping`, which checks the keys against the fields
(an unknown key gets the "did you mean" hint of :func:`robuststats.errors.did_you_mean`
and the list of allowed keys) before the class validates the values. The pydantic
sections of ``robuststats.config`` compute their hints from their fields the same way
(``config.hints.field_hints``).

:func:`check_whole` is the integer check of specs, sections and commands: a plain
``int`` as YAML and JSON give it (never a bool or a float), with one wording per bound::

    `seed` must be a non-negative integer, got -1.
    `epochs` must be a positive integer, got 0.
    `n_items` must be an integer >= 2, got 1.
    `n_items` must be at most 1,000,000, got 99999999.

This module sits in the base layer (no numpy at import), so the engine, ``config`` and the
command line share it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any, TypeVar

from robuststats.errors import InputError

#: the devices a model can be put on by name (studies, divergence conditions, fits)
DEVICE_PATTERN = re.compile(r"^(cpu|mps|(cuda|npu|xpu)(:\d+)?)$")

__all__ = ["DEVICE_PATTERN", "check_whole", "field_names", "from_mapping"]

T = TypeVar("T")


def check_whole(value: Any, name: str, *, low: int = 0, high: int | None = None,
                what: str | None = None, interval: bool = False) -> int:
    """``value`` if it is an ``int`` (not a bool) in ``[low, high]``.

    Below ``low`` (or not an integer) the message says what it must be: ``what`` when
    given (a declared wording, e.g. ``"an integer ≥ 2"``), else "a non-negative integer"
    (``low`` 0), "a positive integer" (``low`` 1) or "an integer >= low". Above ``high``:
    "must be at most {high:,}". With ``interval`` (and a ``high``) both say "must be an
    integer in [low, high]" (``what``, when given, still words the first).
    """
    span = f"an integer in [{low}, {high:,}]" if interval and high is not None else None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"`{name}` must be {what or span or _at_least(low)}, got {value!r}.")
    if high is not None and value > high:
        raise InputError(f"`{name}` must be {span or f'at most {high:,}'}, got {value!r}.")
    return value


def _at_least(low: int) -> str:
    if low == 0:
        return "a non-negative integer"
    if low == 1:
        return "a positive integer"
    return f"an integer >= {low}"


def field_names(cls: type) -> list[str]:
    """The fields of dataclass ``cls`` in declaration order: the keys a mapping may give."""
    return [f.name for f in dataclasses.fields(cls)]


def from_mapping(cls: type[T], data: Any, name: str, *, required: Sequence[str] = ()) -> T:
    """``cls(**data)`` after the keys of ``data`` are checked against the fields of ``cls``.

    ``name`` says what the mapping is (``"noise spec"``, ``"hypothesis 'H1'"``); a
    non-mapping, an unknown key (with the closest field as a hint and the allowed keys)
    and a missing ``required`` key are :class:`InputError`. The values are the class's to
    validate (its ``__post_init__``).
    """
    from robuststats._validation import check_keys

    return cls(**check_keys(data, name, field_names(cls), required=required))
