"""The one base of every pydantic file schema (study, search, diagnose and sweep sections)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict", "omit_unset"]


class Strict(BaseModel):
    """Unknown keys are errors, values are not coerced (``"3"`` is not 3), and a loaded
    spec is frozen: what was validated is what runs, and it hashes the same later."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def omit_unset(data: dict, *keys: str) -> dict:
    """``data`` (a schema's dump) without those of ``keys`` whose value is None: a key added
    to a schema stays out of the dumped, hashed spec until a file uses it, so the studies
    written before it keep their hash."""
    for key in keys:
        if data.get(key) is None:
            data.pop(key, None)
    return data
