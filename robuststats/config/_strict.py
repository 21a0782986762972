"""The one base of every pydantic file schema (study, search, diagnose and sweep sections)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict"]


class Strict(BaseModel):
    """Unknown keys are errors, values are not coerced (``"3"`` is not 3), and a loaded
    spec is frozen: what was validated is what runs, and it hashes the same later."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
