"""The one streamed file digest of the package: SHA-256 read in 1 MiB blocks.

Sealed result versions, cached models' seals and checkpoint identities
(:mod:`robuststats.models.identity`) all hash files with it, so a file has one digest
whichever of them records it, and no file is ever read into memory whole.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["sha256_file"]


def sha256_file(path: str | Path) -> str:
    """SHA-256 (hex) of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
