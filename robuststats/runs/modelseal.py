"""The seal of a cached model: the size and SHA-256 of each of its files, checked on reuse.

A run directory publishes each trained model by renaming a complete temporary directory
that holds ``model/`` (what the trainer saved) and a ``COMPLETE`` marker. The marker
records every file of ``model/`` with its size and SHA-256, so a model altered in place
after it was published (its weights replaced, a file edited or removed) is told apart from
the model the finished cells were computed from: :func:`model_problem` names the first
difference. A marker from before seals (a plain time) seals nothing and is adopted as it
is. Like a cell's record, the seal detects a change, not someone who rewrites the model
and its marker consistently.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from robuststats._atomic import atomic_write_bytes
from robuststats.results import sha256_file

__all__ = ["MARKER", "model_problem", "seal_model"]

#: the marker file of a published model directory
MARKER = "COMPLETE"


def _listing(model: Path) -> dict[str, dict[str, Any]]:
    files = {}
    for path in sorted(p for p in model.rglob("*") if p.is_file()):
        files[path.relative_to(model).as_posix()] = {"bytes": path.stat().st_size,
                                                     "sha256": sha256_file(path)}
    return files


def seal_model(directory: Path) -> None:
    """Write ``directory/COMPLETE``: the time and every file of ``directory/model``."""
    record = {"written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "files": _listing(directory / "model")}
    atomic_write_bytes(directory / MARKER, json.dumps(record, indent=1).encode())


def model_problem(directory: Path) -> str | None:
    """What differs between ``directory/model`` and its seal, or None (also for a marker
    without file digests, written before models were sealed)."""
    try:
        record = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        return None
    sealed, now = record["files"], _listing(directory / "model")
    for name in sorted(set(sealed) | set(now)):
        if name not in now:
            return f"its file {name!r} is gone"
        if name not in sealed:
            return f"it has a file {name!r} it was not published with"
        if sealed[name] != now[name]:
            return f"its file {name!r} changed after it was published (SHA-256 differs)"
    return None
