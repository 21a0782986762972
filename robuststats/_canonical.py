"""The one canonical JSON of the package: what every spec, run and seal hash is taken over.

Keys sorted, no whitespace (``separators=(",", ":")``), so the hash of a mapping does not
depend on key order or formatting. ``spec_hash``, ``run_hash`` and a version's seal all
use it, which is why ``results verify`` can recompute a stored spec's hash.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "canonical_sha256"]


def canonical_json(data: Any) -> bytes:
    """``data`` (JSON-ready) as canonical JSON bytes."""
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def canonical_sha256(data: Any) -> str:
    """SHA-256 (hex) of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(data)).hexdigest()
