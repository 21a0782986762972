"""Hints for an unknown key of a schema, computed from its fields (no hand-kept tables)."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from robuststats.config.yaml_lines import KeyPath
from robuststats.errors import closest_match

__all__ = ["field_hints"]


def field_hints(root: type[BaseModel]) -> Callable[[KeyPath], str]:
    """``suggest(path)`` for :func:`validate_keyed`, computed from ``root``'s fields: the
    keys allowed where the unknown key ``path[-1]`` stands, with the closest of them.

    The parent of the key is found by walking the annotations from ``root``: a field whose
    type is a model descends into it, a ``dict[str, Model]`` field skips one key (a
    condition's name) and descends into the model, ``Model | None`` is the model.
    """

    def suggest(path: KeyPath) -> str:
        parent, key = path[:-1], path[-1] if path else ""
        model = _model_at(root, parent)
        known = model.model_fields if model is not None else {}
        close = closest_match(key, known)
        return f"; did you mean {close!r}?" if close else f"; allowed keys: {sorted(known)}."

    return suggest


def _model_at(root: type[BaseModel], path: KeyPath) -> type[BaseModel] | None:
    current: Any = root
    for segment in path:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(segment))
            if field is None:
                return None
            current = field.annotation
        elif typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """``Model | None`` (or ``Optional[Model]``) -> ``Model``; anything else unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation
