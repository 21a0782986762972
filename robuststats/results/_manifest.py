"""What a result version records besides its files: the typed manifest every command hands
to :meth:`ResultStore.publish <robuststats.results.ResultStore.publish>`.

The store adds ``study``, ``version``, ``sealed``, ``files`` and the ``seal`` when it seals
the version; a command supplies the rest. ``to_dict`` writes the keys in one order for every
command: ``kind`` (absent for a study's own version), the command's facts in the order it
gives them, then ``row_counts``, ``seconds``, ``environment`` and ``cells`` where given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Manifest"]


@dataclass(frozen=True)
class Manifest:
    """A version's record (see the module docstring)."""

    #: "gate", "diagnosis", "search", "divergence"; None for a study's version
    kind: str | None
    #: what the command did and with which spec (JSON-ready values)
    facts: Mapping[str, Any] = field(default_factory=dict)
    #: rows per stored table
    row_counts: Mapping[str, int] | None = None
    #: versions and machine facts (:func:`robuststats.runs.environment`)
    environment: Mapping[str, Any] | None = None
    #: SHA-256 and row count per outcome cell (:func:`robuststats.outcomes.cell_digests`)
    cells: Mapping[str, Any] | None = None
    #: wall-clock seconds of the command, when its facts do not already hold them
    seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.kind is None else {"kind": self.kind}
        out.update(self.facts)
        for key in ("row_counts", "seconds", "environment", "cells"):
            value = getattr(self, key)
            if value is not None:
                out[key] = dict(value) if isinstance(value, Mapping) else value
        return out
